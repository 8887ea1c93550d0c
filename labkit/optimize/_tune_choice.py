"""What :func:`labkit.tune` found: a :class:`Choice` and one :class:`Candidate` per set-up.

Plain data: the text table (:meth:`Choice.summary`) and the HTML table (:meth:`Choice.show`)
are views of it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from labkit._format import fmt_bytes, fmt_count, fmt_time
from labkit.optimize.recipe import Recipe

# what became of a candidate, in the order the table lists them
STATUSES = (
    "picked",
    "within noise",
    "slower",
    "not timed",
    "over budget",
    "skipped",
    "refused",
    "failed",
)


@dataclass(frozen=True)
class Candidate:
    """One set-up :func:`labkit.tune` considered: a Recipe at a batch size.

    Args:
        label: The Recipe's label (or the refused combination, written out).
        batch_size: Samples per step (0 for a refused combination).
        recipe: The Recipe (``None`` when it was refused).
        predicted_peak: The planned peak in bytes (``None``: not planned).
        status: ``"picked"``, ``"within noise"`` (not measurably slower than the pick),
            ``"slower"`` (measurably slower), ``"over budget"``, ``"refused"`` (the Recipe
            refused the combination), ``"failed"`` (the step raised) or ``"not timed"``.
        reason: Why, in words (over budget by how much, the Recipe's reason, ...).
        samples_per_s: Median samples per second over the timed rounds.
        samples_per_s_low: Lower end of its 95% interval.
        samples_per_s_high: Upper end of its 95% interval.
        slower_by: The pick's speed over this one's (1.20: the pick is 20% faster) with
            its interval, ``(estimate, low, high)``.
        flops: FLOPs of one step as planned (``FlopCounterMode``'s formulas).
        rounds: Timed rounds it took part in.
        measured: How its peak was found: ``"planned"`` or ``"measured"`` (a model the
            plan could not run).

    Example:
        >>> Candidate("fp32", 64, predicted_peak=3 * 2**20, status="over budget",
        ...           reason="over budget by 512.00 KiB")
        Candidate('fp32', batch=64, peak=3.00 MiB, over budget)
    """

    label: str
    batch_size: int
    recipe: Recipe | None = None
    predicted_peak: int | None = None
    status: str = "not timed"
    reason: str = ""
    samples_per_s: float | None = None
    samples_per_s_low: float | None = None
    samples_per_s_high: float | None = None
    slower_by: tuple[float, float, float] | None = None
    flops: int | None = None
    rounds: int = 0
    measured: str = "planned"

    def __repr__(self) -> str:
        peak = fmt_bytes(self.predicted_peak) if self.predicted_peak is not None else "-"
        speed = f", {self.samples_per_s:.1f} samples/s" if self.samples_per_s else ""
        return (
            f"Candidate({self.label!r}, batch={self.batch_size}, peak={peak}{speed}, {self.status})"
        )


@dataclass(frozen=True)
class Choice:
    """The fastest set-up :func:`labkit.tune` found that fits the memory budget.

    Args:
        recipe: The picked :class:`~labkit.optimize.Recipe` (precision, checkpointing, ...).
        batch_size: The picked batch size.
        predicted_peak: Its planned peak in bytes.
        measured_peak: Its peak in one real step at that batch size on the model's device
            (CPU: labkit's memory tracker, as ``labkit.memory``; CUDA: the caching
            allocator's reserved bytes); ``None`` when it was not run (interrupted).
        samples_per_s: Median samples per second over the timed rounds.
        samples_per_s_low: Lower end of its interval.
        samples_per_s_high: Upper end of its interval.
        budget: The bytes the step had to fit in.
        budget_how: Where the budget came from.
        candidates: Every set-up considered, the pick first.
        flops_per_s: Achieved FLOP/s: the planned step's FLOPs over its median step time.
        mfu: Model FLOPs utilization against the device's peak for the precision (CUDA,
            known devices); ``None`` otherwise.
        utilization: How ``flops_per_s`` and ``mfu`` were taken, or why there is no MFU.
        device: Where it was measured.
        seconds: How long tuning took.
        ended_by: What ended the timing: ``"separated"`` (the leader's interval left every
            other's), ``"budget"`` (``budget_s`` ran out), ``"one candidate"`` (one set-up
            fitted) or ``"interrupted"`` (KeyboardInterrupt: the figures so far).
        level: Confidence level of the intervals.
        notes: How the figures were taken and what was assumed.

    Example:
        >>> choice = labkit.tune(model, x, budget=2**30, optimizer=opt)   # doctest: +SKIP
        >>> choice.recipe, choice.batch_size                             # doctest: +SKIP
        >>> print(choice.summary())                                      # doctest: +SKIP
    """

    recipe: Recipe
    batch_size: int
    predicted_peak: int
    measured_peak: int | None
    samples_per_s: float | None
    samples_per_s_low: float | None
    samples_per_s_high: float | None
    budget: int
    budget_how: str
    candidates: tuple[Candidate, ...] = ()
    flops_per_s: float | None = None
    mfu: float | None = None
    utilization: str = ""
    device: str = "cpu"
    seconds: float = 0.0
    ended_by: str = ""
    level: float = 0.95
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def label(self) -> str:
        """``'<recipe label> @ batch N'``."""
        return f"{self.recipe.label} @ batch {self.batch_size}"

    def __repr__(self) -> str:
        speed = "-" if self.samples_per_s is None else f"{self.samples_per_s:.1f}"
        if self.samples_per_s_low is not None and self.samples_per_s_high is not None:
            speed += f" [{self.samples_per_s_low:.1f}-{self.samples_per_s_high:.1f}]"
        measured = "-" if self.measured_peak is None else fmt_bytes(self.measured_peak)
        return (
            f"Choice({self.recipe!r}, batch_size={self.batch_size}, "
            f"predicted_peak={fmt_bytes(self.predicted_peak)}, measured_peak={measured}, "
            f"budget={fmt_bytes(self.budget)}, samples_per_s={speed}, "
            f"candidates={len(self.candidates)}, ended_by={self.ended_by!r})"
        )

    # ------------------------------------------------------------------ views
    def rows(self) -> list[list[str]]:
        """The table as text cells, header first: set-up, batch, predicted peak, samples/s
        with its interval, FLOP/s, verdict. Sizes skipped for one reason share a row."""
        head = [
            "set-up",
            "batch",
            "predicted peak",
            f"samples/s [{self.level:.0%}]",
            "FLOP/s",
            "verdict",
        ]
        out = [head]
        skipped: dict[tuple[str, str], list[str]] = {}  # one row per set-up and reason
        for c in self.candidates:
            if c.status == "skipped" and c.predicted_peak is None:
                sizes = skipped.setdefault((c.label, c.reason), [])
                if not sizes:
                    out.append([c.label, "", "-", "-", "-", _verdict(c)])
                sizes.append(str(c.batch_size))
                continue
            peak = fmt_bytes(c.predicted_peak) if c.predicted_peak is not None else "-"
            if c.measured == "measured" and c.predicted_peak is not None:
                peak += " (measured)"
            out.append([c.label, str(c.batch_size or "-"), peak, _speed(c), _flops(c), _verdict(c)])
        for row in out[1:]:
            if not row[1]:
                row[1] = ",".join(skipped[(row[0], row[5].split(": ", 1)[1])])
        return out

    def summary(self) -> str:
        """A text table of every candidate, then the pick, its utilization and the notes."""
        table = self.rows()
        widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
        lines = [
            "  ".join(
                c.ljust(w) if i in (0, 5) else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            ).rstrip()
            for r in table
        ]
        lines.insert(1, "-" * max(len(x) for x in lines))
        measured = "not run" if self.measured_peak is None else fmt_bytes(self.measured_peak)
        head = (
            f"tune on {self.device}: {self.label}; predicted peak "
            f"{fmt_bytes(self.predicted_peak)}, measured {measured}, budget "
            f"{fmt_bytes(self.budget)} ({self.budget_how}); tuned in {fmt_time(self.seconds)}, "
            f"timing ended by {self.ended_by}"
        )
        notes = [f"- {self.utilization}"] if self.utilization else []
        notes += [f"- {n}" for n in self.notes]
        return "\n".join([head, *lines, *(["", "notes:", *notes] if notes else [])])

    def to_html(self) -> str:
        """The table as HTML (JupyterLab's CSS variables, so light and dark themes both read)."""
        table = self.rows()
        cell = 'style="padding:2px 8px;text-align:{}"'
        head = "".join(f"<th {cell.format('left')}>{html.escape(h)}</th>" for h in table[0])
        body = []
        for r in table[1:]:
            weight = "font-weight:bold;" if r[5].startswith("picked") else ""
            tds = "".join(
                f"<td {cell.format('left' if i in (0, 5) else 'right')}>{html.escape(x)}</td>"
                for i, x in enumerate(r)
            )
            body.append(f'<tr style="{weight}">{tds}</tr>')
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in (self.utilization, *self.notes) if n)
        summary = html.escape(self.summary().splitlines()[0])
        return (
            f'<div style="color:var(--jp-ui-font-color1);font-family:var(--jp-code-font-family,'
            f'monospace);font-size:12px"><div>{summary}</div><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table><ul>{notes}</ul></div>"
        )

    def _repr_html_(self) -> str:
        return self.to_html()

    def show(self) -> Any:
        """Display the table in a notebook (HTML), or print it in a terminal."""
        try:
            from IPython import get_ipython
            from IPython.display import HTML, display
        except ImportError:  # pragma: no cover - IPython comes with the notebook extras
            print(self.summary())
            return None
        if get_ipython() is None:
            print(self.summary())
            return None
        display(HTML(self.to_html()))
        return None


def _speed(c: Candidate) -> str:
    if c.samples_per_s is None:
        return "-"
    if c.samples_per_s_low is None or c.samples_per_s_high is None:
        return f"{c.samples_per_s:.1f}"
    return f"{c.samples_per_s:.1f} [{c.samples_per_s_low:.1f}-{c.samples_per_s_high:.1f}]"


def _flops(c: Candidate) -> str:
    if c.flops is None or not c.samples_per_s or not c.batch_size:
        return "-"
    return fmt_count(c.flops * c.samples_per_s / c.batch_size)


def _verdict(c: Candidate) -> str:
    return c.status + (f": {c.reason}" if c.reason else "")
