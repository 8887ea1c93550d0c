"""``labkit.trace``: record one step of a model, or hand back a Recorder for a ``with`` block."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

import torch

from labkit._progress import ProgressOption
from labkit.trace.entry import StepOptions as _D
from labkit.trace.entry import check_devices as check_devices
from labkit.trace.entry import check_not_meta as check_not_meta
from labkit.trace.entry import front_door
from labkit.trace.model import Trace
from labkit.trace.recorder import MODES, Recorder
from labkit.trace.step import Step, record_step


# What a type checker sees: a Recorder without inputs (the ``with`` form), a Trace with a
# positional input (``trace(model, *inputs)`` counts as one) or keyword inputs only
# (``model_kwargs=``, ``x=...``).
@overload
def trace(
    model: torch.nn.Module,
    *,
    loss: Callable[[Any], torch.Tensor] | None = ...,
    backward: bool = ...,
    mode: str = ...,
    warmup: int = ...,
    repeat: int = ...,
    time_budget: float | None = ...,
    op_times: bool | None = ...,
    keep_step: bool = ...,
    keep_output: bool = ...,
    model_kwargs: None = ...,
    progress: ProgressOption = ...,
) -> Recorder: ...
@overload
def trace(
    model: torch.nn.Module,
    input_0: object,
    *args: object,
    loss: Callable[[Any], torch.Tensor] | None = ...,
    backward: bool = ...,
    mode: str = ...,
    warmup: int = ...,
    repeat: int = ...,
    time_budget: float | None = ...,
    op_times: bool | None = ...,
    keep_step: bool = ...,
    keep_output: bool = ...,
    model_kwargs: dict[str, Any] | None = ...,
    progress: ProgressOption = ...,
    **kwargs: object,
) -> Trace: ...
@overload
def trace(
    model: torch.nn.Module,
    *,
    loss: Callable[[Any], torch.Tensor] | None = ...,
    backward: bool = ...,
    mode: str = ...,
    warmup: int = ...,
    repeat: int = ...,
    time_budget: float | None = ...,
    op_times: bool | None = ...,
    keep_step: bool = ...,
    keep_output: bool = ...,
    model_kwargs: dict[str, Any] | None = ...,
    progress: ProgressOption = ...,
    **kwargs: object,
) -> Trace: ...


def trace(
    model: torch.nn.Module,
    *args: object,
    loss: Callable[[Any], torch.Tensor] | None = _D.loss,
    backward: bool = _D.backward,
    mode: str = _D.mode,
    warmup: int = _D.warmup,
    repeat: int = _D.repeat,
    time_budget: float | None = _D.time_budget,
    op_times: bool | None = _D.op_times,
    keep_step: bool = _D.keep_step,
    keep_output: bool = _D.keep_output,
    model_kwargs: dict[str, Any] | None = None,
    progress: ProgressOption = _D.progress,
    **kwargs: object,
) -> Trace | Recorder:
    """Record what ``model`` does on the given inputs, or return a Recorder.

    With inputs, records one forward pass (and a backward pass when gradients are
    enabled) for the graph, FLOPs and memory, then times the same step with timing-only
    passes (module hooks alone, labkit's hook cost subtracted; CUDA events on a GPU):
    ``warmup`` passes thrown away, then ``repeat`` kept; each time shown is the median
    over them, with its interquartile range (``Node.fwd_iqr``). Afterwards everything the
    step touched is as it was before the call: parameters' values, ``.grad`` and
    ``requires_grad``, buffers (BatchNorm running statistics, a buffer the forward
    reassigns), the inputs' values and ``.grad``, plain attributes of the modules,
    ``training`` flags (a teacher the loss sets to eval too) and the random number
    generators, on success, on error and on KeyboardInterrupt (``keep_step=True`` keeps
    one step's effects instead). What the step changed that cannot be put back (a list
    inside a module attribute appended to; a global of the module the forward or the loss
    is written in, such as ``GLOBAL["calls"] += 1``) is named in the notes with how many
    times the passes ran it. A model or input on the ``meta`` device is refused: use
    :func:`labkit.plan`, which takes meta.

    Without inputs, returns a :class:`Recorder` to use as a context manager around
    your own code (several calls, a full training step with an optimizer); the
    result is then in ``recorder.trace``.

    Args:
        model: The module to record.
        *args: Positional inputs of ``model`` (a list, not a generator: the step runs
            several times).
        loss: ``loss(output) -> scalar tensor`` for the backward pass. Without it the
            backward pass runs on the sum of the floating-point outputs' means
            (``labkit.trace.step.default_loss``, the loss ``compare`` trains too).
        backward: Record a backward pass too.
        mode: ``"full"`` (graph of ops, FLOPs, memory) or ``"timing"`` (module hooks only).
        warmup: Timing passes run first and not kept (first-call costs, caches).
        repeat: Timing passes kept; 0 records no times.
        time_budget: Stop repeating after this many seconds of timing (3 passes at least);
            ``None``: always ``repeat``.
        op_times: Time each op node too (an op-timed pass per repeat, CPU only): ``None``
            (default) up to 20,000 module calls (``labkit.trace._passes.OP_TIMES_MAX_CALLS``;
            above it the op nodes are left untimed and a note says so), ``True`` always,
            ``False`` never.
        keep_step: Leave the model, inputs and RNG as after one step instead of as before.
        keep_output: Keep the output alive through backward, as a loop holding
            ``out = model(x)`` does (``False``: a loop that frees it first).
        model_kwargs: Keyword inputs of ``model`` given apart; use it when the model takes
            a keyword named like one of these options (``mode``, ``loss``...). With it,
            every keyword above is labkit's.
        progress: Show progress (a bar in a notebook; on a terminal one line on stderr
            after 2 s, naming the pass: ``labkit.trace: timing pass 3 of 5 [64%]``);
            ``False``: nothing; a function ``(share, message)`` receives it instead.
        **kwargs: Keyword inputs of ``model``.

    Returns:
        A :class:`Trace` when inputs were given, else a :class:`Recorder`.

    Raises:
        TypeError: A keyword is both one of these options and an argument of the model's
            forward (pass ``model_kwargs=``), or an input is a generator.
        ValueError: The model or an input is on the ``meta`` device, or an input on
            another device than the model's parameters.

    Example:
        >>> import torch, labkit
        >>> import torch.nn.functional as F
        >>> from torch import nn
        >>> model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        >>> x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
        >>> t = labkit.trace(model, x, loss=lambda out: F.cross_entropy(out, y))
        >>> [r["path"] for r in t.rows()]
        ['', '0', '1', '2']
        >>> t.rows()[0]["flops_fwd"]  # 2 * 32 * (8 * 16 + 16 * 4)
        12288
        >>> model[0].weight.grad is None  # as before the call
        True
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> with labkit.trace(model) as rec:
        ...     opt.zero_grad(); model(x).sum().backward(); opt.step()
        >>> print(rec.trace.summary(depth=2))  # doctest: +SKIP
    """
    given = {
        "loss": loss,
        "backward": backward,
        "mode": mode,
        "warmup": warmup,
        "repeat": repeat,
        "time_budget": time_budget,
        "op_times": op_times,
        "keep_step": keep_step,
        "keep_output": keep_output,
        "progress": progress,
    }
    door = front_door(
        "labkit.trace", model, given, args=args, kwargs=kwargs, model_kwargs=model_kwargs
    )
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if op_times is not None and not isinstance(op_times, bool):
        raise TypeError(f"op_times must be True, False or None, got {op_times!r}")
    if not door.has_inputs:
        return Recorder(door.model, mode=mode)
    step = Step(
        door.model, door.args, door.kwargs, loss=loss, backward=backward, keep_output=keep_output
    )
    with door.progress as bar:
        bar(0.0, "recording the step")
        trace = record_step(
            step,
            mode=mode,
            warmup=warmup,
            repeat=repeat,
            time_budget=time_budget,
            op_times=op_times,
            keep_step=keep_step,
            progress=None if bar.quiet else bar,
        )
    return door.finish(trace)
