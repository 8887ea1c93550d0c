"""What ``labkit.compare`` measured: :class:`RecipeResult` rows in a :class:`Comparison`.

Plain data: the table, the notes and the per-batch latencies are views of it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from labkit._format import first_line, fmt_bytes, fmt_count, fmt_time


@dataclass(frozen=True)
class RecipeResult:
    """What one Recipe measured. Times are seconds, memory bytes; ``None`` means not measured.

    Args:
        label: Row name (the Recipe's label unless named).
        recipe: The Recipe as a dict (``Recipe.from_dict`` rebuilds it).
        step_time: Median time of one step (forward, or forward+backward+optimizer).
        step_times: Every timed step, in order.
        step_time_low: Lower end of the median step time's interval (bootstrap).
        step_time_high: Upper end of the median step time's interval.
        throughput: Samples per second at the median step time.
        speedup: Baseline median step time divided by this one (above 1 is faster), both
            medians over the rounds timed side by side.
        speedup_low: Lower end of the speedup's interval (paired bootstrap over the rounds).
        speedup_high: Upper end of the speedup's interval.
        within_noise: True when the speedup's interval spans 1.0: the recipe is not
            measurably faster or slower, and it is not ranked.
        rounds: Interleaved rounds the speedup comes from.
        first_call: Time of the first call (includes compilation).
        compile_time: First call minus a steady step, for compiled recipes.
        break_even: Steps after which compiling has paid for itself (None: never).
        export_time: Seconds to export the model (export recipes).
        graphs: Graphs Dynamo made of the forward (compiled recipes).
        graph_breaks: Dynamo's graph breaks (compiled recipes): one dict per break with
            ``reason``, ``module``, ``module_type``, ``source`` and ``count``.
        recompiles: Frames Dynamo compiled again after the first call (compiled recipes).
        peak_memory: Peak bytes of tensors during one step (params included).
        max_abs: Largest absolute output difference from the baseline.
        rel: Relative L2 output difference from the baseline.
        cosine: Cosine similarity of outputs with the baseline.
        loss: Loss after the last controlled step (train) or of the output (inference, if a
            loss is given).
        losses: Loss at every step of the controlled pass, in order (train mode): same
            seed, same batch, dropout off, from the same starting weights for every recipe.
        val_metric: The validation metric on ``val`` after the steps, if given.
        drift_path: First module whose output drifts past the tolerance.
        drift_rel: Its relative error.
        per_batch: Inference latency at other batch sizes (``compare(batch_sizes=...)``):
            one dict per size with ``batch_size``, ``step_time``, ``throughput``,
            ``speedup`` (against the baseline at that size) and ``error``; for a recipe
            row also ``speedup_low``, ``speedup_high`` and ``within_noise`` (its interval).
        flops: FLOPs of one step, counted once on a copy of the recipe's model by labkit's
            FLOP counter (``FlopCounterMode``'s formulas; compiled and exported recipes
            counted eagerly).
        flops_per_s: Achieved FLOP/s: ``flops`` over the median ``step_time``.
        mfu: Model FLOPs utilization: ``flops_per_s`` over the device's peak for the
            recipe's dtype (CUDA devices in labkit's table only; None elsewhere).
        utilization: How ``flops_per_s`` and ``mfu`` were taken, or why there is no MFU.
        notes: What applied, what did not and why, and caveats of the figures.
        error: Why this recipe could not run, if it could not.
    """

    label: str
    recipe: dict[str, Any]
    step_time: float | None = None
    step_times: tuple[float, ...] = ()
    step_time_low: float | None = None
    step_time_high: float | None = None
    throughput: float | None = None
    speedup: float | None = None
    speedup_low: float | None = None
    speedup_high: float | None = None
    within_noise: bool | None = None
    rounds: int | None = None
    first_call: float | None = None
    compile_time: float | None = None
    break_even: float | None = None
    export_time: float | None = None
    graphs: int | None = None
    graph_breaks: tuple[dict[str, Any], ...] = ()
    recompiles: int | None = None
    peak_memory: int | None = None
    max_abs: float | None = None
    rel: float | None = None
    cosine: float | None = None
    loss: float | None = None
    losses: tuple[float, ...] = ()
    val_metric: float | None = None
    drift_path: str | None = None
    drift_rel: float | None = None
    per_batch: tuple[dict[str, Any], ...] = ()
    flops: int | None = None
    flops_per_s: float | None = None
    mfu: float | None = None
    utilization: str = ""
    notes: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Comparison:
    """Recipes measured side by side on one model and batch (plain data).

    Args:
        mode: ``"train"`` or ``"inference"``.
        steps: Timed rounds per recipe before the intervals were first checked.
        warmup: Untimed steps per recipe after the first call.
        baseline: Label of the baseline row (fp32 eager unless given).
        batch_size: Samples per step, for throughput.
        device: Device the model ran on.
        tolerance: Relative error past which a layer counts as drifted.
        metric: Name of the validation metric, if any.
        results: One :class:`RecipeResult` per recipe, baseline first.
        notes: Notes about the whole run (CPU precision support, threads).
        randomness: How randomness was held equal across recipes for the deviation,
            drift and loss figures.
        level: Confidence level of the intervals.
        target: The interval half-width the rounds ran for (0.03: +-3%); None: fixed rounds.
        budget_s: Wall-clock seconds the timed rounds could take.
        ended_by: What ended the last measurement's rounds: ``"target"`` (every interval
            narrow enough), ``"budget"`` (time ran out first) or ``"rounds"`` (fixed).

    Example:
        >>> import torch, labkit
        >>> from labkit.optimize import Recipe
        >>> model, x = torch.nn.Linear(8, 4), torch.randn(16, 8)
        >>> r = [Recipe(precision="bf16-mixed")]
        >>> cmp = labkit.compare(model, x, r, mode="inference", steps=3, warmup=1)
        >>> [row.label for row in cmp.results]
        ['fp32', 'bf16-mixed']
        >>> cmp.result("bf16-mixed").rel < 0.05  # bf16 keeps ~3 significant digits
        True
        >>> print(cmp.summary())  # doctest: +SKIP
    """

    mode: str
    steps: int
    warmup: int
    baseline: str
    batch_size: int | None
    device: str
    tolerance: float
    metric: str | None
    results: tuple[RecipeResult, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)
    randomness: str = ""
    level: float = 0.95
    target: float | None = None
    budget_s: float | None = None
    ended_by: str = ""

    def result(self, label: str) -> RecipeResult:
        """The row called ``label``."""
        for r in self.results:
            if r.label == label:
                return r
        raise KeyError(f"no recipe labelled {label!r}; have {[r.label for r in self.results]}")

    def ranked(self) -> list[RecipeResult]:
        """The rows measurably different from the baseline, fastest first: rows whose
        speedup's interval spans 1.0 (within noise), failed rows and the baseline are left
        out."""
        found = [
            r
            for r in self.results
            if r.error is None and r.speedup is not None and r.within_noise is False
        ]
        return sorted(found, key=lambda r: -(r.speedup or 0.0))

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per recipe (the widget and ``to_pandas`` read these)."""
        out = []
        for r in self.results:
            row = asdict(r)
            row["step_times"] = list(r.step_times)
            row["losses"] = list(r.losses)
            row["notes"] = list(r.notes)
            row["per_batch"] = [dict(b) for b in r.per_batch]
            row["graph_breaks"] = [dict(b) for b in r.graph_breaks]
            out.append(row)
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plain data."""
        head = {
            k: getattr(self, k)
            for k in (
                "mode",
                "steps",
                "warmup",
                "baseline",
                "batch_size",
                "device",
                "tolerance",
                "metric",
                "randomness",
                "level",
                "target",
                "budget_s",
                "ended_by",
            )
        }
        return {**head, "notes": list(self.notes), "results": self.rows()}

    def to_pandas(self) -> Any:
        """The rows as a ``pandas.DataFrame`` indexed by label (needs pandas)."""
        import pandas as pd

        rows = self.rows()
        for row in rows:
            row["notes"] = "; ".join(row["notes"])
            del row["step_times"], row["losses"], row["per_batch"], row["graph_breaks"]
        return pd.DataFrame(rows).set_index("label")

    def summary(self) -> str:
        """A text table: one line per recipe, then the notes."""
        loss_head = "loss" if self.mode == "train" else "loss(out)"
        head = [
            "recipe",
            "step",
            "speedup",
            "samples/s",
            "FLOP/s",
            "compile",
            "break-even",
            "peak mem",
            "max abs",
            "rel",
            "cosine",
            loss_head,
        ]
        exports = any(r.export_time is not None for r in self.results)
        if exports:
            head.insert(6, "export")
        compiled = any(r.graphs is not None for r in self.results)
        if compiled:
            head.insert(6, "breaks")
        mfu = any(r.mfu is not None for r in self.results)
        if mfu:
            head.insert(5, "MFU")
        if self.metric:
            head.append(self.metric)
        head.append("first drift")
        table = [head]
        for r in self.results:
            if r.error:
                table.append([r.label, "error", *([""] * (len(head) - 2))])
                continue
            line = [
                r.label,
                fmt_time(r.step_time) if r.step_time is not None else "-",
                speedup_text(r),
                _num(r.throughput, "{:.1f}"),
                f"{fmt_count(r.flops_per_s)}FLOP/s" if r.flops_per_s is not None else "-",
                fmt_time(r.compile_time) if r.compile_time is not None else "-",
                _break_even(r),
                fmt_bytes(r.peak_memory) if r.peak_memory is not None else "-",
                _num(r.max_abs, "{:.2e}"),
                _num(r.rel, "{:.2e}"),
                _num(r.cosine, "{:.5f}"),
                _num(r.loss, "{:.4g}"),
            ]
            if exports:
                line.insert(6, fmt_time(r.export_time) if r.export_time is not None else "-")
            if compiled:
                n = sum(b["count"] for b in r.graph_breaks)
                line.insert(6, str(n) if r.graphs is not None else "-")
            if mfu:
                line.insert(5, _num(r.mfu, "{:.1%}"))
            if self.metric:
                line.append(_num(r.val_metric, "{:.4g}"))
            line.append(r.drift_path if r.drift_path is not None else "-")
            table.append(line)
        lines = _columns(table)
        lines += _per_batch_table(self.results)
        title = (
            f"compare ({self.mode}, {self._rounds_text()} after {self.warmup} warm-up, "
            f"device {self.device}, drift tolerance {self.tolerance:g})"
        )
        head_notes = (
            self.intervals(),
            self.ranking(),
            self.randomness,
            self.flops_note(),
            *self.notes,
        )
        notes = [f"- {n}" for n in head_notes if n]
        for r in self.results:
            notes += [f"- {r.label}: {n}" for n in r.notes]
            if r.error:
                more = len(r.error.strip().splitlines()) - 1
                rest = f" (+{more} lines: cmp.result({r.label!r}).error)" if more > 0 else ""
                notes.append(f"- {r.label}: ERROR {first_line(r.error)}{rest}")
        return "\n".join([title, *lines, *(["", "notes:", *notes] if notes else [])])

    def _rounds_text(self) -> str:
        most = max((len(r.step_times) for r in self.results[1:] if not r.error), default=0)
        if most > self.steps:  # rounds went on for the intervals
            return f"{most} rounds ({self.steps} minimum)"
        return f"{self.steps} steps"

    def intervals(self) -> str:
        """How the speedup intervals were taken and what ended the rounds, in one sentence."""
        rounds = [r.rounds for r in self.results if r.rounds]
        if not rounds:
            return ""
        target = f"+-{self.target:.0%}" if self.target is not None else "the target"
        ended = {
            "target": f"every speedup's interval was within {target}",
            "budget": f"the {self.budget_s:g} s budget ran out before every interval was "
            f"within {target}",
            "rounds": "the fixed number of rounds was done",
        }.get(self.ended_by, self.ended_by)
        n = f"{min(rounds)}" if min(rounds) == max(rounds) else f"{min(rounds)}-{max(rounds)}"
        return (
            f"speedups: baseline median / recipe median over interleaved rounds, "
            f"[{self.level:.0%} interval] by a paired bootstrap over {n} rounds; rounds "
            f"stopped because {ended}; an interval spanning 1.00x is within noise, not ranked"
        )

    def flops_note(self) -> str:
        """How the FLOP/s column was taken (the baseline's sentence, or the first row's)."""
        rows = [r for r in self.results if r.utilization]
        base = next((r for r in rows if r.label == self.baseline), rows[0] if rows else None)
        if base is None:
            return ""
        text = f"FLOP/s ({base.label}): {base.utilization}"
        odd = [r.label for r in rows if r.flops is not None and r.flops != base.flops]
        if odd:
            text += f"; each row's own step counted ({', '.join(odd)} count other FLOPs)"
        return text

    def ranking(self) -> str:
        """The measurably faster or slower rows in order, and those within noise."""
        ranked = self.ranked()
        noise = [r.label for r in self.results if r.within_noise]
        parts = []
        if ranked:
            parts.append("ranked: " + " > ".join(f"{r.label} {r.speedup:.2f}x" for r in ranked))
        if noise:
            parts.append("within noise of the baseline: " + ", ".join(noise))
        return "; ".join(parts)

    def __repr__(self) -> str:
        parts = [f"{r.label}: {'error' if r.error else speedup_text(r)}" for r in self.results]
        return f"Comparison(mode={self.mode!r}, steps={self.steps}, {', '.join(parts)})"


def _columns(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in table
    ]
    lines.insert(1, "-" * len(lines[0]))
    return lines


def _per_batch_table(results: tuple[RecipeResult, ...]) -> list[str]:
    sizes = sorted({b["batch_size"] for r in results for b in r.per_batch})
    if not sizes:
        return []
    table = [["latency per batch", *[f"batch {n}" for n in sizes]]]
    for r in results:
        got = {b["batch_size"]: b for b in r.per_batch}
        cells = []
        for n in sizes:
            b = got.get(n)
            if b is None or b.get("error"):
                cells.append("error" if b else "-")
            else:
                noise = " noise" if b.get("within_noise") else ""
                cells.append(f"{fmt_time(b['step_time'])} ({_num(b['speedup'], '{:.2f}x')}{noise})")
        table.append([r.label, *cells])
    return ["", *_columns(table)]


def speedup_text(r: RecipeResult) -> str:
    """``"1.12x [1.05-1.19]"``, ``"1.01x (noise)"`` when the interval spans 1.0, ``"1.00x"``
    for the baseline, ``"-"`` when not measured."""
    if r.speedup is None:
        return "-"
    if r.speedup_low is None or r.speedup_high is None:
        return f"{r.speedup:.2f}x"
    if r.within_noise:
        return f"{r.speedup:.2f}x (noise)"
    return f"{r.speedup:.2f}x [{r.speedup_low:.2f}-{r.speedup_high:.2f}]"


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else fmt.format(x)


def _break_even(r: RecipeResult) -> str:
    if r.compile_time is None:
        return "-"
    return "never" if r.break_even is None else f"{r.break_even:.0f} steps"
