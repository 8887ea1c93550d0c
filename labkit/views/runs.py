"""RunsView: several runs side by side: chosen metrics of chosen runs overlaid, and a table.

A thin adapter over :class:`labkit.train.run_table.Runs` (plain data): the runs' rows and their
(already min/max-downsampled) curves go to the browser as traits; the browser draws one
uPlot chart per metric with one curve per run (step or wall-time axis, EMA smoothing, log
scale, one hover cursor shared by every chart) and a sortable, filterable table of the
runs and their hparams, whose checkboxes choose the runs drawn. At first the best
``top`` runs by one metric are drawn (``rank_by``; the view says which), each as one
legend entry (the smoothed curve solid, the raw one faint behind it), in 20 colours before
a colour comes again with a dashed line. Choices made in the
browser come back in ``metrics``, ``selected``, ``x_axis``, ``smoothing`` and ``log``.
Like every labkit view it leaves a final-state picture (a monospace table and a PNG of
the curves) for reopened notebooks and HTML exports.

Traits sent (the front end reads these names only):

- ``rows``: one dict per run: ``name``, ``state`` (what it is now: ``running``,
  ``crashed``, ``finished``, ``stopped``, ``failed``; ``status`` is the same word),
  ``state_note`` (the state in a sentence: the lock's holder, the last step, epoch and
  time; "" for a run that ended), ``steps``, ``epochs``, ``wall_time``
  (seconds or None), ``last`` and ``best`` (metric -> value), ``hparams`` (flat
  name -> number or text: the fit options and the Recipe's changed fields);
- ``curves``: run name -> metric -> ``{"x": steps, "t": seconds since the run started
  (None where unknown), "y": values}``;
- ``all_metrics``: the metrics some run has, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets as t

from labkit._assets import bundle_path
from labkit.views._keep import KeepsPicture

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_DEFAULT_RUNS = 10  # runs drawn at first (the table's checkboxes add more)
#: Run colours: tab10, then ten more hues; past 20 the colours come again dashed
#: (as ``RUN_COLORS`` / ``RUN_DASHES`` in widgets/src/_charts.js).
RUN_COLORS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#5254a3",
    "#8ca252",
    "#bd9e39",
    "#ad494a",
    "#a55194",
]
RUN_DASHES: list[tuple[float, ...] | None] = [None, (6, 3), (2, 2), (8, 3, 2, 3)]


def run_style(i: int) -> tuple[str, tuple[float, ...] | None]:
    """The ``i``-th run's colour and dash pattern (None: solid).

    Example:
        >>> run_style(0), run_style(20)
        (('#1f77b4', None), ('#1f77b4', (6, 3)))
    """
    dash = RUN_DASHES[(i // len(RUN_COLORS)) % len(RUN_DASHES)]
    return RUN_COLORS[i % len(RUN_COLORS)], dash


_HPARAMS = ("lr", "seed", "max_epochs", "batch_size", "optimizer", "devices", "precision")


def _hparams(row: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.options.items():
        if isinstance(v, bool | int | float | str) or v is None:
            out[k] = v
    base = _default_recipe()
    for k, v in row.recipe.items():
        if base.get(k, object()) != v:
            out[f"recipe.{k}"] = v if isinstance(v, bool | int | float | str) else str(v)
    return out


def _default_recipe() -> dict[str, Any]:
    from labkit.optimize.recipe import Recipe

    return Recipe().to_dict()


def rows_payload(runs: Any) -> list[dict[str, Any]]:
    """The ``rows`` trait of :class:`RunsView` for a :class:`~labkit.train.run_table.Runs`."""
    return [
        {
            "name": r.name,
            "status": r.status,
            "state": r.state,
            "state_note": r.state_note,
            "steps": r.steps,
            "epochs": r.epochs,
            "wall_time": r.wall_time,
            "last": dict(r.last),
            "best": dict(r.best),
            "hparams": _hparams(r),
            "error": r.error,
        }
        for r in runs.rows
    ]


def _default_metrics(all_metrics: list[str]) -> list[str]:
    chosen = [m for m in all_metrics if m == "loss" or m.startswith("val_")]
    return chosen or all_metrics[:2]


def default_rank_metric(metrics: Sequence[str]) -> str:
    """The metric the runs drawn first are chosen by: the first validation metric charted,
    else ``loss``, else the first charted metric ("" without one)."""
    val = [m for m in metrics if m.startswith("val_")]
    return val[0] if val else "loss" if "loss" in metrics else (list(metrics) or [""])[0]


def lower_is_better(runs: Any, metric: str) -> bool:
    """Whether a run's best ``metric`` is its lowest value, read from the runs themselves
    (``RunRow.best`` is the lowest or the highest value of each curve)."""
    for row in runs.rows:
        ys = [
            y for y in runs.curves.get(row.name, {}).get(metric, {}).get("y", []) if y is not None
        ]
        best = row.best.get(metric)
        if best is not None and ys and min(ys) != max(ys):
            return bool(best == min(ys))
    return True


def best_runs(runs: Any, metric: str, top: int) -> tuple[list[str], str]:
    """The ``top`` runs with the best ``metric`` (runs without it after them, by name),
    and the sentence that says so."""
    lower = lower_is_better(runs, metric)
    have = [r for r in runs.rows if r.best.get(metric) is not None]
    have.sort(key=lambda r: r.best[metric] if lower else -r.best[metric])
    rest = [r for r in runs.rows if r.best.get(metric) is None]
    names = [r.name for r in [*have, *rest]][:top]
    n = len(runs.rows)
    which = f"all {n} runs" if n <= top else f"the best {top} of {n} runs"
    note = (
        f"drawn: {which}, ranked by best {metric} ({'lower' if lower else 'higher'} is "
        "better); tick runs in the table to draw others"
    )
    if rest and len(have) < top and n > len(have):
        note += f"; {len(rest)} without {metric} last"
    return names, note


class RunsView(KeepsPicture, anywidget.AnyWidget):
    """Runs overlaid metric by metric, with a sortable, filterable table of runs and hparams.

    Args:
        runs: A :class:`~labkit.train.run_table.Runs` (``labkit.runs(logdir)``).
        metrics: Metrics charted (default: ``loss`` and the validation metrics).
        runs_shown: Runs drawn (default: the best ``top`` by ``rank_by``; the table
            chooses more).
        rank_by: The metric the runs drawn first are ranked by (their best value, lowest
            for a loss or error, else highest); default: the first validation metric
            charted, else ``loss``.
        top: How many runs are drawn first.
        x: ``"step"`` or ``"time"`` (wall-clock seconds since each run started).
        smoothing: EMA weight in ``[0, 1)`` as TensorBoard's (validation curves unsmoothed).
        log: Log-scale y axes.

    Returns:
        A widget; ``Runs.show()`` makes one.

    Example:
        >>> view = labkit.runs("labkit_runs").show(metrics=["loss", "val_acc"])  # doctest: +SKIP
    """

    rows = t.List(t.Dict()).tag(sync=True)
    curves = t.Dict().tag(sync=True)
    all_metrics = t.List(t.Unicode()).tag(sync=True)
    metrics = t.List(t.Unicode()).tag(sync=True)
    selected = t.List(t.Unicode()).tag(sync=True)
    x_axis = t.Unicode("step").tag(sync=True)
    smoothing = t.Float(0.6).tag(sync=True)
    log = t.Bool(False).tag(sync=True)
    rank_by = t.Unicode("").tag(sync=True)
    rank_note = t.Unicode("").tag(sync=True)

    @property
    def _esm(self) -> str:  # read by AnyWidget.__init__
        return bundle_path("runs").read_text()

    def __init__(
        self,
        runs: Any,
        *,
        metrics: Sequence[str] | None = None,
        runs_shown: Sequence[str] | None = None,
        x: str = "step",
        smoothing: float = 0.6,
        log: bool = False,
        rank_by: str | None = None,
        top: int = MAX_DEFAULT_RUNS,
        **kwargs: Any,
    ) -> None:
        if x not in ("step", "time"):
            raise ValueError(f"x must be 'step' or 'time', got {x!r}")
        if not 0 <= smoothing < 1:
            raise ValueError(f"smoothing is an EMA weight in [0, 1), got {smoothing!r}")
        names = [r.name for r in runs.rows]
        unknown = [n for n in (runs_shown or []) if n not in names]
        if unknown:
            raise ValueError(f"no run named {unknown[0]!r}; runs: {names}")
        all_metrics = list(runs.metrics)
        missing = [m for m in (metrics or []) if m not in all_metrics]
        if missing:
            raise ValueError(f"no run has the metric {missing[0]!r}; metrics: {all_metrics}")
        if rank_by is not None and rank_by not in all_metrics:
            raise ValueError(f"rank_by: no run has the metric {rank_by!r}; metrics: {all_metrics}")
        if not isinstance(top, int) or top < 1:
            raise ValueError(f"top is how many runs are drawn first, an int >= 1; got {top!r}")
        self.runs = runs
        charted = list(metrics) if metrics else _default_metrics(all_metrics)
        rank = rank_by if rank_by is not None else default_rank_metric(charted)
        if runs_shown:
            shown, note = list(runs_shown), f"drawn: the {len(runs_shown)} runs asked for"
        elif rank:
            shown, note = best_runs(runs, rank, top)
        else:
            shown, note = names[:top], f"drawn: the first {min(top, len(names))} runs by name"
        super().__init__(
            rows=rows_payload(runs),
            curves=runs.curves,
            all_metrics=all_metrics,
            metrics=charted,
            selected=shown,
            x_axis=x,
            smoothing=smoothing,
            log=log,
            rank_by=rank,
            rank_note=note,
            **kwargs,
        )

    # ------------------------------------------------------------------ pictures
    def to_png(self) -> bytes:
        """The charts as shown now (chosen metrics of chosen runs), as a PNG (matplotlib)."""
        from labkit.views._static import _png

        return _png(self.to_figure())

    def to_figure(self) -> Figure:
        """The figure of :meth:`to_png`: one legend entry per run (smoothed as the view
        smooths it, the raw curve faint behind it), the runs' colours and dashes."""
        from labkit.views._static import _figure

        order = [r["name"] for r in self.rows]
        metrics = list(self.metrics) or list(self.all_metrics)[:1]
        fig = _figure(4.0 * max(1, min(len(metrics), 3)), 2.8 * (1 + (len(metrics) - 1) // 3))
        fig.set_layout_engine("constrained")  # room for the legend outside the charts
        cols = min(len(metrics), 3) or 1
        key = "t" if self.x_axis == "time" else "x"
        for i, metric in enumerate(metrics):
            ax = fig.add_subplot((len(metrics) + cols - 1) // cols, cols, i + 1)
            for name in self.selected:
                c = self.curves.get(name, {}).get(metric)
                if not c:
                    continue
                pts = [(a, b) for a, b in zip(c[key], c["y"], strict=True) if a is not None]
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                color, dash = run_style(order.index(name) if name in order else 0)
                style: dict[str, Any] = {"color": color, "label": name}
                if dash:
                    style["dashes"] = dash
                if metric.startswith("val_"):
                    ax.plot(xs, ys, lw=1.1, marker="o", ms=3, **style)
                elif self.smoothing > 0:
                    ax.plot(xs, ys, lw=0.8, color=color, alpha=0.3)  # raw: no legend entry
                    ax.plot(xs, ema(ys, self.smoothing), lw=1.3, **style)
                else:
                    ax.plot(xs, ys, lw=1.1, **style)
            if self.log:
                ax.set_yscale("log")
            ax.set_title(metric, fontsize=9)
            ax.set_xlabel("wall time (s)" if self.x_axis == "time" else "step", fontsize=8)
            ax.tick_params(labelsize=7)
        handles, labels = fig.axes[0].get_legend_handles_labels() if fig.axes else ([], [])
        if handles:
            fig.legend(handles, labels, fontsize=7, loc="outside right upper", frameon=False)
        if self.rank_note:
            fig.suptitle(self.rank_note, fontsize=7, color="#444")
        return fig

    def _picture(self) -> dict[str, str]:
        from labkit.views._static import figure_bundle

        text = (
            f"{self.rank_note}\n\n{self.runs.summary()}" if self.rank_note else self.runs.summary()
        )
        return figure_bundle(self.to_figure(), text)

    def __repr__(self) -> str:
        return (
            f"RunsView(runs={len(self.rows)}, shown={len(self.selected)}, "
            f"metrics={list(self.metrics)}, x={self.x_axis!r}, smoothing={self.smoothing}, "
            f"log={self.log})"
        )


def ema(ys: Sequence[float], weight: float) -> list[float]:
    """TensorBoard's debiased EMA, as the charts smooth (``ema`` in widgets/src/_series.js);
    non-finite values pass through."""
    import math

    out, last, n = [], 0.0, 0
    for y in ys:
        if not math.isfinite(y):
            out.append(y)
            continue
        last = last * weight + (1 - weight) * y
        n += 1
        out.append(last / (1 - weight**n))
    return out
