"""``labkit.trace``: record one step of a model, or hand back a Recorder for a ``with`` block."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from labkit._tensors import named_tensors
from labkit.trace._graph_observer import bind as _bind
from labkit.trace.recorder import MODES, Recorder
from labkit.trace.step import (
    Step,
    add_notes,
    check_inputs,
    check_keywords,
    model_to_record,
    record_step,
)


def trace(
    model: torch.nn.Module,
    *args: object,
    loss: Callable[[Any], torch.Tensor] | None = None,
    backward: bool = True,
    mode: str = "full",
    warmup: int = 1,
    repeat: int = 5,
    time_budget: float | None = 10.0,
    keep_step: bool = False,
    keep_output: bool = True,
    model_kwargs: dict[str, Any] | None = None,
    **kwargs: object,
) -> Any:  # Trace | Recorder: Any, so callers with inputs need not narrow it
    """Record what ``model`` does on the given inputs, or return a Recorder.

    With inputs, records one forward pass (and a backward pass when gradients are
    enabled) for the graph, FLOPs and memory, then times the same step with timing-only
    passes (module hooks alone, labkit's hook cost subtracted; CUDA events on a GPU):
    ``warmup`` passes thrown away, then ``repeat`` kept; each time shown is the median
    over them, with its interquartile range (``Node.fwd_iqr``). Afterwards everything the
    step touched is as it was before the call: parameters' values and ``.grad``, buffers
    (BatchNorm running statistics, a buffer the forward reassigns), the inputs' values and
    ``.grad``, plain attributes of the modules, ``training`` flags and the random number
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
            backward pass runs on the sum of the floating-point outputs.
        backward: Record a backward pass too.
        mode: ``"full"`` (graph of ops, FLOPs, memory) or ``"timing"`` (module hooks only).
        warmup: Timing passes run first and not kept (first-call costs, caches).
        repeat: Timing passes kept; 0 records no times.
        time_budget: Stop repeating after this many seconds of timing (3 passes at least);
            ``None``: always ``repeat``.
        keep_step: Leave the model, inputs and RNG as after one step instead of as before.
        keep_output: Keep the output alive through backward, as a loop holding
            ``out = model(x)`` does (``False``: a loop that frees it first).
        model_kwargs: Keyword inputs of ``model`` given apart; use it when the model takes
            a keyword named like one of these options (``mode``, ``loss``...). With it,
            every keyword above is labkit's.
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
    model, model_notes = model_to_record(model, "labkit.trace")
    check_keywords("labkit.trace", model, {"mode": (mode, "full"), "loss": (loss, None),
                   "backward": (backward, True),
                   "warmup": (warmup, 1), "repeat": (repeat, 5),
                   "time_budget": (time_budget, 10.0), "keep_step": (keep_step, False),
                   "keep_output": (keep_output, True)}, model_kwargs)  # fmt: skip
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if model_kwargs is not None:
        kwargs = {**kwargs, **model_kwargs}
    if not args and not kwargs:
        return Recorder(model, mode=mode)
    check_inputs("labkit.trace", args, kwargs)
    check_not_meta("labkit.trace", model, args, kwargs)
    check_devices(model, args, kwargs)
    step = Step(model, args, kwargs, loss=loss, backward=backward, keep_output=keep_output)
    trace = record_step(step, mode=mode, warmup=warmup, repeat=repeat,
                        time_budget=time_budget, keep_step=keep_step)  # fmt: skip
    return add_notes(trace, *model_notes)


# how labkit.plan is called for what each entry point was given (the meta error shows it)
_PLAN_CALL = {
    "labkit.trace": "labkit.plan(model, x) (memory, FLOPs and the graph of the step; no times)",
    "labkit.memory": "labkit.plan(model, batch, loss=..., optimizer=...) (the same memory "
    "categories, predicted on fake tensors)",
    "compare": "labkit.plan(model, batch, recipe=Recipe(...)) (what a recipe does to memory "
    "and FLOPs, one recipe a call; no times)",
}


def check_not_meta(what: str, model: torch.nn.Module, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> None:  # fmt: skip
    """Raise a ValueError when the model's parameters or buffers, or an input, are on the
    ``meta`` device: they hold no values, so nothing can be measured (a meta tensor's ops
    return at once, and the figures would be labkit's own). ``labkit.plan`` takes meta.

    Args:
        what: The entry point, ``"labkit.trace"``, ``"labkit.memory"`` or ``"compare"``.
        model: The model.
        args: Its positional inputs.
        kwargs: Its keyword inputs.
    """
    plan = _PLAN_CALL.get(what, "labkit.plan(model, batch)")
    materialize = (
        "or make it real first (model.to_empty(device='cpu'), then load its weights with "
        "model.load_state_dict(...))"
    )
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, t in named:
            if t.device.type == "meta":
                raise ValueError(
                    f"{what} measures a real run, but {type(model).__name__} is on the meta "
                    f"device ({kind} '{name}' holds a shape, no values): nothing on meta can "
                    f"be timed or measured. Use {plan}, which takes a meta model; "
                    f"{materialize}"
                )
    for name, value in _bind(model, args, kwargs):
        for tname, t in named_tensors(value, name):
            if t.device.type == "meta":
                raise ValueError(
                    f"{what} measures a real run, but input {tname!r} is on the meta device "
                    f"(a shape, no values): nothing on meta can be timed or measured. Pass a "
                    f"real {str(t.dtype).removeprefix('torch.')} tensor of shape "
                    f"{tuple(t.shape)} (a batch from your data), or use {plan}, which takes "
                    "meta inputs"
                )


def check_devices(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise a ValueError naming the input whose device differs from the model's parameters."""
    devices = {p.device for p in model.parameters()}
    if not devices:
        return
    for name, value in _bind(model, args, kwargs):
        for tname, t in named_tensors(value, name):
            if t.is_floating_point() and t.device not in devices and t.device.type != "meta":
                where = ", ".join(sorted(str(d) for d in devices))
                raise ValueError(
                    f"input {tname!r} is on {t.device}, but the parameters of "
                    f"{type(model).__name__} are on {where}: move the input with "
                    f"{tname}.to('{where}') or the model with model.to('{t.device}')"
                )
