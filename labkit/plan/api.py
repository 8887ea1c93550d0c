"""``labkit.plan(model, batch, ...)``: one training step predicted on fake tensors."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, cast

import torch
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensorMode,
    UnsupportedOperatorException,
)

from labkit._gc import young_gc_only
from labkit._progress import Progress, ProgressOption
from labkit._tensors import model_device, named_tensors
from labkit.memory.tracker import MemoryTracker
from labkit.plan._batch_dim import batch_size
from labkit.plan._fake import (
    OptimizerArg,
    fake_batch,
    fake_model,
    fake_optimizer,
    meta_copy,
    named_state,
    new_mode,
    state_of,
)
from labkit.plan._limit import MAX_MODULE_CALLS, CallLimit, check_limit, refuse_before
from labkit.plan._standin import StandIn, ToFake, held_state
from labkit.plan._values import IndexValues, seed_values
from labkit.plan.errors import PlanError
from labkit.plan.model import PREDICTED_NOTE, Plan, PlanRequest
from labkit.plan.recipe import PlanRecipe, check_recipe
from labkit.trace.entry import StepOptions as _D
from labkit.trace.entry import front_door
from labkit.trace.model import Trace
from labkit.trace.recorder import Recorder, script_modules
from labkit.trace.step import Step, add_notes, check_keywords, record_step

_FAKE_ERRORS = (
    DataDependentOutputException,
    DynamicOutputShapeException,
    UnsupportedOperatorException,
)


def plan(
    model: torch.nn.Module,
    batch: object = None,
    *,
    loss: Callable[[Any], torch.Tensor] | None = _D.loss,
    optimizer: OptimizerArg = _D.optimizer,
    recipe: PlanRecipe | None = _D.recipe,
    device: str | torch.device | None = _D.device,
    backward: bool = _D.backward,
    keep_output: bool = _D.keep_output,
    model_kwargs: dict[str, Any] | None = None,
    progress: ProgressOption = _D.progress,
    max_module_calls: int | None = MAX_MODULE_CALLS,
    **inputs: object,
) -> Plan:
    """Predict one training step's memory, FLOPs and graph without allocating it.

    The step (forward, backward, ``optimizer.step()``) runs on a copy of the model whose
    parameters are fake tensors (``torch._subclasses.fake_tensor``): every op computes
    its output's shape, dtype and strides and allocates nothing. It is the user's loop:
    the output stays alive through backward (``logits, loss = model(x, y);
    loss.backward()``) unless ``keep_output=False``, and the notes say which. Integer and
    boolean tensors with values (the batch's, the model's buffers, and real tensors the
    loss or the model captured, such as ``data.train_mask``) keep their values, so
    value-dependent ops on them (``nonzero``, boolean-mask indexing) plan exactly. The
    same observers as :func:`labkit.memory` watch it, so the plan carries what a measured
    step's trace carries: the graph, FLOPs per module (``FlopCounterMode``'s formulas), the memory
    timeline by category, module and phase, and the peak and where it is.

    A loss may close over the real model, as notebooks write it (an L2 penalty over
    ``model.parameters()``, a term on ``model.fc.weight``, an auxiliary loss the forward
    left on ``model.moe.aux_loss``, ``model`` called again on a second view, the batch as
    an autoencoder's target): while the step runs, each of the user's modules holds its
    fake copy's state and every real tensor of the model or the batch that reaches an op
    is handed its fake, so those gradients and activations count as in the measured step.
    Afterwards the model (its modules' own dicts, parameters, ``.grad``, buffers, hooks),
    the batch, the optimizer given and the RNG are as they were, on error too. A tensor
    computed before the call that requires grad (a graph the loss would backpropagate
    into) is refused with a :class:`PlanError` naming it.

    Args:
        model: The model; it may live on the meta device (built under
            ``torch.device("meta")``).
        batch: The model's input as for :func:`labkit.memory`: a tensor, a tuple/list
            (positional) or a dict (keywords). Tensors may be real or on the meta device;
            a ``torch.Size`` stands for a float32 tensor of that shape.
        loss: ``loss(output) -> scalar tensor``; without it, the sum of the
            floating-point outputs' means (``labkit.trace.step.default_loss``).
        optimizer: An optimizer of ``model`` (any ``torch.optim`` class: rebuilt for the
            fake copy from its ``defaults`` and param groups, with its state) or a factory
            ``params -> optimizer`` (or ``params -> param groups -> optimizer`` code such as
            nanoGPT's ``configure_optimizers``: ``lambda m: m.configure_optimizers(...)``
            receives the fake copy when it takes a module).
        recipe: A :class:`~labkit.optimize.Recipe` (precision, checkpointing) applied to
            the fake copy, as ``labkit.optimize.apply`` applies it for a real run (any
            :class:`~labkit.plan.recipe.PlanRecipe`).
        device: The device to plan for; default the model's (CPU for a meta model).
            Planning for CUDA needs no GPU memory.
        backward: Predict the backward pass too.
        keep_output: Keep the output alive through backward and the optimizer step, as a
            loop holding ``out = model(x)`` does; ``False``: a loop that frees it first.
        model_kwargs: Keyword inputs of ``model`` given apart (when one is named like an
            option here).
        progress: Show progress (a bar in a notebook; on a terminal one line on stderr
            after 2 s: ``labkit.plan: recording the forward (2,048 module calls) [20%]``);
            ``False``: nothing; a function ``(share, message)`` receives it instead.
        max_module_calls: The most module calls the step may make (default 30,000: about
            2 minutes of planning at ~4 ms a module call); a model with more modules
            that can be called is refused before anything is made, a step that makes more
            calls (a loop calling one module many times) is stopped at the first call past
            it. ``None``: no limit.
        **inputs: Keyword inputs of ``model`` (as for :func:`labkit.memory`); with them
            ``batch`` may be left out.

    Returns:
        A :class:`Plan`.

    Raises:
        PlanError: An op has no fake kernel or a data-dependent output (``nonzero``,
            ``.item()``); the error names the op and the module.
        PlanTooLarge: The step has more module calls than ``max_module_calls`` (a
            :class:`PlanError`); it names the size, the time it would take and the option.

    Example:
        >>> with torch.device("meta"):
        ...     model = GPT(vocab=50257, d=768, layers=12)            # doctest: +SKIP
        >>> p = labkit.plan(model, torch.Size([8, 1024]),
        ...                 optimizer=lambda ps: torch.optim.AdamW(ps))  # doctest: +SKIP
        >>> p.peak_bytes, p.peak_where                                  # doctest: +SKIP
    """
    if isinstance(batch, torch.Size):  # a shape stands for one tensor, not a tuple of inputs
        batch = (batch,)
    given = {
        "loss": loss,
        "optimizer": optimizer,
        "recipe": recipe,
        "device": device,
        "backward": backward,
        "keep_output": keep_output,
        "progress": progress,
    }
    door = front_door(
        "labkit.plan",
        model,
        given,
        batch=batch,
        kwargs=inputs,
        model_kwargs=model_kwargs,
        real=False,
    )
    model = door.model
    limit = check_limit(max_module_calls)
    check_keywords(
        "labkit.plan",
        model,
        {"max_module_calls": (max_module_calls, MAX_MODULE_CALLS)},
        model_kwargs,
    )
    # labkit.memory, the faster way, needs real parameters
    real = not any(t.is_meta for t in (*model.parameters(), *model.buffers()))
    scripted = script_modules(model)
    if scripted:
        raise PlanError(
            f"labkit.plan cannot plan {type(model).__name__}: module '{scripted[0]}' is "
            "TorchScript (torch.jit.script), and fake tensors cannot run inside TorchScript. "
            "Plan the Python module (before torch.jit.script), or measure a small batch with "
            "labkit.memory(model, batch)"
        )
    refuse_before(model, limit, real=real)  # before the fake copy: it costs per module too
    dev = torch.device(device) if device is not None else model_device(model)
    if dev.type == "cuda" and not torch.backends.cuda.is_built():
        raise ValueError(
            f"planning for {dev} needs a PyTorch built with CUDA (this one is CPU-only; no GPU "
            "is needed, only the build): plan for device='cpu', or install a CUDA build"
        )
    # the step runs on fakes standing in for the user's tensors (ToFake, StandIn), so no
    # gradient reaches a real parameter; their .grad is put back all the same
    grads = [(p, p.grad) for p in model.parameters()]
    try:
        with door.progress as bar, young_gc_only():  # the fake copy too: no full collections
            return _plan(
                model,
                batch,
                door.args,
                door.kwargs,
                loss,
                optimizer,
                recipe,
                dev,
                (backward, keep_output),
                door.notes,
                bar,
                CallLimit(limit, model, real=real) if limit is not None else None,
            )
    finally:
        for p, g in grads:
            if p.grad is not g:
                p.grad = g


def _plan(
    model: torch.nn.Module,
    batch: object,
    args_in: tuple[object, ...],
    kwargs_in: dict[str, object],
    loss: Callable[[Any], torch.Tensor] | None,
    optimizer: OptimizerArg,
    recipe: PlanRecipe | None,
    dev: torch.device,
    flags: tuple[bool, bool],
    model_notes: tuple[str, ...],
    bar: Progress,
    limit: CallLimit | None = None,
) -> Plan:
    backward, keep_output = flags
    bar(0.0, "making the fake copy")
    t0 = time.perf_counter()
    mode = new_mode()
    memo: dict[int, Any] = {}
    foreign, graphs = held_state(model)
    if recipe is not None:
        fmodel = _with_recipe(model, check_recipe(recipe), mode, dev, memo)
    else:
        fmodel = fake_model(model, mode, dev, memo)
    stand_in = _stand_in(model, fmodel, memo, foreign, recipe is not None)
    fopt = fake_optimizer(optimizer, fmodel, mode, dev, memo)
    real = (args_in, kwargs_in)
    # the fake batch has the real one's structure: (positional inputs, keyword inputs)
    fake = cast("tuple[tuple[object, ...], dict[str, object]]", fake_batch(real, mode, dev))
    args, kwargs = fake
    values = IndexValues(mode)
    to_fake = _to_fake(model, foreign, memo, (real, fake), (mode, values), dev)
    if recipe is None:  # graphs a module held, copied detached: refused if used as they are
        for where, g in graphs:
            copied = memo.get(id(g))
            if copied is not None:
                to_fake.stale[id(copied)] = (where, type(g.grad_fn).__name__, copied)
    seed_values(values, (args, kwargs), real)
    for t in (*model.parameters(), *model.buffers()):
        if id(t) in memo and t.device.type != "meta" and not t.is_floating_point():
            values.know(memo[id(t)], t.detach().clone())  # integer buffers: their values
    bar(0.05, "recording the step on fake tensors")
    trace = _record(
        model,
        fmodel,
        args,
        kwargs,
        loss,
        fopt,
        (mode, values, to_fake, stand_in),
        backward,
        keep_output,
        None if bar.quiet else bar,
        limit,
    )
    seconds = time.perf_counter() - t0
    notes = (
        PREDICTED_NOTE,
        f"planned for {dev} in {seconds:.2f} s"
        + (f" with recipe {recipe.label}" if recipe is not None else ""),
        *trace.meta.notes,
    )
    meta = dataclasses.replace(
        trace.meta, mode="plan", device=str(dev), notes=notes, timing="not timed (predicted)"
    )
    mm = trace.memory_meta
    if mm is not None:
        # what the plan's kernel rules could not count is a caveat of the memory figures
        mm = dataclasses.replace(mm, device=str(dev), notes=(*mm.notes, *values.notes))
    request = None
    if not callable(batch) and batch_size(real) is not None:
        options = {
            "loss": loss,
            "optimizer": optimizer,
            "recipe": recipe,
            "device": dev,
            "keep_output": keep_output,
            "max_module_calls": None if limit is None else limit.limit,
        }
        request = PlanRequest(model, real, options)
    planned = add_notes(trace.replace(meta=meta, memory_meta=mm), *model_notes)
    bar(1.0, "done")
    return Plan(planned, seconds=seconds, request=request)


def _stand_in(
    model: torch.nn.Module,
    fmodel: torch.nn.Module,
    memo: dict[int, Any],
    foreign: list[torch.nn.Module],
    recipe: bool,
) -> StandIn:
    """Which of the user's modules stand for which copy while the step runs.

    Without a recipe every module (and every module the model holds apart) stands for its
    deep copy, and the step runs on the user's own modules. With one, a module the recipe
    kept (same path, same class; checkpointing sets an instance forward) stands for its
    copy there; one it replaced (a fusion) stays the copy's.
    """
    if not recipe:
        modules = (*model.modules(), *foreign)
        return StandIn((m, memo[id(m)]) for m in modules if type(memo.get(id(m))) is type(m))
    work = dict(fmodel.named_modules(remove_duplicate=False))
    pairs = []
    for path, mod in model.named_modules(remove_duplicate=False):
        copy_ = work.get(path)
        if copy_ is not None and type(copy_) is type(mod):
            pairs.append((mod, copy_))
    return StandIn(pairs)


def _to_fake(
    model: torch.nn.Module,
    foreign: list[torch.nn.Module],
    memo: dict[int, Any],
    batches: tuple[object, object],
    modes: tuple[FakeTensorMode, IndexValues],
    dev: torch.device,
) -> ToFake:
    """What the loss may reach of the user's tensors, with their fakes: the model's
    parameters and buffers (and those of modules it holds apart) and the batch's (an
    autoencoder's target, an input that requires grad for a gradient penalty)."""
    reals = state_of(model, foreign)
    table = {id(t): memo[id(t)] for t in reals if id(t) in memo}
    real, fake = batches
    fakes = dict(named_tensors(fake))
    for name, t in named_tensors(real):
        f = fakes.get(name)
        if f is not None and f.shape == t.shape and id(t) not in table:
            table[id(t)] = f
            reals.append(t)
    mode, values = modes
    return ToFake(table, reals, mode, dev, values)


def _with_recipe(
    model: torch.nn.Module,
    recipe: PlanRecipe,
    mode: FakeTensorMode,
    dev: torch.device,
    memo: dict[int, Any],
) -> torch.nn.Module:
    """The fake copy with ``recipe`` applied; ``memo`` maps the real tensors to its fakes.

    The recipe applies its model changes (checkpointing, fusion, ...) to a meta copy, so
    its deep copy allocates nothing; its precision and matmul precision wrap the fake
    copy's forward as ``labkit.optimize.apply`` wraps a real one, for the planned device.
    """
    skeleton, _ = meta_copy(model)
    work = recipe.apply_structure(skeleton)
    wmemo: dict[int, Any] = {}
    fmodel = fake_model(work, mode, dev, wmemo)
    wrapped = recipe.wrap_forward(fmodel.forward, dev.type)
    if wrapped is not fmodel.forward:
        fmodel.forward = wrapped  # on the instance, as apply does
    real, applied = named_state(model), named_state(work)
    for name, t in real.items():  # same paths: apply keeps the model's module paths
        w = applied.get(name)
        if w is not None and id(w) in wmemo:
            memo[id(t)] = wmemo[id(w)]
    return fmodel


def _record(
    model: torch.nn.Module,
    fmodel: torch.nn.Module,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    loss: Callable[[Any], torch.Tensor] | None,
    fopt: torch.optim.Optimizer | None,
    modes: tuple[FakeTensorMode, IndexValues, ToFake, StandIn],
    backward: bool,
    keep_output: bool,
    progress: Callable[[float, str], None] | None = None,
    limit: CallLimit | None = None,
) -> Trace:
    """Record the step; with modules standing in (no recipe), on the user's own modules."""
    mode, values, to_fake, stand_in = modes
    root = model if stand_in.covers(model) else fmodel  # (a copy of another class: the copy)
    tracker = MemoryTracker(
        root, optimizers=(fopt,) if fopt is not None else (), inputs=(args, kwargs)
    )
    step = Step(
        root, args, kwargs, loss=loss, optimizer=fopt, backward=backward, keep_output=keep_output
    )

    def failed(err: BaseException, rec: Recorder) -> None:
        if limit is not None and limit.passed:  # stopped at the limit (whatever was raised)
            raise limit.refusal() from None
        if isinstance(err, PlanError):  # said already (ToFake's refusal)
            raise err.with_traceback(None) from None
        raise PlanError(_failure(model, err, rec)) from None

    with stand_in:  # outside the recording: its snapshot of the model is of the fakes
        trace = record_step(
            step,
            mode="full",
            observers=(values,) if limit is None else (values, limit),
            memory=tracker,
            contexts=(mode, to_fake),
            on_error=failed,
            progress=progress,
        )
    if limit is not None and limit.passed:  # the step went on past the refusal (caught in it)
        raise limit.refusal()
    return trace


def _failure(model: torch.nn.Module, err: BaseException, rec: Recorder) -> str:
    cause = err
    while cause.__cause__ is not None and not isinstance(cause, _FAKE_ERRORS):
        cause = cause.__cause__
    name = type(model).__name__
    failed = rec.inst.failed
    if failed is not None:
        where = f"module '{failed.module}'" if failed.module else f"{name}.forward"
    else:
        where = "outside any module (the loss or the optimizer step)"
    if isinstance(cause, _FAKE_ERRORS):
        op = getattr(cause, "func", None)
        why = {
            DataDependentOutputException: "its result depends on the tensor's values "
            "(.item(), .tolist(), a Python if on a tensor)",
            DynamicOutputShapeException: "its output shape depends on the tensor's values",
            UnsupportedOperatorException: "it has no fake (meta) kernel",
        }[type(cause)]
        return (
            f"labkit.plan cannot predict {name}: op {op} in {where} stopped it: {why}. A plan "
            "runs on fake tensors that have shapes but no values; measure a small batch "
            "with labkit.memory(model, batch) instead, or move that op out of the training "
            "step"
        )
    msg = str(err).split("\n")[0]
    if "data is not allocated yet" in msg:  # C++ code writing numbers into a fake's data
        return (
            f"labkit.plan cannot predict {name}: an op in {where} writes numbers into a new "
            f"tensor's memory inside torch, which a fake tensor does not have ({msg}). "
            "F.ctc_loss does so when its lengths are Python lists and reduction='mean': "
            "pass them as tensors. Otherwise measure a small batch with "
            "labkit.memory(model, batch)"
        )
    return (
        f"labkit.plan failed for {name} in {where}: {type(err).__name__}: {msg}. The plan "
        "runs the step on fake tensors; if the real step runs, measure it with "
        "labkit.memory(model, batch) on a small batch"
    )
