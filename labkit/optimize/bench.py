"""A :class:`Bench`: one model, batch and settings, whose baseline is measured once and
reused, interleaved with every recipe measured against it (``labkit.compare`` is one
Bench used once)."""

from __future__ import annotations

import copy
import inspect
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import torch

from labkit._interleave import interleaved, interleaved_until, ratio_interval
from labkit._tensors import model_device, split_batch
from labkit._utilization import dtype_of, utilization
from labkit.optimize import _cpu, _deploy, _measure
from labkit.optimize._bench_checks import (
    Progress,
    check_settings,
    metric_fn,
    named_recipes,
    progress_fn,
    randomness,
)
from labkit.optimize._run import _batch_size, _Run
from labkit.optimize.bench_options import BenchOptions
from labkit.optimize.comparison_result import Comparison, RecipeResult
from labkit.optimize.recipe import Recipe
from labkit.trace import StepState
from labkit.trace.api import check_not_meta
from labkit.trace.entry import cut_graphs, cut_note
from labkit.trace.step import SideEffects

Sized = tuple[int, tuple[Any, ...], dict[str, Any]]  # batch size, args, kwargs

# recipe JSON -> (speedup, mode, device, graph breaks) from the last compare() in this
# process that measured it: advise() reads it so that it never suggests, without saying
# so, what was measured slower here (a speedup within noise is kept as 1.0)
MEASURED: dict[str, tuple[float, str, str, tuple[dict[str, Any], ...]]] = {}


class Bench:
    """A model, its batch and the measuring settings; recipes are measured against a
    baseline that is set up and measured once, then reused.

    Each :meth:`compare` call interleaves the baseline with the new recipes (B A1 A2 B A1
    A2 ...), so every speedup comes from rounds timed side by side, and its 95% interval
    from a paired bootstrap over those rounds (:func:`labkit._interleave.ratio_interval`).
    Rounds continue after ``steps`` until every new recipe's interval is within
    ``+-target`` or ``budget_s`` seconds of timed rounds are spent; the result says which
    ended them. The baseline's model, first call, controlled pass (losses, outputs) and
    peak memory are kept between calls, and its step times accumulate. Rows accumulate
    too (:attr:`comparison`); :meth:`clear` drops them but keeps the baseline.

    The user's model is not run (each recipe runs on a copy); its inputs (values and
    ``.grad``) and the random number generators are put back after each call.

    Args:
        model: The model; it is not changed.
        batch: Its input: a tensor, a tuple of positional inputs or a dict of keyword inputs.
        options: A :class:`~labkit.optimize.BenchOptions` (default: its defaults), or
            its settings as keywords:
            {bench_options}

    Example:
        >>> import torch
        >>> from labkit.optimize import Bench, Recipe
        >>> bench = Bench(torch.nn.Linear(8, 4), torch.randn(16, 8), mode="inference",
        ...               steps=5, warmup=1, budget_s=1.0)
        >>> _ = bench.compare(Recipe(precision="bf16-mixed"))
        >>> cmp = bench.compare(Recipe(matmul_precision="medium"))  # baseline reused
        >>> [r.label for r in cmp.results]
        ['fp32', 'bf16-mixed', 'matmul:medium']
        >>> cmp.ended_by in ("target", "budget")
        True
    """

    def __init__(
        self,
        model: torch.nn.Module,
        batch: Any,
        options: BenchOptions | None = None,
        **overrides: Any,
    ) -> None:
        o = self.options = BenchOptions.build(options, overrides, where="Bench")
        mode, target, budget_s, level = o.mode, o.target, o.budget_s, o.level
        check_settings(model, mode, o.steps, o.warmup, o.tolerance, o.baseline, o.loss_steps)
        self.batch_sizes = tuple(o.batch_sizes)
        if self.batch_sizes and mode != "inference":
            raise ValueError("compare(batch_sizes=...) times inference only: pass mode='inference'")
        if not all(isinstance(n, int) and n >= 1 for n in self.batch_sizes):
            raise ValueError(
                f"compare(batch_sizes=...) must be ints >= 1, got {self.batch_sizes!r}"
            )
        if target is not None and not (isinstance(target, (int, float)) and 0 < target < 1):
            raise ValueError(
                f"compare(target=...) must be between 0 and 1 (0.03: +-3%), got {target!r}"
            )
        if not (isinstance(budget_s, (int, float)) and budget_s > 0):
            raise ValueError(f"compare(budget_s=...) must be > 0 seconds, got {budget_s!r}")
        if not 0 < level < 1:
            raise ValueError(f"compare(level=...) must be between 0 and 1, got {level!r}")
        args, kwargs = split_batch(batch, strict="compare(batch=...)")
        # an input carrying the graph of code before the call: backward stops at it
        self.args, self.kwargs, cut = cut_graphs(args, kwargs)
        self._cut_note = [cut_note(cut)] if cut else []
        check_not_meta("compare", model, self.args, self.kwargs)  # nothing on meta runs
        self.metric_name, self._metric = metric_fn(o.metric, o.val)
        self.batch = _batch_size(self.args, self.kwargs)
        if self.batch_sizes and self.batch is None:
            raise ValueError("compare(batch_sizes=...) needs a tensor input with a batch dimension")
        self.baseline = o.baseline if o.baseline is not None else Recipe()
        # the recipes run on copies of the model, which keep its hooks (their closures too)
        self._effects = SideEffects(model, [("loss", o.loss)])
        with _kept(self.args, self.kwargs, o.val):
            self.base_model = copy.deepcopy(model)
        self.base_model.train(mode == "train")
        self.device = str(model_device(self.base_model))
        self._base: _Run | None = None
        self._base_result: RecipeResult | None = None
        self._rows: dict[str, RecipeResult] = {}
        self._counted: dict[str, tuple[int | None, str]] = {}  # label -> (step FLOPs, how)
        self._ended_by = ""

    # ------------------------------------------------------------------ public
    @property
    def comparison(self) -> Comparison:
        """Every row measured so far, baseline first."""
        rows = [self._base_result] if self._base_result is not None else []
        return self._comparison((*rows, *self._rows.values()))

    def clear(self) -> None:
        """Drop the measured rows; the baseline (and its times) stays."""
        self._rows.clear()

    def compare(
        self,
        recipes: Recipe | Sequence[Recipe] | Mapping[str, Recipe],
        *,
        progress: Progress | bool | None = None,
    ) -> Comparison:
        """Measure ``recipes`` against the baseline; the rows join :attr:`comparison`.

        A label measured before is measured again and its row replaced.

        Returns:
            :attr:`comparison`: every row so far, baseline first.
        """
        named = named_recipes(recipes)
        named = {k: v for k, v in named.items() if v != self.baseline or k != self.baseline.label}
        with _kept(self.args, self.kwargs, self.options.val):
            self._measure(named, progress_fn(progress))
        return self.comparison

    def __repr__(self) -> str:
        o = self.options
        return (
            f"Bench({type(self.base_model).__name__}, mode={o.mode!r}, "
            f"baseline={self.baseline.label!r}, rows={len(self._rows)}, target={o.target}, "
            f"budget_s={o.budget_s})"
        )

    # ------------------------------------------------------------------ measuring
    def _new_run(self, label: str, recipe: Recipe) -> _Run:
        o = self.options
        return _Run(
            label,
            recipe,
            self.base_model,
            o.mode,
            self.args,
            self.kwargs,
            o.loss,
            o.lr,
            o.seed,
            o.loss_steps,
        )

    def _measure(self, named: dict[str, Recipe], report: Progress) -> None:
        o = self.options
        first_time = self._base is None
        if self._base is None:
            self._base = self._new_run(self.baseline.label, self.baseline)
        base = self._base
        runs = [self._new_run(label, r) for label, r in named.items()]
        everyone = [base, *runs]
        report(0.0, "applying recipes")
        for run in everyone if first_time else runs:
            run.setup()
            report(0.05, f"{run.label}: first call")
            run.first()
        t0 = time.perf_counter()
        rounds = [0]

        def sample(run: _Run, i: int, timed: bool) -> float | None:
            got = run.step(timed=timed)
            if run is everyone[-1]:
                rounds[0] += timed
                spent = (time.perf_counter() - t0) / o.budget_s
                frac = 0.1 + 0.6 * min(1.0, max(rounds[0] / o.steps, spent) if timed else 0)
                what = f"round {i + 1}" if timed else f"warm-up {i + 1}/{o.warmup}"
                report(frac, f"{what}: {len(everyone)} recipes interleaved")
            return got

        narrow = self._narrow if o.target is not None and runs else None
        times, self._ended_by = interleaved_until(
            everyone,
            sample,
            warmup=o.warmup,
            rounds=o.steps,
            narrow=narrow,
            budget_s=o.budget_s if narrow is not None else None,
        )
        self._per_batch(everyone, report)
        for run in everyone if first_time else runs:
            report(0.75, f"{run.label}: controlled pass (dropout off)")
            run.controlled()
        for k, run in enumerate(runs, start=1):
            report(0.8, f"{run.label}: memory, drift and validation")
            self._rows[run.label] = self._result(run, _paired(times[0], times[k]))
        report(0.95, f"{base.label}: baseline figures")
        if self._base_result is None or self._base_result.error or base.error:
            self._base_result = self._result(base, [(t, t) for t in base.times])
        else:  # measured once: only its step times grew (and so its FLOP/s moved)
            grown = base.with_times(self._base_result, o.level)
            self._base_result = self._rate(base, grown)
        report(1.0, "done")
        _remember(o.mode, self.device, list(self._rows.values()))

    def _narrow(self, times: list[list[float | None]]) -> bool:
        assert self.options.target is not None
        for k in range(1, len(times)):
            pairs = _paired(times[0], times[k])
            if not pairs and times[k] and times[k][-1] is None:
                continue  # the recipe failed: nothing to wait for
            if len(pairs) < 2:
                return False
            a, b = zip(*pairs, strict=True)
            iv = ratio_interval(a, b, level=self.options.level, resamples=1000)
            if iv.half_width > self.options.target:
                return False
        return True

    def _per_batch(self, runs: list[_Run], report: Progress) -> None:
        for n in self.batch_sizes:
            assert self.batch is not None  # checked in __init__
            b_args, b_kwargs = _deploy.resize_batch(self.args, self.kwargs, n, self.batch)

            def at_size(
                run: _Run, i: int, timed: bool, size: Sized = (n, b_args, b_kwargs)
            ) -> None:
                run.timed_at(*size, timed=timed)
                step = f"step {i + 1 + timed}/{1 + self.options.steps}"
                report(0.72, f"batch {size[0]}, {step}: {run.label}")

            interleaved(runs, at_size, warmup=1, rounds=self.options.steps)

    def _result(self, run: _Run, pairs: list[tuple[float, float]]) -> RecipeResult:
        assert self._base is not None
        o = self.options
        row = run.result(
            self._base,
            pairs,
            o.memory,
            o.drift,
            o.tolerance,
            o.val,
            self._metric,
            self.base_model,
            o.level,
        )
        if row.error is not None or row.step_time is None:
            return row
        self._counted[run.label] = _measure.step_flops(run, run.recipe.replace(compile=None))
        return self._rate(run, row)

    def _rate(self, run: _Run, row: RecipeResult) -> RecipeResult:
        """``row`` with its achieved FLOP/s (and MFU on CUDA): the FLOPs counted once for
        its recipe (:func:`~labkit.optimize._measure.step_flops`) over its median step time."""
        flops, how = self._counted.get(run.label, (None, ""))
        if not flops or not row.step_time:  # not counted, or nothing FlopCounterMode counts
            why = how if flops is None else f"no FLOPs counted in {run.label}'s step ({how})"
            return replace(row, flops=flops, flops_per_s=None, mfu=None, utilization=why)
        device = self.device
        name = torch.cuda.get_device_name(device) if device.startswith("cuda") else device
        dtype = dtype_of(run.recipe.precision, run.recipe.matmul_precision)
        over = f"the median of {len(row.step_times)} timed steps"
        rate, mfu, text = utilization(
            flops,
            row.step_time,
            device,
            name,
            dtype,
            note=f", {how}",
            counted=f"{run.label}'s step",
            over=over,
        )
        return replace(row, flops=flops, flops_per_s=rate, mfu=mfu, utilization=text)

    def _comparison(self, results: tuple[RecipeResult, ...]) -> Comparison:
        notes = [_cpu.describe(), *_cpu.implications()] if self.device.startswith("cpu") else []
        notes.append(f"torch threads: {torch.get_num_threads()}")
        o = self.options
        if o.mode == "train" and o.loss is None:
            notes.append("no loss given: training steps minimise the mean of the outputs")
        notes += self._effects.notes("compare ran the step on copies of the model, each recipe")
        notes += self._cut_note
        return Comparison(
            randomness=randomness(self.base_model, o.mode, o.seed, o.loss_steps),
            mode=o.mode,
            steps=o.steps,
            warmup=o.warmup,
            baseline=self.baseline.label,
            batch_size=self.batch,
            device=self.device,
            tolerance=o.tolerance,
            metric=self.metric_name,
            results=results,
            notes=tuple(notes),
            level=o.level,
            target=o.target,
            budget_s=o.budget_s,
            ended_by=self._ended_by,
        )


class _kept:
    """The inputs' values and ``.grad`` and the random number generators, put back on exit
    (labkit.trace's :class:`~labkit.trace.state.StepState`, without a model: every recipe
    runs on a copy)."""

    def __init__(self, *inputs: Any) -> None:
        self.inputs = inputs

    def __enter__(self) -> None:
        self.state = StepState(None, self.inputs, rng=True)

    def __exit__(self, *exc: object) -> None:
        self.state.restore()


def _paired(base: list[float | None], new: list[float | None]) -> list[tuple[float, float]]:
    """(baseline, recipe) seconds of the rounds where both have a time."""
    return [(b, t) for b, t in zip(base, new, strict=True) if b is not None and t is not None]


def _remember(mode: str, device: str, results: list[RecipeResult]) -> None:
    for r in results:
        if r.speedup is not None and r.error is None:
            key = Recipe.from_dict(r.recipe).to_json()
            # within noise is no measured difference: advise must not call it slower
            speed = 1.0 if r.within_noise else r.speedup
            MEASURED[key] = (speed, mode, device, r.graph_breaks)


# Bench's keywords and their docs are BenchOptions' fields (written once, in bench_options.py)
Bench.__init__.__signature__ = BenchOptions.signature(  # type: ignore[attr-defined]  # inspect reads it
    [
        inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("batch", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        inspect.Parameter("options", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None),
    ]
)
Bench.__doc__ = (Bench.__doc__ or "").replace(
    " " * 12 + "{bench_options}", BenchOptions.args_doc(" " * 12)
)
