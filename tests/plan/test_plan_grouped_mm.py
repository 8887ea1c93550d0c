"""``aten._grouped_mm`` (transformers 5's mixture-of-experts layers) made on fake CPU tensors.

The meta kernel refuses float32 (it applies the CUDA kernel's bfloat16 check); the CPU
kernel runs it. :func:`labkit.plan._grouped_mm.grouped_mm_outputs` must give what the real
kernel returns (shape, dtype, strides, storage bytes) for the forward's product and for
the two products autograd runs in backward (the input's and the weights' gradients).
"""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from labkit.plan._grouped_mm import GROUPED_MM_OPS, grouped_mm_outputs

_OP = torch.ops.aten._grouped_mm.default
_OFFS = torch.tensor([3, 8, 8, 16], dtype=torch.int32)  # expert 2 gets no token


def _products() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    x, w = torch.randn(16, 16), torch.randn(4, 16, 32)
    g = torch.randn(16, 32)
    return {
        "forward": (x, w),
        "forward-transposed-weights": (x, torch.randn(4, 32, 16).transpose(-2, -1)),
        "input-grad": (g, w.transpose(-2, -1)),
        "weight-grad": (x.t(), g),  # 2D x 2D with offs: one (16, 32) product per expert
    }


@pytest.mark.parametrize("name", sorted(_products()))
def test_the_fake_output_is_what_the_cpu_kernel_returns(name: str) -> None:
    a, b = _products()[name]
    real = _OP(a, b, _OFFS)
    with FakeTensorMode() as mode:
        fa, fb, fo = mode.from_tensor(a), mode.from_tensor(b), mode.from_tensor(_OFFS)
        with pytest.raises(RuntimeError, match="BF16"):
            _OP(fa, fb, fo)  # what the plan met before
        made = grouped_mm_outputs(_OP, (fa, fb, fo), {})
    assert made is not None and _OP in GROUPED_MM_OPS
    assert (made.shape, made.dtype, made.stride()) == (real.shape, real.dtype, real.stride())
    assert made.untyped_storage().nbytes() == real.untyped_storage().nbytes()


def test_bfloat16_is_left_to_the_fake_kernel() -> None:
    a, b = torch.randn(16, 16).bfloat16(), torch.randn(4, 16, 32).bfloat16()
    with FakeTensorMode() as mode:
        fa, fb, fo = mode.from_tensor(a), mode.from_tensor(b), mode.from_tensor(_OFFS)
        assert grouped_mm_outputs(_OP, (fa, fb, fo), {}) is None
        assert _OP(fa, fb, fo).shape == (16, 32)
