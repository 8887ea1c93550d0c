"""``labkit.tune``: the fastest training set-up (Recipe, batch size) that fits a memory budget."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from labkit._format import fmt_bytes, fmt_time
from labkit._progress import ProgressOption
from labkit._progress import progress as progress_of
from labkit._tensors import call_inputs, held_bytes, model_device
from labkit.optimize import _tune_flops
from labkit.optimize._bench_checks import Progress
from labkit.optimize._tune_batch import Inputs, batch_dim, ladder, maker
from labkit.optimize._tune_choice import STATUSES, Candidate, Choice
from labkit.optimize._tune_heats import heats
from labkit.optimize._tune_race import MIN_PAIRS, Entry, race, speed_interval, versus
from labkit.optimize._tune_run import (
    LossFn,
    OptimizerChoice,
    Runner,
    channels_last,
    measured_peak,
)
from labkit.optimize._tune_search import Draft, Search
from labkit.optimize._tune_space import SetUp, Space, expand
from labkit.optimize.recipe import Recipe
from labkit.plan.batch import DEFAULT_MARGIN, resolve_budget
from labkit.trace import StepState
from labkit.trace.entry import StepOptions

__all__ = ["Candidate", "Choice", "TuneError", "tune"]

Measured = tuple[int | None, str]  # the pick's measured peak (None: not run) and how it was taken


class TuneError(ValueError):
    """Nothing fits the budget (the message names the smallest predicted peak and its
    set-up), or every set-up that fits failed. ``error.candidates`` holds what was tried.

    Example:
        >>> try:                                                  # doctest: +SKIP
        ...     labkit.tune(model, x, budget=64 * 2**20)
        ... except labkit.optimize.tune.TuneError as e:
        ...     print(e)
    """

    def __init__(self, message: str, candidates: tuple[Candidate, ...] = ()) -> None:
        super().__init__(message)
        self.candidates = candidates


def tune(
    model: torch.nn.Module,
    batch: object,
    budget: int | None = None,
    *,
    loss: LossFn | None = None,
    optimizer: OptimizerChoice = None,
    space: Space = None,
    batch_sizes: Sequence[int] | None = None,
    budget_s: float = 60.0,
    plan_s: float | None = None,
    steps: int = 5,
    warmup: int = 1,
    level: float = 0.95,
    margin: float = DEFAULT_MARGIN,
    model_kwargs: dict[str, Any] | None = None,
    progress: ProgressOption = StepOptions.progress,
) -> Choice:
    """The fastest training set-up that fits a memory budget: a Recipe and a batch size.

    1. **Plans prune.** Every set-up of ``space`` (precision, checkpointing, compile, ...)
       is planned (:func:`labkit.plan`: exact peak, nothing allocated) at each batch size,
       ascending until one is over ``budget``; the largest size that fits is found between.
       Batches of other sizes are made along the batch dimension ``max_batch_size`` finds
       (the first dimension of the first tensor; tensors with it are cut or repeated).
       ``checkpoint="auto"`` picks, where the step without checkpointing is over budget,
       the modules that free the most activation bytes per second of recompute (greedily,
       :mod:`labkit.optimize._tune_ckpt` says why), then plans that set to verify it.
    2. **Only what fits is timed**, side by side (A B C A B C ...) on copies of the model,
       as :func:`labkit.compare` times: seconds per sample, a 95% interval from a paired
       bootstrap over the rounds. A set-up measurably slower than the leader drops out;
       rounds end when no runner-up is left or ``budget_s`` (all of tuning) is spent. A
       checkpointed set-up is not timed where the same Recipe fits at that batch size
       without checkpointing (recompute only adds time); the table says so.
    3. **The pick is run once** at its batch size on the model's device and its peak kept
       (``Choice.measured_peak``: labkit's memory tracker on CPU, as :func:`labkit.memory`;
       the caching allocator's reserved bytes on CUDA). A pick measured over budget is
       rejected and the next fastest run instead.

    The model, its optimizer, the inputs and the random number generators are as they
    were: every step runs on an :func:`~labkit.optimize.apply` copy with the optimizer
    rebuilt for it (class, param groups, hyperparameters, a copy of its state).

    Args:
        model: The model to train (real weights: the candidates are timed).
        batch: One batch as the model takes it: a tensor, a tuple of positional inputs
            or a dict of keyword inputs.
        budget: Bytes the step's peak may use. Default on CUDA: the free memory less
            ``margin``; on CPU it must be given.
        loss: ``loss(output) -> scalar``; default: the sum of the outputs' means. A loss
            that closes over targets of one batch size cannot follow other batch sizes:
            pass the targets as an input or build them from the output's shape.
        optimizer: The optimizer (rebuilt for each copy) or a factory ``params ->
            optimizer``; ``None``: plain SGD (no state).
        space: The set-ups to search: a dict of Recipe fields to values (their product;
            ``checkpoint`` also takes ``"none"``, ``"auto"`` and ``"blocks"``, the
            model's repeated stack), or a list of Recipes. Combinations the Recipe refuses
            are skipped with its reason. Default: precision ``"32"`` and the reduced
            precision the device runs natively, checkpoint none/auto, compile on CUDA.
        batch_sizes: Batch sizes to try; default your batch times 1/4, 1/2, 1, 2, 4, 8, 16.
        budget_s: Seconds for all of tuning: timing rounds stop when it is spent (the
            first ``steps`` rounds always run).
        plan_s: Seconds of planning after which each set-up plans no further batch size
            (those are listed as skipped); default half of ``budget_s``.
        steps: Timed rounds before the leader is first checked (a runner-up is judged on
            5 rounds at least).
        warmup: Untimed rounds first (the first call, compile, caches).
        level: Confidence level of the intervals.
        margin: Fraction of CUDA free memory kept back (only when ``budget`` is None).
        model_kwargs: Keyword inputs of the model beside ``batch`` (resized with it).
        progress: Show progress (a bar in a notebook; on a terminal one line on stderr
            after 2 s: ``labkit.tune: planning bf16-mixed at batch 64 [5%]``); ``False``:
            nothing; a function ``(fraction, message)`` receives it instead. Ctrl-C while
            timing ends the race with the rounds so far (``ended_by="interrupted"``).

    Returns:
        A :class:`Choice`; ``choice.summary()`` lists every candidate and why it lost.

    Raises:
        TuneError: Nothing fits (the smallest predicted peak and its set-up are named).
        ValueError: A budget in the wrong unit or below the weights alone, or a batch
            without a batch dimension.

    Example:
        >>> import torch, labkit
        >>> model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
        ...                             torch.nn.Linear(64, 4))
        >>> x = torch.randn(32, 16)
        >>> choice = labkit.tune(model, x, budget=200_000, batch_sizes=[16, 32],
        ...                      space={"precision": ["32"]}, budget_s=1, steps=2)
        >>> choice.measured_peak <= choice.budget
        True
        >>> print(choice.summary())                             # doctest: +SKIP
    """
    t0 = time.perf_counter()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"tune needs a torch.nn.Module, got {type(model).__name__}")
    args, kwargs = call_inputs(batch, model_kwargs or {}, where="labkit.tune")
    device = model_device(model)
    _check_real(model)
    cap, how = _budget(budget, device, margin)
    _check_weights(model, cap)
    _check_numbers(budget_s, steps, warmup, level)
    if plan_s is None:
        plan_s = budget_s / 2
    elif isinstance(plan_s, bool) or not isinstance(plan_s, (int, float)) or plan_s <= 0:
        raise ValueError(f"tune(plan_s=...) is seconds of planning, > 0; got {plan_s!r}")
    n0 = batch_dim(args, kwargs)
    make = maker(args, kwargs, n0)
    sizes = ladder(n0, batch_sizes)
    setups, refused = expand(space, device)
    if not (
        optimizer is None or isinstance(optimizer, torch.optim.Optimizer) or callable(optimizer)
    ):
        raise TypeError(
            "tune(optimizer=...) must be a torch.optim.Optimizer of the model or a factory "
            f"params -> optimizer, got {type(optimizer).__name__}"
        )
    state = StepState(None, (args, kwargs), rng=True)
    after = "the model, optimizer, inputs and RNG are as they were"
    bar = progress_of("labkit.tune", progress, after=after)
    try:
        with bar:
            timing = (budget_s, plan_s, steps, warmup, level)
            choice = _tune(
                model,
                make,
                n0,
                sizes,
                setups,
                refused,
                cap,
                how,
                device,
                loss,
                optimizer,
                timing,
                t0,
                bar,
            )
            if choice.ended_by == "interrupted" and not bar.quiet:
                bar.stopped(after="the pick is from the rounds finished (ended_by='interrupted')")
            return choice
    finally:
        state.restore()


def _tune(
    model: torch.nn.Module,
    make: Callable[[int], Inputs],
    n0: int,
    sizes: list[int],
    setups: list[SetUp],
    refused: list[tuple[str, str]],
    cap: int,
    how: str,
    device: torch.device,
    loss: LossFn | None,
    optimizer: OptimizerChoice,
    timing: tuple[float, float, int, int, float],
    t0: float,
    report: Progress,
) -> Choice:
    budget_s, plan_s, steps, warmup, level = timing
    search = Search(model, make, n0, loss, optimizer, cap, report, deadline=t0 + plan_s)
    drafts: dict[tuple[Recipe, int], Draft] = {}
    others: list[Draft] = [
        Draft(label, 0, None, status="refused", reason=why) for label, why in refused
    ]
    for d in search.every(setups, sizes):
        if d.recipe is None:
            others.append(d)
        else:
            drafts.setdefault((d.recipe, d.batch_size), d)
    fitting = [d for d in drafts.values() if d.fits]
    if not fitting:
        raise _nothing_fits(list(drafts.values()) + others, cap, how)
    fitting = _undominated(fitting)
    t_plan = time.perf_counter() - t0
    planned = sum(1 for _, p in search.plans.values() if p is not None)
    report(0.3, f"timing {len(fitting)} set-ups that fit")
    held = [search.held(d) for d in fitting]
    groups = heats(
        [d.recipe for d in fitting],
        held,
        [d.peak or 0 for d in fitting],
        cap,
        shared=device.type == "cuda",
    )
    runners: dict[Recipe, Runner] = {}
    entries: dict[int, Entry] = {}
    verdicts: dict[int, Verdict] = {}
    champion: int | None = None
    ended, rounds = "one candidate", 0
    for h, keys in enumerate(groups):
        members = ([champion] if champion is not None else []) + keys
        for k in keys:
            entries[k] = _entry(k, fitting[k], model, make, optimizer, loss, runners)
        if champion is not None:
            entries[champion].times = []  # timed again, side by side with this heat
        heat = f"timing heat {h + 1} of {len(groups)}: {len(members)} set-ups"
        report(0.3 + 0.6 * h / len(groups), heat)
        left = (budget_s - (time.perf_counter() - t0)) / (len(groups) - h)
        result = race(
            [entries[k] for k in members],
            warmup=warmup,
            rounds=steps,
            budget_s=max(1e-3, left),
            level=level,
        )
        verdicts.update(_verdicts([entries[k] for k in members], result.leader, level))
        champion = result.leader if result.leader is not None else champion
        ended, rounds = result.ended_by, rounds + result.rounds
        keep = {fitting[k].recipe for g in groups[h + 1 :] for k in g}
        if champion is not None:
            keep.add(fitting[champion].recipe)
        for r in [r for r in runners if r not in keep]:
            del runners[r]  # this heat's copies make room for the next
        for k, e in entries.items():
            if fitting[k].recipe not in keep:
                e.run = _released  # its closure held the copy
        if ended == "interrupted":
            break
    t_race = time.perf_counter() - t0 - t_plan
    in_heats = ""
    if len(groups) > 1:
        in_heats = f" in {len(groups)} heats (their copies of the model share the device)"
    search.notes.insert(
        0,
        f"{planned} plans in {fmt_time(t_plan)}; {len(entries)} set-ups that fit timed"
        f"{in_heats} in {fmt_time(t_race)} ({rounds} rounds)",
    )
    report(0.9, "running the pick once for its peak")
    runners.clear()
    for e in entries.values():
        e.run = _released  # the copies go before the pick is run for its peak
    pick, measured, notes = _measure_pick(
        champion, entries, fitting, model, make, optimizer, loss, cap, ended
    )
    if pick is None:
        cands = _candidates(fitting, entries, verdicts, None, level, cap) + _rest(drafts, others)
        raise TuneError(
            "tune: every set-up that fits failed when run:\n"
            + "\n".join(f"  {c.label} @ batch {c.batch_size}: {c.reason}" for c in cands[:8]),
            tuple(cands),
        )
    cands = _candidates(fitting, entries, verdicts, pick, level, cap) + _rest(drafts, others)
    return _choice(
        pick,
        entries[pick],
        fitting[pick],
        measured,
        cands,
        cap,
        how,
        device,
        time.perf_counter() - t0,
        ended,
        level,
        [*search.notes, *notes],
    )


def _undominated(fitting: list[Draft]) -> list[Draft]:
    """The fitting set-ups worth timing: a checkpointed one is left out (``"skipped"``) where
    the same Recipe without checkpointing fits at the same batch size, since checkpointing
    only adds recompute to the same step."""
    plain = {
        (d.recipe, d.batch_size): d
        for d in fitting
        if d.recipe is not None and not d.recipe.checkpoint
    }
    for d in fitting:
        if d.recipe is None or not d.recipe.checkpoint:
            continue
        twin = plain.get((d.recipe.replace(checkpoint=()), d.batch_size))
        if twin is not None:
            d.status = "skipped"
            d.reason = (
                f"not timed: {twin.label} fits at batch {d.batch_size} without "
                "checkpointing, and checkpointing only adds recompute"
            )
    return [d for d in fitting if d.fits]


def _entry(
    k: int,
    d: Draft,
    model: torch.nn.Module,
    make: Callable[[int], Inputs],
    optimizer: OptimizerChoice,
    loss: LossFn | None,
    runners: dict[Recipe, Runner],
) -> Entry:
    assert d.recipe is not None
    e = Entry(k, d.batch_size, lambda: 0.0)
    try:
        if d.recipe not in runners:
            runners[d.recipe] = Runner(model, d.recipe, optimizer, loss)
    except Exception as exc:
        e.error = f"{type(exc).__name__}: {exc}"
        return e
    runner = runners[d.recipe]
    args, kwargs = make(d.batch_size)
    args = channels_last(args, d.recipe)
    e.run = lambda: runner.seconds(args, kwargs)
    return e


def _released() -> float:
    raise RuntimeError("this set-up's copy of the model was released after its heat")


def _measure_pick(
    lead: int | None,
    entries: dict[int, Entry],
    fitting: list[Draft],
    model: torch.nn.Module,
    make: Callable[[int], Inputs],
    optimizer: OptimizerChoice,
    loss: LossFn | None,
    cap: int,
    ended_by: str,
) -> tuple[int | None, Measured, list[str]]:
    """The pick and its measured peak: the fastest whose measured peak fits the budget."""
    notes: list[str] = []
    order = sorted(
        (e for e in entries.values() if not e.error and e.median() is not None),
        key=lambda e: (e.key != lead, e.median(), e.key),
    )
    if not order:
        ok = [e.key for e in entries.values() if not e.error]
        if not ok:
            return None, (None, ""), notes
        best = max(ok, key=lambda k: (fitting[k].batch_size, -k))  # nothing timed: the largest
        notes.append(
            "timing was interrupted before any round: the pick is the largest batch "
            "that fits, untimed"
        )
        order = [entries[best]]
    if ended_by == "interrupted":
        notes.append(
            "interrupted: the figures are those of the rounds finished; the pick was "
            "not run for its peak"
        )
        return order[0].key, (None, ""), notes
    for e in order[:3]:
        d = fitting[e.key]
        assert d.recipe is not None
        args, kwargs = make(d.batch_size)
        try:
            peak, how = measured_peak(model, d.recipe, optimizer, loss, args, kwargs)
        except torch.OutOfMemoryError:
            d.status, d.reason = "over budget", "out of memory when run for its peak"
            continue
        if peak <= cap:
            return e.key, (peak, how), notes
        d.status = "over budget"
        d.reason = (
            f"measured peak {fmt_bytes(peak)} is over budget by {fmt_bytes(peak - cap)} "
            f"(predicted {fmt_bytes(d.peak or 0)})"
        )
        notes.append(f"{d.label} @ batch {d.batch_size}: {d.reason}; the next fastest was run")
    return None, (None, ""), notes


Verdict = tuple[str, str, tuple[float, float, float] | None]  # status, reason, pick over it


def _verdicts(members: list[Entry], lead: int | None, level: float) -> dict[int, Verdict]:
    """Each runner-up against its heat's leader: measurably slower, or within noise."""
    leader = next((e for e in members if e.key == lead), None)
    out: dict[int, Verdict] = {}
    for e in members:
        if e is leader or leader is None:
            continue
        if e.error:
            out[e.key] = ("failed", e.error, None)
            continue
        iv = versus(leader, e, level)
        if iv is None and e.timed():
            out[e.key] = (
                "within noise",
                f"too few rounds side by side to tell ({len(e.timed())}; {MIN_PAIRS} needed)",
                None,
            )
            continue
        if iv is None:
            out[e.key] = ("not timed", "fits; timing ended before it ran", None)
            continue
        what = f"the pick is {iv.estimate:.2f}x [{iv.low:.2f}-{iv.high:.2f}] faster"
        if iv.low > 1.0:
            out[e.key] = ("slower", f"{what}: outside noise", (iv.estimate, iv.low, iv.high))
        else:
            out[e.key] = (
                "within noise",
                f"{what}: the interval spans 1, within noise",
                (iv.estimate, iv.low, iv.high),
            )
    return out


def _candidates(
    fitting: list[Draft],
    entries: dict[int, Entry],
    verdicts: dict[int, Verdict],
    pick: int | None,
    level: float,
    cap: int,
) -> list[Candidate]:
    out: list[Candidate] = []
    for k, d in enumerate(fitting):
        e = entries.get(k)
        speed = speed_interval(e, level) if e is not None else None
        status, reason, slower = d.status, d.reason, None
        if d.status == "over budget":
            pass  # measured over budget (reason set)
        elif e is not None and e.error:
            status, reason = "failed", e.error
        elif k == pick:
            status, reason = "picked", f"fits with {fmt_bytes(cap - (d.peak or 0))} to spare"
        elif k in verdicts:
            status, reason, slower = verdicts[k]
        else:
            status, reason = "not timed", "fits; timing ended before it ran"
        median, low, high = speed if speed is not None else (None, None, None)
        out.append(
            Candidate(
                d.label,
                d.batch_size,
                d.recipe,
                d.peak,
                status,
                reason,
                samples_per_s=median,
                samples_per_s_low=low,
                samples_per_s_high=high,
                slower_by=slower,
                flops=d.flops,
                rounds=len(e.timed()) if e is not None else 0,
                measured=d.measured,
            )
        )
    order = {s: i for i, s in enumerate(STATUSES)}
    out.sort(key=lambda c: (order.get(c.status, 99), -(c.samples_per_s or 0.0)))
    return out


def _rest(drafts: dict[tuple[Recipe, int], Draft], others: list[Draft]) -> list[Candidate]:
    rows = [d for d in drafts.values() if not d.fits and d.status != "picked"] + others
    order = {s: i for i, s in enumerate(STATUSES)}
    rows.sort(key=lambda d: (order.get(d.status, 99), d.label, d.batch_size))
    return [
        Candidate(
            d.label,
            d.batch_size,
            d.recipe,
            d.peak,
            d.status,
            d.reason,
            flops=d.flops,
            measured=d.measured,
        )
        for d in rows
    ]


def _choice(
    pick: int,
    e: Entry,
    d: Draft,
    measured: tuple[int | None, str],
    cands: list[Candidate],
    cap: int,
    how: str,
    device: torch.device,
    seconds: float,
    ended_by: str,
    level: float,
    notes: list[str],
) -> Choice:
    assert d.recipe is not None and d.peak is not None
    speed = speed_interval(e, level)
    peak, peak_how = measured
    step = (e.median() or 0.0) * d.batch_size
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else str(device)
    extra = ", recompute of checkpointed modules included" if d.recipe.checkpoint else ""
    rate, mfu, util = (None, None, "no FLOPs: the peak was measured, not planned")
    if not step:
        util = "no FLOP/s: the pick was not timed"
    elif d.flops is not None:
        dtype = _tune_flops.dtype_of(d.recipe.precision, d.recipe.matmul_precision)
        rate, mfu, util = _tune_flops.utilization(d.flops, step, str(device), name, dtype, extra)
    intervals = (
        f"samples/s: median over interleaved rounds with its {level:.0%} bootstrap interval; "
        "a runner-up is slower 'outside noise' when the paired-bootstrap interval of the "
        "pick's speed over its own lies wholly above 1"
    )
    notes = [intervals, *notes]
    if peak is not None:
        notes.append(f"measured peak of the pick: {peak_how}; step time {fmt_time(step)}")
    return Choice(
        recipe=d.recipe,
        batch_size=d.batch_size,
        predicted_peak=d.peak,
        measured_peak=peak,
        samples_per_s=speed[0] if speed else None,
        samples_per_s_low=speed[1] if speed else None,
        samples_per_s_high=speed[2] if speed else None,
        budget=cap,
        budget_how=how,
        candidates=tuple(cands),
        flops_per_s=rate,
        mfu=mfu,
        utilization=util,
        device=str(device),
        seconds=seconds,
        ended_by=ended_by,
        level=level,
        notes=tuple(notes),
    )


def _nothing_fits(drafts: list[Draft], cap: int, how: str) -> TuneError:
    planned = [d for d in drafts if d.peak is not None]
    cands = tuple(
        Candidate(
            d.label,
            d.batch_size,
            d.recipe,
            d.peak,
            d.status,
            d.reason,
            flops=d.flops,
            measured=d.measured,
        )
        for d in drafts
    )
    if not planned:
        why = "; ".join(f"{d.label} @ batch {d.batch_size}: {d.reason}" for d in drafts[:4])
        return TuneError(f"tune: no set-up could be planned or measured: {why}", cands)
    best = min(planned, key=lambda d: (d.peak, d.batch_size))
    assert best.peak is not None
    return TuneError(
        f"tune: nothing fits the budget of {fmt_bytes(cap)} ({how}): the smallest predicted "
        f"peak is {fmt_bytes(best.peak)}, over by {fmt_bytes(best.peak - cap)}, from "
        f"{best.label} at batch {best.batch_size}. Raise the budget, try smaller batch sizes "
        "(batch_sizes=[...]), or add set-ups that save memory to space (checkpoint 'auto' or "
        "'blocks', bf16-mixed)",
        cands,
    )


# ---------------------------------------------------------------------- input checks
def _budget(budget: float | None, device: torch.device, margin: float) -> tuple[int, str]:
    if budget is not None:
        if isinstance(budget, bool) or not isinstance(budget, (int, float)):
            raise TypeError(f"tune(budget=...) is a number of bytes, got {type(budget).__name__}")
        if not math.isfinite(budget) or budget <= 0:
            raise ValueError(f"tune(budget=...) must be a positive number of bytes, got {budget}")
        if budget < 1000:
            raise ValueError(
                f"tune(budget={budget!r}) is in bytes: {budget!r} bytes cannot hold a training "
                f"step. For {budget!r} GiB pass budget=int({budget!r} * 2**30)"
            )
    if budget is None and device.type != "cuda":
        raise ValueError(
            f"tune on {device}: give budget= in bytes (e.g. budget=8 * 2**30); only on CUDA is "
            "the budget read from the device (its free memory less the allocator margin)"
        )
    return resolve_budget(None if budget is None else int(budget), str(device), margin)


def _check_weights(model: torch.nn.Module, cap: int) -> None:
    weights = sum(held_bytes(p) for p in model.parameters())
    weights += sum(held_bytes(b) for b in model.buffers())
    if weights > cap:
        raise ValueError(
            f"tune: the budget of {fmt_bytes(cap)} is smaller than the weights alone "
            f"({fmt_bytes(weights)}: the parameters and buffers of {type(model).__name__}); "
            "no training step fits. Raise budget= (bytes)"
        )


def _check_real(model: torch.nn.Module) -> None:
    meta = [n for n, p in model.named_parameters() if p.device.type == "meta"]
    if meta:
        raise ValueError(
            f"tune times the set-ups, so the model needs real weights, but {meta[0]!r} is on the "
            "meta device: build the model on a real device, or use labkit.plan.max_batch_size "
            "to plan a meta model"
        )


def _check_numbers(budget_s: object, steps: object, warmup: object, level: object) -> None:
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not budget_s > 0:
        raise ValueError(f"tune(budget_s=...) is seconds for tuning, > 0; got {budget_s!r}")
    for name, v, low in (("steps", steps, 2), ("warmup", warmup, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < low:
            raise ValueError(f"tune({name}=...) must be an int >= {low}, got {v!r}")
    if not (isinstance(level, float) and 0 < level < 1):
        raise ValueError(f"tune(level=...) must be between 0 and 1, got {level!r}")
