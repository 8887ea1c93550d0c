"""CTC loss on fake tensors, its shapes from the lengths' known values.

``F.ctc_loss`` (speech models: Wav2Vec2ForCTC, DeepSpeech-style loops) runs
``aten._ctc_loss``, whose ``log_alpha`` output is ``batch x time x (2 * longest target +
1)``: a shape that depends on the values of ``target_lengths``, so ``FakeTensorMode``
refuses it (``DynamicOutputShapeException``) even when the lengths are plain lists. The
plan knows the values of integer tensors (the batch's, ``torch.full``...; see
:class:`~labkit.plan._values.IndexValues`), so it makes the outputs the CPU and CUDA
kernels make: ``neg_log_likelihood`` (batch,) and ``log_alpha`` in ``log_probs``' dtype,
and for backward a contiguous gradient of ``log_probs``' shape. Lengths whose values are
unknown (computed from floating-point data) still stop the plan, as before.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import unset_fake_temporarily

__all__ = ["CTC_OPS", "ctc_outputs"]

_aten = torch.ops.aten
_FORWARD = (_aten._ctc_loss.default, _aten._ctc_loss.Tensor)
_BACKWARD = (_aten._ctc_loss_backward.default, _aten._ctc_loss_backward.Tensor)
CTC_OPS = frozenset((*_FORWARD, *_BACKWARD))


def _longest(lengths: object, value: Callable[[object], torch.Tensor | None]) -> int | None:
    """The largest of ``lengths`` (a list of ints or an integer tensor with a known value)."""
    if isinstance(lengths, (list, tuple)):
        return max((int(n) for n in lengths), default=0)
    if isinstance(lengths, torch.Tensor):
        real = value(lengths)
        if real is not None:
            with unset_fake_temporarily():  # a real tensor's values, read outside the mode
                return int(real.max().item()) if real.numel() else 0
    return None


def ctc_outputs(
    func: OpOverload,
    args: tuple[object, ...],
    kwargs: dict[str, object],
    value: Callable[[object], torch.Tensor | None],
) -> object:
    """The fake outputs of a CTC op, or ``None`` where the lengths' values are unknown.

    Args:
        func: One of :data:`CTC_OPS`.
        args: Its arguments (fake tensors, ints, lists).
        kwargs: Its keyword arguments.
        value: The known real value of an integer tensor, or ``None``.
    """
    names = [a.name for a in func._schema.arguments]
    given = {**dict(zip(names, args, strict=False)), **kwargs}
    log_probs = given["log_probs"]
    assert isinstance(log_probs, torch.Tensor)
    with torch._C.DisableTorchFunction():  # made here, not a call of the user's step
        if func in _BACKWARD:
            return torch.empty(log_probs.shape, dtype=log_probs.dtype, device=log_probs.device)
        longest = _longest(given["target_lengths"], value)
        if longest is None:
            return None
        time, batch = log_probs.shape[0], log_probs.shape[1]
        dtype, device = log_probs.dtype, log_probs.device
        return (
            torch.empty(batch, dtype=dtype, device=device),
            torch.empty(batch, time, 2 * longest + 1, dtype=dtype, device=device),
        )
