"""``labkit.trace``: record one step of a model, or hand back a Recorder for a ``with`` block."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from labkit._tensors import named_tensors
from labkit.trace._graph import bind as _bind
from labkit.trace._passes import record_step
from labkit.trace.errors import scalar_loss
from labkit.trace.recorder import MODES, Recorder, check_model


def trace(
    model: torch.nn.Module,
    *args: Any,
    loss: Callable[[Any], torch.Tensor] | None = None,
    backward: bool = True,
    mode: str = "full",
    warmup: int = 1,
    repeat: int = 5,
    time_budget: float | None = 10.0,
    **kwargs: Any,
) -> Any:
    """Record what ``model`` does on the given inputs, or return a Recorder.

    With inputs, records one forward pass (and a backward pass when gradients are
    enabled) for the graph, FLOPs and memory, then times the same step with timing-only
    passes (module hooks alone, labkit's hook cost subtracted; CUDA events on a GPU):
    ``warmup`` passes thrown away, then ``repeat`` kept; each time shown is the median
    over them, with its interquartile range (``Node.fwd_iqr``). Afterwards the model is
    restored exactly: parameter ``.grad``s, buffers (e.g. BatchNorm running statistics),
    ``training`` flags and the random number generators' state are as after one step.

    Without inputs, returns a :class:`Recorder` to use as a context manager around
    your own code (several calls, a full training step with an optimizer); the
    result is then in ``recorder.trace``.

    Args:
        model: The module to record.
        *args: Positional inputs of ``model``.
        loss: ``loss(output) -> scalar tensor`` for the backward pass. Without it the
            backward pass runs on the sum of the floating-point outputs.
        backward: Record a backward pass too.
        mode: ``"full"`` (graph of ops, FLOPs, memory) or ``"timing"`` (module hooks only).
        warmup: Timing passes run first and not kept (first-call costs, caches).
        repeat: Timing passes kept; 0 records no times.
        time_budget: Stop repeating after this many seconds of timing (3 passes at least);
            ``None``: always ``repeat``.
        **kwargs: Keyword inputs of ``model``.

    Returns:
        A :class:`Trace` when inputs were given, else a :class:`Recorder`.

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
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> with labkit.trace(model) as rec:
        ...     opt.zero_grad(); model(x).sum().backward(); opt.step()
        >>> print(rec.trace.summary(depth=2))  # doctest: +SKIP
    """
    check_model(model)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if not args and not kwargs:
        return Recorder(model, mode=mode)
    check_devices(model, args, kwargs)
    saved = _ModelState(model)

    def step(notes: list[str]) -> None:
        out = model(*args, **kwargs)
        if backward:
            target = _backward_target(out, loss, notes)
            if target is not None:
                target.backward()

    try:
        return record_step(model, step, mode=mode, warmup=warmup, repeat=repeat,
                           budget=time_budget)  # fmt: skip
    finally:
        saved.restore()


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


def _backward_target(out: Any, loss: Any, notes: list[str]) -> torch.Tensor | None:
    if not torch.is_grad_enabled():
        notes.append("no backward pass: gradients are disabled (no_grad or inference_mode)")
        return None
    if loss is not None:
        value = scalar_loss(loss(out))
        if not value.requires_grad:
            notes.append("no backward pass: the loss does not require grad")
            return None
        return value
    tensors = [t for _, t in named_tensors(out) if t.requires_grad and t.is_floating_point()]
    if not tensors:
        notes.append("no backward pass: no output requires grad")
        return None
    if len(tensors) == 1 and tensors[0].numel() == 1:
        return tensors[0]
    notes.append("backward of the sum of the outputs (no loss given)")
    return torch.stack([t.sum() for t in tensors]).sum()


class _ModelState:
    """What a one-shot trace may change, saved so it can be put back."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.training = [(m, m.training) for m in model.modules()]
        self.grads = [(p, p.grad) for p in model.parameters()]
        self.buffers = [(b, b.detach().clone()) for b in model.buffers()]

    def restore(self) -> None:
        for m, flag in self.training:
            m.training = flag
        for p, g in self.grads:
            p.grad = g
        with torch.no_grad():
            for b, v in self.buffers:
                if b.shape == v.shape:
                    b.copy_(v)
