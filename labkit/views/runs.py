"""RunsView: several runs side by side: chosen metrics of chosen runs overlaid, and a table.

A thin adapter over :class:`labkit.train.run_table.Runs` (plain data): the runs' rows and their
(already min/max-downsampled) curves go to the browser as traits; the browser draws one
uPlot chart per metric with one curve per run (step or wall-time axis, EMA smoothing, log
scale, one hover cursor shared by every chart) and a sortable, filterable table of the
runs and their hparams, whose checkboxes choose the runs drawn. Choices made in the
browser come back in ``metrics``, ``selected``, ``x_axis``, ``smoothing`` and ``log``.
Like every labkit view it leaves a final-state picture (a monospace table and a PNG of
the curves) for reopened notebooks and HTML exports.

Traits sent (the front end reads these names only):

- ``rows``: one dict per run: ``name``, ``status``, ``steps``, ``epochs``, ``wall_time``
  (seconds or None), ``last`` and ``best`` (metric -> value), ``hparams`` (flat
  name -> number or text: the fit options and the Recipe's changed fields);
- ``curves``: run name -> metric -> ``{"x": steps, "t": seconds since the run started
  (None where unknown), "y": values}``;
- ``all_metrics``: the metrics some run has, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anywidget
import traitlets as t

from labkit.views._assets import bundle_path
from labkit.views._keep import KeepsPicture

MAX_DEFAULT_RUNS = 10  # runs drawn at first (the table's checkboxes add more)
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
    return [{"name": r.name, "status": r.status, "steps": r.steps, "epochs": r.epochs,
             "wall_time": r.wall_time, "last": dict(r.last), "best": dict(r.best),
             "hparams": _hparams(r), "error": r.error}
            for r in runs.rows]  # fmt: skip


def _default_metrics(all_metrics: list[str]) -> list[str]:
    chosen = [m for m in all_metrics if m == "loss" or m.startswith("val_")]
    return chosen or all_metrics[:2]


class RunsView(KeepsPicture, anywidget.AnyWidget):
    """Runs overlaid metric by metric, with a sortable, filterable table of runs and hparams.

    Args:
        runs: A :class:`~labkit.train.run_table.Runs` (``labkit.runs(logdir)``).
        metrics: Metrics charted (default: ``loss`` and the validation metrics).
        runs_shown: Runs drawn (default: the first ten; the table chooses more).
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

    @property
    def _esm(self) -> str:  # read by AnyWidget.__init__
        return bundle_path("runs").read_text()

    def __init__(self, runs: Any, *, metrics: Sequence[str] | None = None,
                 runs_shown: Sequence[str] | None = None, x: str = "step",
                 smoothing: float = 0.6, log: bool = False, **kwargs: Any) -> None:  # fmt: skip
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
        self.runs = runs
        super().__init__(
            rows=rows_payload(runs), curves=runs.curves, all_metrics=all_metrics,
            metrics=list(metrics) if metrics else _default_metrics(all_metrics),
            selected=list(runs_shown) if runs_shown else names[:MAX_DEFAULT_RUNS],
            x_axis=x, smoothing=smoothing, log=log, **kwargs,
        )  # fmt: skip

    # ------------------------------------------------------------------ pictures
    def to_png(self) -> bytes:
        """The charts as shown now (chosen metrics of chosen runs), as a PNG (matplotlib)."""
        from labkit.views._static import _figure, _png

        metrics = list(self.metrics) or list(self.all_metrics)[:1]
        fig = _figure(4.0 * max(1, min(len(metrics), 3)), 2.8 * (1 + (len(metrics) - 1) // 3))
        cols = min(len(metrics), 3) or 1
        key = "t" if self.x_axis == "time" else "x"
        for i, metric in enumerate(metrics):
            ax = fig.add_subplot((len(metrics) + cols - 1) // cols, cols, i + 1)
            for j, name in enumerate(self.selected):
                c = self.curves.get(name, {}).get(metric)
                if not c:
                    continue
                pts = [(a, b) for a, b in zip(c[key], c["y"], strict=True) if a is not None]
                style: dict[str, Any] = (
                    {"marker": "o", "ms": 3} if metric.startswith("val_") else {}
                )
                ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.1, label=name,
                        color=_RUN_COLORS[j % len(_RUN_COLORS)], **style)  # fmt: skip
            if self.log:
                ax.set_yscale("log")
            ax.set_title(metric, fontsize=9)
            ax.set_xlabel("wall time (s)" if self.x_axis == "time" else "step", fontsize=8)
            ax.tick_params(labelsize=7)
        handles, labels = fig.axes[0].get_legend_handles_labels() if fig.axes else ([], [])
        if handles:
            fig.legend(handles, labels, fontsize=7, loc="upper right", frameon=False)
        fig.tight_layout()
        return _png(fig)

    def _picture(self) -> dict[str, str]:
        from labkit.views._base import png_img
        from labkit.views._keep import png_b64, pre

        png = self.to_png()
        img = png_img(png, alt=f"runs: {', '.join(self.metrics)}")
        body = pre(self.runs.summary())
        return {"image/png": png_b64(png),
                "text/html": f'<div class="lk-final lk-runs-final">{body}{img}</div>'}  # fmt: skip

    def __repr__(self) -> str:
        return (f"RunsView(runs={len(self.rows)}, shown={len(self.selected)}, "
                f"metrics={list(self.metrics)}, x={self.x_axis!r}, smoothing={self.smoothing}, "
                f"log={self.log})")  # fmt: skip


_RUN_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf"]  # fmt: skip  # tab10, as widgets/src/_charts.js
