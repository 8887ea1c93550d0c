"""One public step: the user's training step, recorded under the instrumentation layer.

:class:`Step` says what the user's loop does (forward, the loss, backward, the optimizer
step, whether the output stays alive); :func:`record_step` records it once with a
:class:`~labkit.trace.Recorder` (and any more observers), optionally times it with
timing-only passes, and puts back everything the step touched (:class:`StepState`) on
success, on error and on KeyboardInterrupt, unless asked to keep the step.
``labkit.trace``, ``labkit.memory``, ``labkit.plan`` and ``Lab.trace`` are this one
function with different observers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import Any

import torch

from labkit._gc import young_gc_only
from labkit._tensors import named_tensors
from labkit.trace._closures import SideEffects
from labkit.trace._foreign import ForeignState
from labkit.trace._passes import time_step, too_many_for_op_times
from labkit.trace._raw import parameters_of
from labkit.trace.errors import TraceError, scalar_loss
from labkit.trace.instrument import Observer
from labkit.trace.model import Trace
from labkit.trace.recorder import MemoryObserver, Recorder, check_model
from labkit.trace.state import StepState

__all__ = [
    "DEFAULT_LOSS_NOTE",
    "FREE_OUTPUT_NOTE",
    "KEEP_OUTPUT_NOTE",
    "SideEffects",
    "Step",
    "backward_target",
    "default_loss",
    "record_step",
]

KEEP_OUTPUT_NOTE = (
    "the output stayed alive through backward and the optimizer step, as "
    "`out = model(x); loss(out).backward()` keeps it (keep_output=False: a loop that frees it)"
)
FREE_OUTPUT_NOTE = (
    "the output was freed before backward (keep_output=False), as in "
    "`loss_fn(model(x), y).backward()`; only what autograd saved stayed alive"
)
DEFAULT_LOSS_NOTE = "backward of the sum of the outputs' means (no loss given)"
DEEP_LIMIT = 20_000  # the recursion limit a recording may raise to (deep nesting)
_DEEP = 50  # nesting depth from which a RecursionError is blamed on the nesting


def default_loss(out: object) -> torch.Tensor | None:
    """The loss every labkit step trains on when none is given: the sum, over the
    floating-point output tensors that require grad, of each one's mean, accumulated in
    float32; ``None`` when no output requires grad.

    One definition for ``labkit.trace``, ``memory``, ``plan`` and ``compare``/``tune``
    (:class:`~labkit.optimize.step.RecipeStep`), so they train the same loss. A mean, not a
    sum: it stays the size of one element whatever the batch and output sizes (a sum over
    a large fp16 output overflows, and its gradients grow with the batch, which an SGD
    step of ``compare`` would diverge on); for a model that returns ``(logits, loss)`` it is
    close to the model's own loss; a scalar output is its own loss. Its backward costs
    what a sum's does: one gradient of each output's size.

    Example:
        >>> out = (torch.ones(2, requires_grad=True), torch.full((3,), 2.0, requires_grad=True))
        >>> default_loss(out)
        tensor(3., grad_fn=<AddBackward0>)
    """
    tensors = [t for _, t in named_tensors(out) if t.requires_grad and t.is_floating_point()]
    if not tensors:
        return None
    means = [t.mean(dtype=torch.float32) for t in tensors]
    total = means[0]
    for m in means[1:]:
        total = total + m
    return total


def _needs_closure(opt: torch.optim.Optimizer) -> bool:
    """Whether ``opt.step`` takes a closure it must be given (``LBFGS``)."""
    try:
        closure = inspect.signature(type(opt).step).parameters.get("closure")
    except (TypeError, ValueError):
        return False
    return closure is not None and closure.default is inspect.Parameter.empty


def backward_target(
    out: object, loss: Callable[[Any], Any] | None, notes: list[str]
) -> torch.Tensor | None:
    """The scalar to call ``backward()`` on: ``loss(out)``, or :func:`default_loss` (the sum
    of the floating-point outputs' means); ``None`` (with a note saying why) when there is
    none."""
    if not torch.is_grad_enabled():
        notes.append("no backward pass: gradients are disabled (no_grad or inference_mode)")
        return None
    if loss is not None:
        value = scalar_loss(loss(out))
        if not value.requires_grad:
            notes.append("no backward pass: the loss does not require grad")
            return None
        return value
    default = default_loss(out)
    if default is None:
        notes.append("no backward pass: no output requires grad")
        return None
    if not _one_scalar(out):
        notes.append(DEFAULT_LOSS_NOTE)
    return default


def _one_scalar(out: object) -> bool:
    """Whether the output is one floating-point scalar (its own loss: no note)."""
    floats = [t for _, t in named_tensors(out) if t.is_floating_point()]
    return len(floats) == 1 and floats[0].numel() == 1


@dataclasses.dataclass(repr=False)
class Step:
    """One training step as the user's loop runs it.

    Calling it (with a list to append notes to) runs ``model(*args, **kwargs)`` (or
    ``forward(*args, **kwargs)``), the loss, ``backward()`` and the optimizer step.

    Args:
        model: The model.
        args: Positional inputs.
        kwargs: Keyword inputs (given as a dict: they never collide with labkit's options).
        loss: ``loss(output) -> scalar``; without it, :func:`default_loss` (the sum of
            the floating-point outputs' means).
        optimizer: Stepped after backward.
        scaler: A ``torch.amp.GradScaler``: the loss is scaled, the step goes through it.
        backward: Run the backward pass.
        keep_output: Keep the model's output alive through backward and the optimizer step,
            as ``logits, loss = model(x, y); loss.backward()`` does; ``False`` frees it
            before backward (``loss_fn(model(x), y).backward()``).
        forward: Runs the forward pass instead of ``model(*args, **kwargs)`` (a trainer's
            step function); it gets ``args`` and ``kwargs``.
        calls: How many times the step ran.
        on_call: Called with ``calls`` as each run begins, before the forward (the
            progress of :func:`record_step`'s passes).

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(3, 1)
        >>> step = Step(model, (torch.randn(4, 3),))
        >>> step([]); model.weight.grad is not None, step.calls
        (True, 1)
    """

    model: torch.nn.Module
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    loss: Callable[[Any], Any] | None = None
    optimizer: torch.optim.Optimizer | None = None
    scaler: Any = None
    backward: bool = True
    keep_output: bool = True
    forward: Callable[..., Any] | None = None
    calls: int = 0
    on_call: Callable[[int], None] | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.optimizer is not None and _needs_closure(self.optimizer):
            name = type(self.optimizer).__name__
            raise TypeError(
                f"{name}.step(closure) re-evaluates the model several times a step; labkit's "
                "step runs forward, backward and optimizer.step() once, without a closure. "
                f"Measure the forward and backward without the optimizer (optimizer=None), "
                f"or record your own loop with `with labkit.trace(model) as rec:` around "
                f"`{type(self.optimizer).__name__.lower()}.step(closure)`"
            )

    def __repr__(self) -> str:
        opt = type(self.optimizer).__name__ if self.optimizer is not None else None
        return (
            f"Step(model={type(self.model).__name__}, args={len(self.args)}, "
            f"kwargs={sorted(self.kwargs)}, loss={self.loss is not None}, optimizer={opt}, "
            f"backward={self.backward}, keep_output={self.keep_output})"
        )

    def __call__(self, notes: list[str]) -> None:
        self.calls += 1
        if self.on_call is not None:
            self.on_call(self.calls)
        run = self.forward if self.forward is not None else self.model
        out = run(*self.args, **self.kwargs)
        target = None
        if self.backward:
            target = backward_target(out, self.loss, notes)
            if not self.keep_output:
                out = None  # the loop frees its output before backward
            if target is not None:
                scaled = self.scaler.scale(target) if self.scaler is not None else target
                scaled.backward()
                del scaled
        if self.optimizer is not None and self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        elif self.optimizer is not None:
            self.optimizer.step()
        del out, target  # alive until here: the step's end, as in the user's loop

    def state(self) -> StepState:
        """What this step can touch, saved now (see :class:`StepState`)."""
        return StepState(
            self.model,
            (self.args, self.kwargs),
            optimizers=[self.optimizer] if self.optimizer is not None else [],
            scalers=[self.scaler] if self.scaler is not None else [],
        )


OnError = Callable[[BaseException, Recorder], None]


def record_step(
    step: Step,
    *,
    mode: str = "full",
    observers: Sequence[Observer] = (),
    memory: MemoryObserver | None = None,
    warmup: int = 0,
    repeat: int = 0,
    time_budget: float | None = None,
    keep_step: bool = False,
    contexts: Iterable[AbstractContextManager[Any]] = (),
    on_error: OnError | None = None,
    progress: Callable[[float, str], None] | None = None,
    op_times: bool | None = None,
) -> Trace:
    """Record ``step`` once, optionally time it, and leave everything as it was.

    Args:
        step: The user's step (:class:`Step`).
        mode: ``"full"`` (graph, FLOPs, memory) or ``"timing"`` (module hooks only).
        observers: More observers of the recording (e.g. a drift check).
        memory: In full mode, the :class:`~labkit.trace.recorder.MemoryObserver` to use
            (a ``labkit.memory.MemoryTracker``).
        warmup: Timing-only passes run first and not kept.
        repeat: Timing-only passes kept (0: the recording alone, untimed in full mode).
        time_budget: Stop repeating after this many seconds of timing (3 passes at least).
        keep_step: Keep one step's effects (parameters, ``.grad``, buffers, optimizer
            state, RNG as after one step); default: everything as before the call.
        contexts: Entered around the recording (a plan's fake-tensor mode).
        on_error: ``on_error(exception, recorder)`` when the recording fails; it may raise
            its own error (the partial recording is in ``recorder.trace``); if it
            returns, the exception is raised as it was. State is restored first.
        progress: ``progress(share, message)`` as the recording and each timing pass go
            (a :class:`labkit._progress.Progress`); ``None``: nothing is reported.
        op_times: Time op nodes in full mode: ``None`` up to
            ``labkit.trace._passes.OP_TIMES_MAX_CALLS`` module calls (a note above it),
            ``True`` always, ``False`` never.

    Returns:
        The :class:`Trace` of the step, with notes on what the step assumed and on what it
        changed that could not be put back.

    Example:
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.BatchNorm1d(2))
        >>> before = model[1].running_mean.clone()
        >>> t = record_step(Step(model, (torch.randn(8, 4),)), mode="timing", repeat=3)
        >>> t.meta.calls, torch.equal(model[1].running_mean, before)
        (1, True)
    """
    with young_gc_only():  # a full collection walks the whole process: none while recording
        return _record_step(
            step,
            mode,
            observers,
            memory,
            (warmup, repeat, time_budget, op_times),
            keep_step,
            contexts,
            on_error,
            progress,
        )


def _record_step(
    step: Step,
    mode: str,
    observers: Sequence[Observer],
    memory: MemoryObserver | None,
    passes_: tuple[int, int, float | None, bool | None],
    keep_step: bool,
    contexts: Iterable[AbstractContextManager[Any]],
    on_error: OnError | None,
    progress: Callable[[float, str], None] | None,
) -> Trace:
    warmup, repeat, time_budget, op_times = passes_
    state = step.state()
    foreign = ForeignState(step.model, state.restores)  # what it reaches outside the model
    effects = SideEffects(
        step.model, [("loss", step.loss), ("forward", step.forward)], state.restores
    )
    kept: StepState | None = None
    passes = _Passes(step, mode, warmup, repeat, progress)
    if progress is not None:
        observers = (*observers, passes.counter)
    try:
        rec = Recorder(step.model, mode=mode, observers=tuple(observers), memory=memory)
        try:
            with ExitStack() as stack, _deep_enough(step.model):
                for c in contexts:
                    stack.enter_context(c)
                with rec, foreign.watching():
                    step(rec.notes)
        except Exception as e:
            deep = e if isinstance(e, RecursionError) else e.__cause__
            if isinstance(deep, RecursionError) and _depth(step.model) > _DEEP:
                raise deep_error(step.model, deep) from None
            hint = dict_input_hint(step) if isinstance(e, TraceError) else ""
            if hint:  # the same error, saying how to pass a dict batch
                hinted = TraceError(f"{e}{hint}")
                hinted.__cause__ = e.__cause__
                e = hinted
            if on_error is not None:
                on_error(e, rec)
            if hint:
                raise e from e.__cause__
            raise
        base = rec.trace
        assert base is not None
        changed = state.changes()
        if keep_step:
            kept = step.state()
            foreign.keep()
        if repeat:
            if op_times is False or (op_times is None and too_many_for_op_times(base)):
                passes.op_passes = 0  # none run (time_step says why in the notes)
            with _deep_enough(step.model), passes.timing():
                base = time_step(
                    step.model,
                    step,
                    base,
                    mode=mode,
                    warmup=warmup,
                    repeat=repeat,
                    budget=time_budget,
                    op_times=op_times,
                )
    finally:
        foreign.restore()  # first: a foreign module holding the model's is put back after
        (kept or state).restore()
        if kept is None:  # a generator the code holds in a global or a closure, as it was
            effects.generators.restore()
    # after the snapshot is put back: what differs now stays with the user
    return _with_notes(base, step, changed, effects)


class _CallCounter(Observer):
    """Counts module calls of the recording, for its progress (a share of the modules), and
    says when the model's forward returned (backward and the optimizer step follow)."""

    def __init__(self, passes: _Passes) -> None:
        self.passes, self.calls, self.root = passes, 0, passes.step.model

    def call(
        self,
        node: object,
        module: torch.nn.Module,
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> None:
        self.calls += 1
        if self.calls % 64 == 0:
            self.passes.recording(self.calls)

    def ret(self, node: object, module: torch.nn.Module, output: object) -> None:
        if module is self.root:
            self.passes.forward_done(self.calls)


class _Passes:
    """The progress of :func:`record_step`: the recording (by module calls, against the
    number of modules), then the timing passes (by runs of the step).

    Timing runs per pass follow ``time_step``: on the host clock a hook-free and a hooked
    run each pass, then (``"full"`` mode) one op-timing run per kept pass; on CUDA one run
    a pass. A pass ended early by the time budget ends the count early too.
    """

    def __init__(
        self,
        step: Step,
        mode: str,
        warmup: int,
        repeat: int,
        report: Callable[[float, str], None] | None,
    ) -> None:
        self.step, self.report_to = step, report
        self.warmup, self.repeat = warmup, repeat
        self.modules = max(1, sum(1 for _ in step.model.modules())) if report else 1
        cuda = report is not None and any(p.is_cuda for p in parameters_of(step.model))
        self.per_pass = 1 if cuda else 2
        self.op_passes = repeat if mode == "full" and not cuda else 0
        self.recorded = 0.2 if repeat else 1.0  # the recording's share of the call
        self.counter = _CallCounter(self)
        self.first = 0  # the step's runs before the timing passes

    def report(self, share: float, message: str) -> None:
        if self.report_to is not None:
            self.report_to(share, message)

    def recording(self, calls: int) -> None:
        share = 0.5 * min(0.95, calls / self.modules)  # loops call a module more than once
        self.report(self.recorded * share, f"recording the forward ({calls:,} module calls)")

    def forward_done(self, calls: int) -> None:
        then = "backward and optimizer step" if self.step.backward else "the step's end"
        self.report(self.recorded * 0.5, f"recording the {then} ({calls:,} module calls)")

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        """Around ``time_step``: each run of the step reports its pass."""
        if self.report_to is None:
            yield
            return
        self.first = self.step.calls
        self.step.on_call = self.timed
        try:
            yield
        finally:
            self.step.on_call = None

    def timed(self, calls: int) -> None:
        n = calls - self.first  # the n-th run of the timing passes, from 1
        runs = self.per_pass * (self.warmup + self.repeat)
        total = runs + self.op_passes
        share = self.recorded + (1 - self.recorded) * min(1.0, (n - 1) / max(1, total))
        if n <= runs:
            k = (n - 1) // self.per_pass + 1
            if k <= self.warmup:
                what = f"warm-up pass {k} of {self.warmup}"
            else:
                what = f"timing pass {k - self.warmup} of {self.repeat}"
        else:
            what = f"op timing pass {min(n - runs, self.op_passes)} of {self.op_passes}"
        self.report(share, what)


def dict_input_hint(step: Step) -> str:
    """The sentence that says how to pass a dict batch when the model got it the wrong way:
    as its first argument while its keys are all the forward's parameters (a Hugging Face
    batch, meant as ``model(**batch)``), or as keywords the forward does not take (a forward
    that takes the dict itself). Empty otherwise."""
    if step.forward is not None:
        return ""
    try:
        params = inspect.signature(step.model.forward).parameters
    except (TypeError, ValueError):
        return ""
    named = {n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    name = f"{type(step.model).__name__}.forward"
    if not step.kwargs and len(step.args) == 1 and isinstance(step.args[0], Mapping):
        keys = [k for k in step.args[0] if isinstance(k, str)]
        if keys and len(keys) == len(step.args[0]) and set(keys) <= named:
            return (
                f"; the one input is a dict whose keys ({_few(keys)}) are parameters of {name}, "
                "so the model got the whole dict as its first argument: to call "
                "model(**batch), pass the batch as keywords (labkit.trace(model, **batch, ...)) "
                "or as model_kwargs=batch"
            )
    takes_keywords = any(p.kind is p.VAR_KEYWORD for p in params.values())
    if not step.args and step.kwargs and not takes_keywords and not set(step.kwargs) & named:
        return (
            f"; {name} takes none of the keywords it was given ({_few(list(step.kwargs))}): "
            "labkit.memory and labkit.plan pass a dict batch as keywords (model(**batch)); "
            "to give the model the dict itself, pass it inside a tuple: (batch,)"
        )
    return ""


def _few(names: list[str]) -> str:
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


def model_to_record(model: torch.nn.Module, what: str) -> tuple[torch.nn.Module, tuple[str, ...]]:
    """The module ``what`` (``"labkit.trace"``, ...) records, checked, and the notes its trace
    gets (``add_notes(trace, *notes)``).

    For a ``torch.compile``'d model that is the module inside it, with a note: module hooks
    inside a compiled graph see Dynamo's tracing, not the kernels that run, so labkit records
    the module the user compiled, eagerly, under the user's own paths (``blocks.0``, not
    ``_orig_mod.blocks.0``). Anything else is recorded as it is, without notes.
    """
    inner = getattr(model, "_orig_mod", None)
    if not isinstance(inner, torch.nn.Module) or type(model).__name__ != "OptimizedModule":
        check_model(model, what)
        return model, ()
    check_model(inner, what)
    return inner, (
        f"the model is torch.compile'd: labkit measured the {type(inner).__name__} inside it "
        "eagerly (the figures per layer are eager ones); compare(model, batch, "
        "[Recipe(compile='default')]) measures what compiling gains",
    )


def add_notes(trace: Trace, *notes: str) -> Trace:
    """``trace`` with ``notes`` added to its meta (and its memory meta, which memory
    reports and plans print)."""
    if not notes:
        return trace
    meta = dataclasses.replace(trace.meta, notes=(*trace.meta.notes, *notes))
    mm = trace.memory_meta
    if mm is not None:
        mm = dataclasses.replace(mm, notes=(*mm.notes, *notes))
    return trace.replace(meta=meta, memory_meta=mm)


def _with_notes(trace: Trace, step: Step, changed: list[str], effects: SideEffects) -> Trace:
    """The trace with notes on what the step assumed and on what could not be put back
    (in its meta, and in its memory meta, which memory reports and plans print):
    ``changed`` inside the model's attributes, and ``effects``' module globals and what
    the loss, the forward and the user's hooks close over."""
    more = []
    if step.backward and trace.meta.backward and step.forward is None:
        more.append(KEEP_OUTPUT_NOTE if step.keep_output else FREE_OUTPUT_NOTE)
    ran = f"the recording and timing passes ran the step {step.calls} " + (
        "time" if step.calls == 1 else "times"
    )
    if changed:
        more.append(
            "the step changed what labkit cannot put back: "
            + "; ".join(changed)
            + f" (in place; {ran})"
        )
    more += effects.notes(ran)
    fast = fast_path_modules(step.model)
    if fast:
        more.append(
            FAST_PATH_NOTE.format(modules=", ".join(fast[:3]) + (" ..." if len(fast) > 3 else ""))
        )
    return add_notes(trace, *more)


_FAST_PATH_TYPES = (torch.nn.MultiheadAttention, torch.nn.TransformerEncoderLayer)
FAST_PATH_NOTE = (
    "{modules}: PyTorch's inference fast path (fused attention kernels, nested tensors for "
    "padding masks), which your no-grad run of these eval-mode modules takes, is off while "
    "labkit records (its torch-function mode turns it off): the graph, FLOPs and memory are "
    "the standard path's, and passes that time without that mode may take the fast path"
)


def fast_path_modules(model: torch.nn.Module) -> list[str]:
    """Paths of ``nn.MultiheadAttention``/``nn.TransformerEncoderLayer`` modules that could
    take PyTorch's inference fast path now: in eval mode, with gradients off (or none of
    their parameters requiring grad)."""
    out = []
    for path, m in model.named_modules():
        if not isinstance(m, _FAST_PATH_TYPES) or m.training:
            continue
        if not torch.is_grad_enabled() or not any(p.requires_grad for p in m.parameters()):
            out.append(f"'{path}'" if path else "the root module")
    return out


class _deep_enough:
    """Raise the recursion limit for a deeply nested model (each module call takes a few
    Python frames of hooks and ``_call_impl``), and put it back afterwards."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.depth = _depth(model)
        self.old = sys.getrecursionlimit()

    def __enter__(self) -> None:
        need = _limit_for(self.depth)
        if need > self.old:
            sys.setrecursionlimit(need)

    def __exit__(self, *exc: object) -> None:
        sys.setrecursionlimit(self.old)


def _limit_for(depth: int) -> int:
    """The recursion limit a model nested ``depth`` deep is recorded under."""
    return max(sys.getrecursionlimit(), min(DEEP_LIMIT, 200 + 12 * depth))


def _depth(model: torch.nn.Module) -> int:
    """The deepest module path's length (dots + 1)."""
    deepest = 0
    for name, _ in model.named_modules():
        deepest = max(deepest, name.count(".") + 1 if name else 0)
    return deepest


def deep_error(model: torch.nn.Module, err: RecursionError) -> TraceError:
    """A clear error for a model nested deeper than labkit's recursion limit."""
    path = max((n for n, _ in model.named_modules()), key=lambda n: n.count("."), default="")
    short = path if len(path) <= 60 else f"{path[:24]}...{path[-24:]}"
    depth = _depth(model)
    return TraceError(
        f"{type(model).__name__} is nested {depth} modules deep (e.g. '{short}'): "
        f"recording it passed Python's recursion limit (raised to {_limit_for(depth)} for the "
        f"call; {err}): flatten the nesting (an nn.Sequential of the blocks instead of blocks "
        "inside blocks), or raise the limit yourself with sys.setrecursionlimit"
    )


def check_inputs(what: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise a TypeError naming an input that a step run more than once cannot reuse
    (a generator or another one-shot iterator)."""
    named = [(f"input {i}", a) for i, a in enumerate(args)]
    named += [(f"input {k!r}", v) for k, v in kwargs.items()]
    for name, value in named:
        if isinstance(value, Iterator) and not isinstance(value, torch.Tensor):
            raise TypeError(
                f"{what}: {name} is a {type(value).__name__} (a one-shot iterator): the step "
                "runs more than once and the first run would use it up; pass a list instead "
                "(list(...) of it)"
            )


def check_keywords(
    what: str,
    model: torch.nn.Module,
    given: dict[str, tuple[Any, Any]],
    model_kwargs: dict[str, Any] | None,
) -> None:
    """Raise a TypeError when one of ``what``'s own options was given a value and the model's
    forward takes an argument of that name: it would be labkit's, silently.

    Args:
        what: ``"labkit.trace"``...
        model: The model.
        given: ``{option: (value, default)}`` of labkit's options.
        model_kwargs: The model's keywords given apart; with it, every option is labkit's.
    """
    if model_kwargs is not None:
        return
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return
    for name, (value, default) in given.items():
        p = params.get(name)
        if p is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if value is not default and value != default:
            raise TypeError(
                f"{what} got {name}={value!r}, and {type(model).__name__}.forward takes "
                f"'{name}' too: labkit would take it as its own option. Pass the model's "
                f"keywords as model_kwargs={{{name!r}: {value!r}}}; with model_kwargs given, "
                f"{name}= is labkit's option"
            )
