"""``labkit.compare``: run Recipes side by side and measure what each buys and costs."""

from __future__ import annotations

import copy
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from labkit._format import fmt_bytes, fmt_time
from labkit.optimize import _breaks, _cpu, _deploy, _measure
from labkit.optimize._random import stochastic_modules
from labkit.optimize.apply import applied, apply
from labkit.optimize.drift import deviation, first_drift, flat, fp16_risks, layer_drift
from labkit.optimize.export import exported
from labkit.optimize.recipe import Recipe
from labkit.optimize.step import RecipeStep

MODES = ("train", "inference")
Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class RecipeResult:
    """What one Recipe measured. Times are seconds, memory bytes; ``None`` means not measured.

    Args:
        label: Row name (the Recipe's label unless named).
        recipe: The Recipe as a dict (``Recipe.from_dict`` rebuilds it).
        step_time: Median time of one step (forward, or forward+backward+optimizer).
        step_times: Every timed step, in order.
        throughput: Samples per second at the median step time.
        speedup: Baseline median step time divided by this one (above 1 is faster).
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
            ``speedup`` (against the baseline at that size) and ``error``.
        notes: What applied, what did not and why, and caveats of the figures.
        error: Why this recipe could not run, if it could not.
    """

    label: str
    recipe: dict[str, Any]
    step_time: float | None = None
    step_times: tuple[float, ...] = ()
    throughput: float | None = None
    speedup: float | None = None
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
    notes: tuple[str, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Comparison:
    """Recipes measured side by side on one model and batch (plain data).

    Args:
        mode: ``"train"`` or ``"inference"``.
        steps: Timed steps per recipe (after warm-up).
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

    Example:
        >>> r = [Recipe(precision="bf16-mixed")]
        >>> cmp = labkit.compare(model, x, r, mode="inference")  # doctest: +SKIP
        >>> print(cmp.summary())  # doctest: +SKIP
        >>> cmp.result("bf16-mixed").speedup  # doctest: +SKIP
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

    def result(self, label: str) -> RecipeResult:
        """The row called ``label``."""
        for r in self.results:
            if r.label == label:
                return r
        raise KeyError(f"no recipe labelled {label!r}; have {[r.label for r in self.results]}")

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
            head.insert(5, "export")
        compiled = any(r.graphs is not None for r in self.results)
        if compiled:
            head.insert(5, "breaks")
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
                _num(r.speedup, "{:.2f}x"),
                _num(r.throughput, "{:.1f}"),
                fmt_time(r.compile_time) if r.compile_time is not None else "-",
                _break_even(r),
                fmt_bytes(r.peak_memory) if r.peak_memory is not None else "-",
                _num(r.max_abs, "{:.2e}"),
                _num(r.rel, "{:.2e}"),
                _num(r.cosine, "{:.5f}"),
                _num(r.loss, "{:.4g}"),
            ]
            if exports:
                line.insert(5, fmt_time(r.export_time) if r.export_time is not None else "-")
            if compiled:
                n = sum(b["count"] for b in r.graph_breaks)
                line.insert(5, str(n) if r.graphs is not None else "-")
            if self.metric:
                line.append(_num(r.val_metric, "{:.4g}"))
            line.append(r.drift_path if r.drift_path is not None else "-")
            table.append(line)
        lines = _columns(table)
        lines += _per_batch_table(self.results)
        title = (
            f"compare ({self.mode}, {self.steps} steps after {self.warmup} warm-up, "
            f"device {self.device}, drift tolerance {self.tolerance:g})"
        )
        notes = [f"- {n}" for n in (self.randomness, *self.notes) if n]
        for r in self.results:
            notes += [f"- {r.label}: {n}" for n in r.notes]
            if r.error:
                notes.append(f"- {r.label}: ERROR {r.error}")
        return "\n".join([title, *lines, *(["", "notes:", *notes] if notes else [])])

    def __repr__(self) -> str:
        parts = [
            f"{r.label}: {'error' if r.error else _num(r.speedup, '{:.2f}x')}" for r in self.results
        ]
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
                cells.append(f"{fmt_time(b['step_time'])} ({_num(b['speedup'], '{:.2f}x')})")
        table.append([r.label, *cells])
    return ["", *_columns(table)]


def _num(x: float | None, fmt: str) -> str:
    return "-" if x is None else fmt.format(x)


def _break_even(r: RecipeResult) -> str:
    if r.compile_time is None:
        return "-"
    return "never" if r.break_even is None else f"{r.break_even:.0f} steps"


# ---------------------------------------------------------------------- compare
def compare(
    model: torch.nn.Module,
    batch: Any,
    recipes: Recipe | Sequence[Recipe] | Mapping[str, Recipe],
    *,
    loss: Callable[[Any], torch.Tensor] | None = None,
    mode: str = "train",
    steps: int = 10,
    warmup: int = 2,
    baseline: Recipe | None = None,
    val: tuple[Any, torch.Tensor] | None = None,
    metric: Callable[[Any, torch.Tensor], float] | str | None = None,
    tolerance: float = 1e-2,
    lr: float = 1e-2,
    memory: bool = True,
    drift: bool = True,
    seed: int = 0,
    loss_steps: int = 3,
    batch_sizes: Sequence[int] = (),
    progress: Progress | bool | None = None,
) -> Comparison:
    """Run ``recipes`` interleaved on copies of ``model`` and measure each against fp32.

    Every recipe gets its own :func:`~labkit.optimize.apply` copy of the model with
    the same starting weights. Steps run interleaved (A B C A B C ...) so machine
    drift hits all alike; figures are medians. The first call is timed apart, so
    compile time and its break-even are reported separately. Peak memory, output
    deviation and per-layer drift come from extra untimed passes.

    Args:
        model: The model; it is not changed.
        batch: Its input: a tensor, a tuple of positional inputs or a dict of keyword inputs.
        recipes: Recipes to measure (a dict names the rows).
        loss: ``loss(output) -> scalar`` used for training steps; without it, the mean
            of the outputs is used.
        mode: ``"train"`` (forward, backward, SGD step) or ``"inference"`` (eval, no_grad).
        steps: Timed steps per recipe.
        warmup: Untimed steps per recipe after the first call.
        baseline: The reference Recipe (default: fp32 eager, ``Recipe()``).
        val: ``(inputs, targets)`` to score each model on after its steps.
        metric: ``metric(output, targets) -> float``, ``"accuracy"`` or ``"mse"``;
            default accuracy for integer targets, else mse.
        tolerance: Relative error past which a layer's output counts as drifted.
        lr: SGD learning rate in train mode.
        memory: Measure peak memory (an extra step per recipe).
        drift: Find the first drifting layer (an extra forward per recipe).
        seed: Seed set before every step (the same for every recipe).
        loss_steps: Training steps of the controlled pass that gives ``loss`` and
            ``losses`` (train mode).
        batch_sizes: Inference only: also time every recipe at these batch sizes (the
            batch cut or repeated along dim 0), reported in ``RecipeResult.per_batch``.

    Randomness: the timed steps run the model as it is (dropout on in train mode).
    Output deviation, per-layer drift and the losses come from separate untimed passes
    from the same starting weights, with the same seed and batch for every recipe and
    with dropout switched off (``nn.Dropout`` modules, attention dropout, functional
    dropout), so a difference shown is the recipe's, not the dropout masks'.
    ``Comparison.randomness`` says what was switched off.
        progress: ``progress(fraction, message)`` callback, or True for a terminal bar.

    Returns:
        A :class:`Comparison`.

    Example:
        >>> cmp = labkit.compare(model, x, {"bf16": Recipe(precision="bf16-mixed")},
        ...     loss=lambda out: F.cross_entropy(out, y), steps=5)  # doctest: +SKIP
        >>> print(cmp.summary())  # doctest: +SKIP
    """
    recipe_map = _check(model, recipes, mode, steps, warmup, tolerance, baseline)
    if not isinstance(loss_steps, int) or loss_steps < 1:
        raise ValueError(f"compare(loss_steps=...) must be an int >= 1, got {loss_steps!r}")
    batch_sizes = tuple(batch_sizes)
    if batch_sizes and mode != "inference":
        raise ValueError("compare(batch_sizes=...) times inference only: pass mode='inference'")
    if not all(isinstance(n, int) and n >= 1 for n in batch_sizes):
        raise ValueError(f"compare(batch_sizes=...) must be ints >= 1, got {batch_sizes!r}")
    report = _progress_fn(progress)
    args, kwargs = _split_batch(batch)
    metric_name, metric_fn = _metric(metric, val)
    base_model = copy.deepcopy(model)
    base_model.train(mode == "train")
    device = str(next((p.device for p in base_model.parameters()), torch.device("cpu")))
    runs = [
        _Run(label, recipe, base_model, mode, args, kwargs, loss, lr, seed, loss_steps)
        for label, recipe in recipe_map.items()
    ]
    batch = _batch_size(args, kwargs)
    if batch_sizes and batch is None:
        raise ValueError("compare(batch_sizes=...) needs a tensor input with a batch dimension")
    total = len(runs) * (2 + warmup + steps + len(batch_sizes) * (1 + steps))
    done = 0

    def tick(msg: str) -> None:
        nonlocal done
        done += 1
        report(min(done / total, 1.0), msg)

    report(0.0, "applying recipes")
    for run in runs:
        run.setup()
        tick(f"{run.label}: first call")
        run.first()
    for i in range(warmup):
        for run in runs:
            run.step()
            tick(f"warm-up {i + 1}/{warmup}: {run.label}")
    for i in range(steps):
        for run in runs:
            run.step(timed=True)
            tick(f"step {i + 1}/{steps}: {run.label}")
    for n in batch_sizes:
        b_args, b_kwargs = _deploy.resize_batch(args, kwargs, n, batch)
        for i in range(1 + steps):
            for run in runs:
                run.timed_at(n, b_args, b_kwargs, timed=i > 0)
                tick(f"batch {n}, step {i + 1}/{1 + steps}: {run.label}")
    results = []
    base_run = runs[0]
    for run in runs:
        tick(f"{run.label}: controlled pass (dropout off)")
        run.controlled()
    for run in runs:
        tick(f"{run.label}: memory, drift and validation")
        results.append(run.result(base_run, memory, drift, tolerance, val, metric_fn, base_model))
    report(1.0, "done")
    notes = [_cpu.describe(), *_cpu.implications()] if device.startswith("cpu") else []
    _remember(device, mode, results)
    notes.append(f"torch threads: {torch.get_num_threads()}")
    if mode == "train" and loss is None:
        notes.append("no loss given: training steps minimise the mean of the outputs")
    return Comparison(
        randomness=_randomness(base_model, mode, seed, loss_steps),
        mode=mode,
        steps=steps,
        warmup=warmup,
        baseline=runs[0].label,
        batch_size=_batch_size(args, kwargs),
        device=device,
        tolerance=tolerance,
        metric=metric_name,
        results=tuple(results),
        notes=tuple(notes),
    )


class _Run:
    """One recipe's model, optimizer and measurements during :func:`compare`."""

    def __init__(self, label, recipe, base_model, mode, args, kwargs, loss, lr, seed, loss_steps):  # type: ignore[no-untyped-def]
        self.label, self.recipe, self.base_model, self.mode = label, recipe, base_model, mode
        self.args, self.kwargs, self.loss_fn, self.lr, self.seed = args, kwargs, loss, lr, seed
        self.loss_steps = loss_steps
        self.per_batch: dict[int, list[float]] = {}
        self.recompiles = 0
        self.batch_errors: dict[int, str] = {}
        self.start: dict[str, torch.Tensor] | None = None
        self.times: list[float] = []
        self.losses: list[float] = []
        self.error: str | None = None
        self.first_time: float | None = None
        self.ref_out: torch.Tensor | None = None
        self.k = 0
        self.device_type = _device_type(base_model)

    def setup(self) -> None:
        try:
            if self.recipe.export and self.mode != "inference":
                raise ValueError(
                    f"export={self.recipe.export!r} is a deployment target: measure it with "
                    "labkit.compare(..., mode='inference')"
                )
            self.model = apply(self.base_model, self.recipe)
            self.notes = list(applied(self.model).notes)
            self.inputs = _to_channels_last(self.args) if self.recipe.channels_last else self.args
            self.step_fn = self._new_step()
            if self.mode == "train":  # the controlled pass starts from these weights again
                self.start = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            self.notes = getattr(self, "notes", [])

    def _new_step(self) -> RecipeStep:
        return RecipeStep(self.model, self.recipe, mode=self.mode, loss=self.loss_fn, lr=self.lr)

    def controlled(self) -> None:
        """Untimed pass for deviation and loss: start weights, dropout off, same seed."""
        if self.error:
            return
        try:
            if self.start is not None:
                self.model.load_state_dict(self.start)
                self.step_fn = self._new_step()  # fresh optimizer and GradScaler
            n = self.loss_steps if self.mode == "train" else 1
            for i in range(n):
                out, value = self.step_fn(
                    *self.inputs, seed=self.seed + i, hold_random=True, **self.kwargs
                )
                if i == 0:
                    self.ref_out = flat(out)
                if value is not None:
                    self.losses.append(value)
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def _call(self) -> tuple[Any, float | None]:
        self.k += 1
        return self.step_fn(*self.inputs, seed=self.seed + self.k - 1, **self.kwargs)

    def timed_at(self, n: int, args: tuple[Any, ...], kwargs: dict[str, Any], timed: bool) -> None:
        """One inference step at batch size ``n`` (a failure is kept for that size only)."""
        if self.error or n in self.batch_errors:
            return
        inputs = _to_channels_last(args) if self.recipe.channels_last else args
        try:
            self._sync()
            t0 = time.perf_counter()
            self.step_fn(*inputs, seed=self.seed, **kwargs)
            self._sync()
            elapsed = time.perf_counter() - t0
        except Exception as exc:
            self.batch_errors[n] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            return
        if timed:
            self.per_batch.setdefault(n, []).append(elapsed)

    def _graph_breaks(self, notes: list[str]) -> dict[str, Any]:
        """Dynamo's graphs and breaks of this compiled forward (run after all timing)."""
        fwd = self.model.__dict__.get("forward")
        try:
            graphs, breaks = _breaks.graph_breaks(
                self.model,
                fwd.fn,
                self.inputs,
                self.kwargs,
                autocast=fwd.dtype,
                grad=self.mode == "train",
            )
        except Exception as exc:
            notes.append(f"graph breaks not found ({type(exc).__name__}: {exc})")
            return {}
        n = sum(b.count for b in breaks)
        notes.append(
            f"Dynamo: {graphs} graph{'s' if graphs != 1 else ''}, {n} graph break"
            f"{'' if n == 1 else 's'} at {len(breaks)} place{'' if len(breaks) == 1 else 's'}; "
            f"{self.recompiles} recompilations after the first call"
        )
        notes.extend(f"graph break: {b.describe()}" for b in breaks[:5])
        return {
            "graphs": graphs,
            "graph_breaks": tuple(asdict(b) for b in breaks),
            "recompiles": self.recompiles,
        }

    def _per_batch(self, base: _Run) -> tuple[dict[str, Any], ...]:
        return _per_batch_rows(self, base)

    def _sync(self) -> None:
        # CUDA kernels run asynchronously: wait for them so the clock sees the whole step
        if self.device_type == "cuda":
            torch.cuda.synchronize()

    def first(self) -> None:
        if self.error:
            return
        try:
            self._sync()
            t0 = time.perf_counter()
            self._call()
            self._sync()
            self.first_time = time.perf_counter() - t0
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def step(self, timed: bool = False) -> None:
        if self.error:
            return
        try:
            frames = _frames_compiled() if self.recipe.compile else 0
            self._sync()
            t0 = time.perf_counter()
            self._call()
            self._sync()
            elapsed = time.perf_counter() - t0
            if self.recipe.compile:
                self.recompiles += _frames_compiled() - frames
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            return
        if timed:
            self.times.append(elapsed)

    def result(self, base, memory, drift, tolerance, val, metric_fn, base_model) -> RecipeResult:  # type: ignore[no-untyped-def]
        r = RecipeResult(label=self.label, recipe=self.recipe.to_dict(), notes=tuple(self.notes))
        if self.error:
            return _with(r, error=self.error)
        med = statistics.median(self.times) if self.times else None
        base_med = statistics.median(base.times) if base.times and not base.error else None
        notes = list(self.notes)
        fields: dict[str, Any] = {
            "step_time": med,
            "step_times": tuple(self.times),
            "first_call": self.first_time,
            "losses": tuple(self.losses),
        }
        bs = _batch_size(self.args, self.kwargs)
        if med and bs:
            fields["throughput"] = bs / med
        if med and base_med:
            fields["speedup"] = base_med / med
            if fields["speedup"] < 0.95 and self is not base:
                slower = f"slower than {base.label}: "
                if self.device_type == "cpu":
                    notes.append(slower + _cpu.why_slower(self.recipe, fields["speedup"]))
                else:
                    notes.append(slower + f"measured {fields['speedup']:.2f}x here")
        if self.recipe.compile and med is not None and self.first_time is not None:
            ct = max(self.first_time - med, 0.0)
            fields["compile_time"] = ct
            saved = (base_med - med) if base_med else None
            fields["break_even"] = ct / saved if saved and saved > 0 else None
        if self.losses and (self.mode == "train" or self.loss_fn is not None):
            fields["loss"] = self.losses[-1]
        if self.ref_out is not None and base.ref_out is not None:
            try:
                fields["max_abs"], fields["rel"], fields["cosine"] = deviation(
                    base.ref_out, self.ref_out
                )
            except ValueError as exc:
                notes.append(f"output deviation not measured: {exc}")
        fwd = exported(self.model)
        if fwd is not None:
            fields["export_time"] = fwd.export_time
            notes.extend(fwd.notes)
        fields["per_batch"] = self._per_batch(base)
        if self.recipe.compile:
            fields.update(self._graph_breaks(notes))
        eager = self.recipe.replace(compile=None)
        if memory and fwd is not None:
            notes.append(
                f"peak memory not measured ({fwd.target} runs the exported graph outside "
                "labkit's tracker)"
            )
        elif memory:
            peak, note = _measure.peak_memory(self, eager)
            fields["peak_memory"] = peak
            if note:
                notes.append(note)
        if drift and self is not base:
            try:
                cand = apply(base_model, eager.replace(export=None))
                skip = tuple(
                    p for s in applied(cand).steps if s.toggle == "fuse_conv_bn" for p in s.paths
                )
                if fwd is not None:
                    rows = _deploy.export_drift(
                        base_model, fwd, self.inputs, self.kwargs, seed=self.seed, skip=skip
                    )
                else:
                    rows = layer_drift(
                        base_model, cand, *self.inputs, skip=skip, seed=self.seed, **self.kwargs
                    )
                hit = first_drift(rows, tolerance)
                if hit is not None:
                    fields["drift_path"] = hit.path or "(model output)"
                    fields["drift_rel"] = hit.rel
                if self.recipe.precision == "16-mixed":
                    notes.extend(fp16_risks(rows))
            except Exception as exc:
                notes.append(f"drift not measured ({type(exc).__name__}: {exc})")
        if val is not None and metric_fn is not None:
            try:
                fields["val_metric"] = _validate(
                    self.model, val, metric_fn, self.recipe.channels_last
                )
            except Exception as exc:
                notes.append(f"validation failed ({type(exc).__name__}: {exc})")
        return _with(r, notes=tuple(notes), **fields)


# recipe JSON -> (speedup, mode, device) of the last compare() in this process: advise()
# reads it so that it never suggests, without saying so, what was measured slower here
MEASURED: dict[str, tuple[float, str, str, tuple[dict[str, Any], ...]]] = {}


def _remember(device: str, mode: str, results: list[RecipeResult]) -> None:
    for r in results:
        if r.speedup is not None and r.error is None:
            key = Recipe.from_dict(r.recipe).to_json()
            MEASURED[key] = (r.speedup, mode, device, r.graph_breaks)


def _frames_compiled() -> int:
    from torch._dynamo.utils import counters

    return int(counters["frames"]["total"])


def _per_batch_rows(run: _Run, base: _Run) -> tuple[dict[str, Any], ...]:
    out = []
    for n in sorted({*run.per_batch, *run.batch_errors}):
        times = run.per_batch.get(n)
        med = statistics.median(times) if times else None
        base_times = base.per_batch.get(n)
        base_med = statistics.median(base_times) if base_times else None
        out.append(
            {
                "batch_size": n,
                "step_time": med,
                "throughput": n / med if med else None,
                "speedup": base_med / med if med and base_med else None,
                "error": run.batch_errors.get(n),
            }
        )
    return tuple(out)


def _randomness(model: torch.nn.Module, mode: str, seed: int, loss_steps: int) -> str:
    if mode == "inference":
        return (
            f"randomness: inference runs the model in eval mode (no dropout mask is drawn), "
            f"seed {seed} and the same batch for every recipe"
        )
    found = stochastic_modules(model)
    kinds = Counter(type(m).__name__ for _, m in found)
    what = (
        f"dropout off in {len(found)} modules ("
        + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))
        + ") and in functional calls"
        if found
        else "dropout off in functional calls (no dropout module found)"
    )
    passes = f"deviation, drift and loss ({loss_steps} controlled steps from the starting weights)"
    timed = "timed steps run in training mode" + (" with dropout on" if found else "")
    return (
        f"randomness: {passes} figures: {what}, seed {seed} and the same batch for every "
        f"recipe; {timed}"
    )


def _with(r: RecipeResult, **changes: Any) -> RecipeResult:
    from dataclasses import replace

    return replace(r, **changes)


# ---------------------------------------------------------------------- helpers
def _check(model, recipes, mode, steps, warmup, tolerance, baseline) -> dict[str, Recipe]:  # type: ignore[no-untyped-def]
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"compare() needs a torch.nn.Module as model, got {type(model).__name__}")
    if mode not in MODES:
        raise ValueError(f"compare(mode=...) must be one of {MODES}, got {mode!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"compare(steps=...) must be an int >= 1, got {steps!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"compare(warmup=...) must be an int >= 0, got {warmup!r}")
    if not tolerance > 0:
        raise ValueError(f"compare(tolerance=...) must be > 0, got {tolerance!r}")
    if isinstance(recipes, Recipe):
        named = {recipes.label: recipes}
    elif isinstance(recipes, Mapping):
        named = dict(recipes)
    elif isinstance(recipes, Sequence) and not isinstance(recipes, str):
        named = {}
        for r in recipes:
            label = getattr(r, "label", None)
            if label in named:
                raise ValueError(
                    f"compare(): recipe {label!r} given twice; pass a dict to name rows"
                )
            named[label] = r
    else:
        raise TypeError(
            f"compare(recipes=...) must be a Recipe, a list of them or a dict "
            f"name -> Recipe, got {type(recipes).__name__}"
        )
    for name, r in named.items():
        if not isinstance(r, Recipe):
            raise TypeError(
                f"compare(): recipe {name!r} is a {type(r).__name__}, not a labkit.optimize.Recipe"
            )
    base = baseline if baseline is not None else Recipe()
    if not isinstance(base, Recipe):
        raise TypeError(f"compare(baseline=...) must be a Recipe, got {type(base).__name__}")
    out = {base.label: base}
    # a row equal to the baseline is kept only under its own name (a control row)
    out.update({k: v for k, v in named.items() if v != base or k != base.label})
    return out


def _split_batch(batch: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(batch, torch.Tensor):
        return (batch,), {}
    if isinstance(batch, Mapping):
        return (), dict(batch)
    if isinstance(batch, (tuple, list)):
        return tuple(batch), {}
    raise TypeError(
        f"compare(batch=...) must be a tensor, a tuple of positional inputs or a dict of "
        f"keyword inputs, got {type(batch).__name__}"
    )


def _batch_size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor) and v.dim() > 0:
            return int(v.shape[0])
    return None


def _device_type(model: torch.nn.Module) -> str:
    return next((p.device.type for p in model.parameters()), "cpu")


def _to_channels_last(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        a.contiguous(memory_format=torch.channels_last)
        if isinstance(a, torch.Tensor) and a.dim() == 4
        else a
        for a in args
    )


def _metric(metric, val):  # type: ignore[no-untyped-def]
    if val is None:
        if metric is not None:
            raise ValueError("compare(metric=...) needs val=(inputs, targets) to score on")
        return None, None
    if not (isinstance(val, (tuple, list)) and len(val) == 2):
        raise ValueError("compare(val=...) must be a pair (inputs, targets)")
    if callable(metric):
        return getattr(metric, "__name__", "metric"), metric
    if metric is None:
        metric = "accuracy" if not val[1].is_floating_point() else "mse"
    if metric == "accuracy":
        return "accuracy", lambda out, y: float((out.argmax(-1) == y).float().mean())
    if metric == "mse":
        return "mse", lambda out, y: float(torch.nn.functional.mse_loss(out.float(), y.float()))
    raise ValueError(f"compare(metric=...) must be callable, 'accuracy' or 'mse', got {metric!r}")


def _validate(model: torch.nn.Module, val, metric_fn, channels_last: bool) -> float:  # type: ignore[no-untyped-def]
    inputs, targets = val
    args, kwargs = _split_batch(inputs)
    if channels_last:
        args = _to_channels_last(args)
    was = model.training
    model.eval()
    try:
        with torch.no_grad():
            return float(metric_fn(model(*args, **kwargs), targets))
    finally:
        model.train(was)


def _progress_fn(progress: Progress | bool | None) -> Progress:
    if callable(progress):
        return progress
    if progress:

        def bar(frac: float, msg: str) -> None:
            filled = int(frac * 30)
            sys.stderr.write(f"\r[{'#' * filled}{'.' * (30 - filled)}] {frac:4.0%} {msg[:60]:<60}")
            if frac >= 1.0:
                sys.stderr.write("\n")
            sys.stderr.flush()

        return bar
    return lambda frac, msg: None
