"""``aten._grouped_mm`` on fake CPU tensors of a dtype its meta kernel refuses.

Mixture-of-experts layers in transformers 5 (``MixtralForCausalLM``,
``Qwen2MoeForCausalLM``; the default ``experts_implementation``) run all experts in one
``torch.nn.functional.grouped_mm`` call (``aten._grouped_mm``), forward and backward. Its
CPU kernel runs float32 (torch 2.13), but its meta kernel applies the CUDA kernel's checks
and refuses every dtype but bfloat16 ("Expected inputs of BF16 type"). So a plan of such a
model stopped with a PlanError at ``mlp.experts`` while ``labkit.memory`` measured it. The
output's shape does not depend on ``offs``' values (the routing): the meta kernel computes
it from bfloat16 stand-ins of the same shapes and strides, and :func:`grouped_mm_outputs`
makes it contiguous in the inputs' dtype, as the CPU kernel does (seen: (16, 32) float32,
strides (32, 1), 2,048 B, for a (16, 16) by (4, 16, 32) product).
"""

from __future__ import annotations

import torch
from torch._ops import OpOverload
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils._python_dispatch import _disable_current_modes

__all__ = ["GROUPED_MM_OPS", "grouped_mm_outputs"]

_aten = torch.ops.aten
GROUPED_MM_OPS = frozenset((_aten._grouped_mm.default,))


def _stand_in(t: object) -> object:
    """A meta bfloat16 tensor of ``t``'s shape and strides (``t`` a float tensor)."""
    if isinstance(t, torch.Tensor) and t.is_floating_point():
        return torch.empty_strided(t.shape, t.stride(), dtype=torch.bfloat16, device="meta")
    if isinstance(t, torch.Tensor):
        return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    return t


def grouped_mm_outputs(
    func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]
) -> torch.Tensor | None:
    """The fake output of ``aten._grouped_mm`` on CPU inputs of a dtype other than
    bfloat16, or ``None`` where the fake kernel already runs it (bfloat16, not CPU)."""
    names = [a.name for a in func._schema.arguments]
    given = {**dict(zip(names, args, strict=False)), **kwargs}
    a, b = given.get("self"), given.get("mat2")
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    if a.device.type != "cpu" or (a.dtype == torch.bfloat16 and b.dtype == torch.bfloat16):
        return None
    out_dtype = given.get("out_dtype")
    dtype = out_dtype if isinstance(out_dtype, torch.dtype) else a.dtype
    with unset_fake_temporarily(), _disable_current_modes(), torch._C.DisableTorchFunction():
        meta_args = {k: _stand_in(v) for k, v in given.items() if k != "out_dtype"}
        shape = func(**meta_args).shape  # the meta kernel's shape checks, on stand-ins
    with torch._C.DisableTorchFunction():  # made here, not a call of the user's step
        return torch.empty(shape, dtype=dtype, device=a.device)
