"""The planning half of :func:`labkit.tune`: every set-up at every batch size, pruned by plans.

Plans are exact and allocate nothing, so every (Recipe, batch size) is planned before
anything runs, and only those whose predicted peak fits the budget go on to be timed.
Per set-up the sizes are planned ascending and stop at the first one over budget (a step's
peak grows with its batch), size by size across the set-ups, so that when planning stops
at ``plan_s`` every set-up has had the same sizes. Between the last size that
fits and the first that does not, the line through the last two plans guesses the largest
size that fits, and a plan confirms it. ``checkpoint="auto"`` is decided per batch size
where the set-up without checkpointing is over budget (:mod:`labkit.optimize._tune_ckpt`),
and verified by planning.

A model the plan cannot run (an op that needs values) falls back to measured steps
(``labkit.memory``) at the user's batch size and below, and a note says so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from labkit._format import first_line, fmt_bytes
from labkit.optimize import _tune_ckpt
from labkit.optimize._tune_batch import Inputs
from labkit.optimize._tune_run import LossFn, OptimizerChoice, measured_peak, plan_optimizer
from labkit.optimize._tune_space import SetUp
from labkit.optimize.apply import apply
from labkit.optimize.recipe import Recipe
from labkit.plan import Plan, PlanError, PlanTooLarge, plan
from labkit.trace import trace

Progress = Callable[[float, str], None]


@dataclass
class Draft:
    """A candidate while the search builds it (:class:`~labkit.optimize._tune_choice.Candidate`
    is its final, frozen form)."""

    label: str
    batch_size: int
    recipe: Recipe | None
    peak: int | None = None
    status: str = "not timed"
    reason: str = ""
    flops: int | None = None
    measured: str = "planned"

    @property
    def fits(self) -> bool:
        return self.status == "not timed"


@dataclass
class Search:
    """Plans set-ups for one model, batch, loss, optimizer and budget.

    Args:
        model: The user's model (planned, never run).
        make: ``n -> (args, kwargs)`` at batch size ``n``.
        n0: The user's batch size.
        loss: The loss closure.
        optimizer: The user's optimizer, factory or ``None``.
        cap: The budget in bytes.
        report: Progress callback.
        deadline: ``time.perf_counter()`` past which a set-up plans no further sizes
            (``plan_s`` after tuning began).
    """

    model: torch.nn.Module
    make: Callable[[int], Inputs]
    n0: int
    loss: LossFn | None
    optimizer: OptimizerChoice
    cap: int
    report: Progress
    deadline: float = float("inf")
    late_noted: bool = False
    notes: list[str] = field(default_factory=list)
    unplannable: str = ""
    plans: dict[tuple[Recipe, int], tuple[int, Plan | None]] = field(default_factory=dict)
    _times: dict[str, float] | None = None

    # ------------------------------------------------------------------ peaks
    def peak(self, recipe: Recipe, n: int) -> tuple[int, Plan | None]:
        """The predicted peak (and its plan) of ``recipe`` at batch ``n``; measured when the
        model cannot be planned. Raises what planning or measuring raised."""
        key = (recipe, n)
        if key in self.plans:
            return self.plans[key]
        args, kwargs = self.make(n)
        if not self.unplannable:
            try:
                p = plan(
                    self.model,
                    args if args else None,
                    loss=self.loss,
                    recipe=recipe,
                    optimizer=plan_optimizer(self.optimizer),
                    model_kwargs=kwargs,
                )
                self.plans[key] = (p.peak_bytes, p)
                return self.plans[key]
            except PlanError as exc:
                too_large = isinstance(exc, PlanTooLarge)  # a plan would take minutes
                if not (too_large or str(exc).startswith("labkit.plan cannot predict")):
                    raise
                self.unplannable = first_line(str(exc))
                self.notes.append(
                    f"the plan cannot run this model ({self.unplannable}); peaks were measured "
                    f"instead with labkit.memory, at batch sizes up to yours ({self.n0}) only"
                )
        if n > self.n0:
            raise _NotTried(
                "not measured: the model cannot be planned, and tune measures batch sizes up "
                f"to yours ({self.n0}) only"
            )
        bytes_, _ = measured_peak(self.model, recipe, self.optimizer, self.loss, args, kwargs)
        self.plans[key] = (bytes_, None)
        return self.plans[key]

    def late(self) -> bool:
        """Whether planning has used its ``plan_s`` (then each set-up stops)."""
        return time.perf_counter() > self.deadline

    def _late_row(self, label: str, recipe: Recipe | None, n: int) -> Draft:
        if not self.late_noted:
            self.late_noted = True
            self.notes.append(
                "planning stopped early: it had used its plan_s (default half of budget_s); "
                "the sizes not planned are listed as skipped (raise plan_s to plan them)"
            )
        return Draft(
            label, n, recipe, status="skipped", reason="not planned: planning used its plan_s"
        )

    def held(self, d: Draft) -> int:
        """Bytes ``d``'s copy holds between steps: its planned step's end (weights,
        gradients, optimizer state); its peak when it was measured, not planned."""
        _, p = self.plans.get((d.recipe, d.batch_size), (0, None)) if d.recipe else (0, None)
        return int(p.meta.end_bytes) if p is not None else int(d.peak or 0)

    def draft(self, label: str, recipe: Recipe, n: int) -> Draft:
        """One candidate: planned, and marked over budget or failed as it is."""
        d = Draft(label, n, recipe)
        try:
            d.peak, p = self.peak(recipe, n)
        except _NotTried as why:
            d.status, d.reason = "skipped", str(why)
            return d
        except torch.OutOfMemoryError:
            d.status, d.reason = "over budget", "out of memory when measured"
            return d
        except Exception as exc:
            d.status, d.reason = "failed", _plan_failure(exc, n, self.n0)
            return d
        d.flops = p.total_flops if p is not None else None
        d.measured = "planned" if p is not None else "measured"
        if d.peak > self.cap:
            d.status, d.reason = "over budget", f"over budget by {fmt_bytes(d.peak - self.cap)}"
        return d

    # ------------------------------------------------------------------ set-ups
    def every(self, setups: list[SetUp], sizes: list[int]) -> list[Draft]:
        """Every candidate of every set-up, planned size by size across the set-ups (all
        set-ups at the smallest size, then all at the next, ...), so that when planning
        stops early every set-up has had the same sizes."""
        runs = [self.steps(s, sizes) for s in setups]
        out: list[Draft] = []
        while runs:
            for run in list(runs):
                try:
                    out += next(run)
                except StopIteration:
                    runs.remove(run)
        return out

    def setup(self, s: SetUp, sizes: list[int]) -> list[Draft]:
        """Every candidate of one set-up over ``sizes`` (ascending)."""
        return [d for step in self.steps(s, sizes) for d in step]

    def steps(self, s: SetUp, sizes: list[int]) -> Iterator[list[Draft]]:
        """One set-up's candidates, one batch size per step."""
        if s.ckpt == "auto":
            yield from self._auto(s, sizes)
            return
        recipe = s.recipe
        if s.ckpt == "blocks":
            blocks = _tune_ckpt.repeated_blocks(self.model)
            if not blocks:
                why = "the model has no repeated stack of blocks to checkpoint"
                yield [Draft(s.label, 0, None, status="refused", reason=why)]
                return
            recipe = recipe.replace(checkpoint=blocks)
        done: list[Draft] = []
        for i, n in enumerate(sizes):
            if i and self.late():
                yield [self._late_row(recipe.label, recipe, m) for m in sizes[i:]]
                return
            self.report(0.05, f"planning {recipe.label} at batch {n}")
            d = self.draft(recipe.label, recipe, n)
            done.append(d)
            if d.status == "over budget":
                skipped = [_skipped(recipe.label, recipe, m, n) for m in sizes[i + 1 :]]
                yield [d, *self._largest(recipe, done), *skipped]
                return
            yield [d]

    def _largest(self, recipe: Recipe, done: list[Draft]) -> list[Draft]:
        """The largest batch that fits between the last size that fits and the first over."""
        fit = [d for d in done if d.fits and d.peak is not None]
        over = done[-1]
        if not fit or fit[-1].peak is None or over.peak is None or self.unplannable:
            return []
        lo, hi, p_lo, p_hi = fit[-1].batch_size, over.batch_size, fit[-1].peak, over.peak
        if hi - lo <= 1:
            return []
        slope = (p_hi - p_lo) / (hi - lo) if p_hi > p_lo else 0.0
        guess = lo + int((self.cap - p_lo) / slope) if slope > 0 else lo
        guess = max(lo, min(hi - 1, guess))
        for _ in range(6):  # the line is exact for most steps; a few plans bisect otherwise
            if guess <= lo:
                return []
            d = self.draft(recipe.label, recipe, guess)
            if d.fits:
                d.reason = ""
                return [d]
            hi = guess
            guess = (lo + hi) // 2
        return []

    def _auto(self, s: SetUp, sizes: list[int]) -> Iterator[list[Draft]]:
        for i, n in enumerate(sizes):
            if i and self.late():
                yield [self._late_row(s.label, None, m) for m in sizes[i:]]
                return
            self.report(0.1, f"choosing checkpointed modules for {s.recipe.label} at batch {n}")
            base = self.draft(s.recipe.label, s.recipe, n)
            if base.fits or base.status != "over budget" or base.peak is None:
                yield [base]  # no checkpoint needed (the same row as "none"), or failed
                if base.fits:
                    continue
                return
            _, p = self.peak(s.recipe, n)
            if p is None or p.peak_phase not in ("forward", "backward"):
                where = "the optimizer step" if p is not None else "a measured step"
                yield [
                    Draft(
                        s.label,
                        n,
                        None,
                        base.peak,
                        "over budget",
                        f"over budget by {fmt_bytes(base.peak - self.cap)} at its peak "
                        f"in {where}: checkpointing cannot lower it",
                    )
                ]
                return
            blocks = _tune_ckpt.ranked(p.trace, p.saved_by_module(), self.times())
            d = self._verify(s, n, blocks, base.peak - self.cap)
            yield [d]
            if not d.fits:
                return

    def _verify(self, s: SetUp, n: int, blocks: list[_tune_ckpt.Block], excess: int) -> Draft:
        """Greedy set, planned; while over budget, the next module joins and it is planned
        again (twice), then every candidate module at once (the most checkpointing can do)."""
        last = Draft(s.label, n, None, status="over budget", reason="no module to checkpoint")
        chosen: list[str] = []
        for extra in sorted({0, 1, 2, len(blocks)}):
            prev, chosen = chosen, _tune_ckpt.choose(blocks, excess, start=extra)
            if not chosen or chosen == prev:
                break  # every module taken
            recipe = s.recipe.replace(checkpoint=tuple(chosen))
            last = self.draft(recipe.label, recipe, n)
            if last.fits or last.status != "over budget":
                return last
        if last.recipe is not None:
            last.reason += f" with every candidate module checkpointed ({len(chosen)})"
        return last

    def times(self) -> dict[str, float]:
        """Forward seconds per module at the user's batch, from a timing-only trace of a copy."""
        if self._times is None:
            args, kwargs = self.make(self.n0)
            work = apply(self.model)
            work.train()
            t = trace(
                work,
                *args,
                loss=self.loss,
                mode="timing",
                warmup=1,
                repeat=3,
                time_budget=2.0,
                model_kwargs=kwargs,
            )
            self._times = {}
            for m in t.modules:
                if m.path:
                    self._times[m.path] = sum(c.fwd_time for c in t.calls_of(m.path))
            self.notes.append(
                "checkpointing 'auto': modules taken greedily by activation bytes freed (the "
                "plan's saved bytes less the input kept) per second of recompute (their forward "
                f"time in a timing-only trace at batch {self.n0}), then verified by planning"
            )
        return self._times


class _NotTried(Exception):
    """A size the search does not try (the reason is the message)."""


def _skipped(label: str, recipe: Recipe, n: int, over: int) -> Draft:
    return Draft(
        label,
        n,
        recipe,
        status="over budget",
        reason=f"not planned: batch {over} is already over budget",
    )


def _plan_failure(exc: BaseException, n: int, n0: int) -> str:
    msg = first_line(str(exc), 300) or type(exc).__name__
    if n != n0:
        msg += (
            f" (at batch {n}; your batch is {n0}: a loss that closes over targets of one batch "
            "size cannot follow the batch: build them from the output's shape, or pass "
            "targets as an input)"
        )
    return msg
