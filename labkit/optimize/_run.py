"""One recipe's model, optimizer and measurements during :func:`labkit.compare`."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import Any

import torch

from labkit._format import first_line
from labkit._interleave import median_interval, ratio_interval
from labkit._tensors import model_device, split_batch
from labkit.optimize import _breaks, _cpu, _deploy, _measure
from labkit.optimize._run_errors import describe
from labkit.optimize.apply import applied, apply
from labkit.optimize.comparison_result import RecipeResult
from labkit.optimize.drift import deviation, first_drift, flat, fp16_risks, layer_drift
from labkit.optimize.export import exported
from labkit.optimize.recipe import Recipe
from labkit.optimize.step import RecipeStep


class _Run:
    """One recipe's model, optimizer and measurements during :func:`labkit.compare`."""

    def __init__(
        self,
        label: str,
        recipe: Recipe,
        base_model: torch.nn.Module,
        mode: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        loss: Callable[[Any], torch.Tensor] | None,
        lr: float,
        seed: int,
        loss_steps: int,
    ) -> None:
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
        self.device_type = model_device(base_model).type

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
            self.error = describe(exc, getattr(self, "model", None))
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
            self.error = describe(exc, getattr(self, "model", None))

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
            self.batch_errors[n] = f"{type(exc).__name__}: {first_line(str(exc), 200)}"
            return
        if timed:
            self.per_batch.setdefault(n, []).append(elapsed)

    def _graph_breaks(self, notes: list[str]) -> dict[str, Any]:
        """Dynamo's graphs and breaks of this compiled forward (run after all timing)."""
        fwd: Any = self.model.__dict__.get("forward")  # the RecipeForward apply() set
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
            self.error = describe(exc, getattr(self, "model", None))

    def step(self, timed: bool = False) -> float | None:
        """One step; its seconds (also kept in ``times`` when ``timed``), None if it failed."""
        if self.error:
            return None
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
            self.error = describe(exc, getattr(self, "model", None))
            return None
        if timed:
            self.times.append(elapsed)
        return elapsed

    def with_times(self, r: RecipeResult, level: float) -> RecipeResult:
        """``r`` with this run's step times (all of them so far) and the figures of them."""
        return _with(r, **self._time_fields(level))

    def _time_fields(self, level: float) -> dict[str, Any]:
        med = statistics.median(self.times) if self.times else None
        fields: dict[str, Any] = {"step_time": med, "step_times": tuple(self.times)}
        if len(self.times) > 1:
            iv = median_interval(self.times, level=level)
            fields["step_time_low"], fields["step_time_high"] = iv.low, iv.high
        bs = _batch_size(self.args, self.kwargs)
        if med and bs:
            fields["throughput"] = bs / med
        return fields

    def result(  # noqa: C901 - one optional figure after another, each with its own note
        self,
        base: _Run,
        pairs: list[tuple[float, float]],
        memory: bool,
        drift: bool,
        tolerance: float,
        val: Any,
        metric_fn: Callable[[Any, Any], Any] | None,
        base_model: torch.nn.Module,
        level: float = 0.95,
    ) -> RecipeResult:
        """This run's row; ``pairs``: (baseline, this) seconds of the rounds timed together."""
        r = RecipeResult(label=self.label, recipe=self.recipe.to_dict(), notes=tuple(self.notes))
        if self.error:
            return _with(r, error=self.error)
        fields = self._time_fields(level)
        med = fields["step_time"]
        base_med = statistics.median(b for b, _ in pairs) if pairs and not base.error else None
        notes = list(self.notes)
        fields.update(first_call=self.first_time, losses=tuple(self.losses))
        if pairs and not base.error:
            a, b = zip(*pairs, strict=True)
            iv = ratio_interval(a, b, level=level)
            fields["speedup"] = iv.estimate
            if self is not base:
                fields["speedup_low"], fields["speedup_high"] = iv.low, iv.high
                fields["within_noise"] = iv.spans(1.0)
                fields["rounds"] = iv.rounds
            if iv.estimate < 0.95 and iv.high < 1.0 and self is not base:
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
                cand = apply(base_model, eager.replace(export=None, export_kwargs=()))
                skip = tuple(
                    p for s in applied(cand).steps if s.toggle == "fuse_conv_bn" for p in s.paths
                )
                if fwd is not None:
                    kwargs = {**self.kwargs, **fwd.call_kwargs}  # both run as exported
                    rows = _deploy.export_drift(
                        base_model, fwd, self.inputs, kwargs, seed=self.seed, skip=skip
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
        row = {
            "batch_size": n,
            "step_time": med,
            "throughput": n / med if med else None,
            "speedup": base_med / med if med and base_med else None,
            "error": run.batch_errors.get(n),
        }
        # rounds line up while neither failed at this size (a failure stops that run's rounds)
        if run is not base and times and base_times and len(times) == len(base_times) > 1:
            iv = ratio_interval(base_times, times)
            row.update(speedup_low=iv.low, speedup_high=iv.high, within_noise=iv.spans(1.0))
        out.append(row)
    return tuple(out)


def _with(r: RecipeResult, **changes: Any) -> RecipeResult:
    return replace(r, **changes)


def _batch_size(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor) and v.dim() > 0:
            return int(v.shape[0])
    return None


def _to_channels_last(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(
        a.contiguous(memory_format=torch.channels_last)
        if isinstance(a, torch.Tensor) and a.dim() == 4
        else a
        for a in args
    )


def _validate(
    model: torch.nn.Module, val: Any, metric_fn: Callable[[Any, Any], Any], channels_last: bool
) -> float:
    inputs, targets = val
    args, kwargs = split_batch(inputs, strict="compare(val=...) inputs")
    if channels_last:
        args = _to_channels_last(args)
    was = model.training
    model.eval()
    try:
        out, _ = RecipeStep(model, Recipe(), mode="inference")(*args, **kwargs)
        return float(metric_fn(out, targets))
    finally:
        model.train(was)
