"""Where a real kernel's output holds more memory than its fake kernel says.

A fake tensor gets the storage its shape needs. A few CPU kernels return a result that
keeps a larger storage alive: ``mse_loss`` and ``smooth_l1_loss`` with a ``mean`` or
``sum`` reduction compute the element-wise loss into a buffer of the inputs' size and
return the 0-dim result as a view of it (seen with torch 2.13: ``F.mse_loss`` of two
8 x 4 float tensors keeps 128 bytes, not 4). The loss stays alive through backward, so
a plan that gave it 4 bytes was that buffer under the measured peak. :func:`real_layout`
gives such an output the storage the real kernel keeps.
"""

from __future__ import annotations

import torch
from torch._ops import OpOverload

_aten = torch.ops.aten
# op -> the index of its ``reduction`` argument (0: none, 1: mean, 2: sum)
_FULL_BUFFER_SCALARS: dict[OpOverload, int] = {
    _aten.mse_loss.default: 2,
    _aten.smooth_l1_loss.default: 2,
}


def keeps_a_buffer(func: OpOverload) -> bool:
    """Whether ``func`` is one whose real CPU result may keep a larger storage."""
    return func in _FULL_BUFFER_SCALARS


def real_layout(
    func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object], out: object
) -> object:
    """``out`` (a fake result of ``func``), or where the real CPU kernel returns a view of
    its element-wise buffer, the same 0-dim value as a view of a fake buffer that size."""
    at = _FULL_BUFFER_SCALARS[func]
    reduction = args[at] if len(args) > at else kwargs.get("reduction", 1)
    x = args[0] if args else None
    if (
        reduction == 0
        or not isinstance(out, torch.Tensor)
        or out.dim() != 0
        or not isinstance(x, torch.Tensor)
        or out.device.type != "cpu"
    ):
        return out
    with torch._C.DisableTorchFunction():  # made here, not a call of the user's step
        buffer = torch.empty(x.numel(), dtype=out.dtype, device=out.device)
        return buffer.as_strided((), (), 0)
