"""FLOPs torch's counter has no formula for: CPU attention counted by torch's SDPA formula,
and ops that compute without any formula listed with their share of measured time."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import labkit
from labkit.trace._dispatch import EXTRA_FLOP_FORMULAS

B, H, L, E = 2, 4, 32, 16  # large enough for CPU flash attention, not the math path


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(H * E, 3 * H * E)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(B, L, 3, H, E).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def _counted(fn) -> tuple[int, int]:
    """(forward, backward) FLOPs FlopCounterMode counts for ``fn()``'s output."""
    with FlopCounterMode(display=False) as fc:
        out = fn()
    fwd = fc.get_total_flops()
    with FlopCounterMode(display=False) as fc:
        out.sum().backward()
    return fwd, fc.get_total_flops()


def test_cpu_attention_counts_as_its_matmuls() -> None:
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, L, E, requires_grad=True) for _ in range(3))
    # the kernel torch picks here has no formula in torch: FlopCounterMode counts nothing
    assert _counted(lambda: F.scaled_dot_product_attention(q, k, v)) == (0, 0)
    # the same attention written as matmuls, which FlopCounterMode does count
    math_fwd, math_bwd = _counted(
        lambda: ((q @ k.transpose(-2, -1)) / math.sqrt(E)).softmax(-1) @ v
    )
    scores = 2 * B * H * L * L * E  # one QK^T matmul

    class Sdpa(nn.Module):
        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v)

    t = labkit.trace(Sdpa(), q, k, v, repeat=0)
    root = t.calls_of("")[0]
    assert root.flops_fwd == math_fwd
    # backward: the gradients' matmuls, plus the scores recomputed (flash attention keeps
    # no attention matrix), as torch's SDPA backward formula counts for its CUDA kernels
    assert root.flops_bwd == math_bwd + scores
    assert t.meta.no_flop_formula == ()


def test_flops_equal_flop_counter_with_labkits_formulas() -> None:
    torch.manual_seed(0)
    model, x = Attention(), torch.randn(B, L, H * E)
    with FlopCounterMode(display=False, custom_mapping=EXTRA_FLOP_FORMULAS) as fc:
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    t = labkit.trace(model, x, repeat=0)
    assert t.total_flops == fc.get_total_flops()
    op = next(n for n in t.nodes if n.kind == "op" and "scaled_dot_product" in n.name)
    assert op.flops_fwd == 2 * (2 * B * H * L * L * E)


@torch.library.custom_op("labkit_test::mm", mutates_args=())
def _mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b


@_mm.register_fake
def _(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.new_empty(a.shape[0], b.shape[1])


def _mm_setup(ctx, inputs, output) -> None:
    ctx.save_for_backward(*inputs)


def _mm_backward(ctx, grad):
    a, b = ctx.saved_tensors
    return grad @ b.t(), a.t() @ grad


_mm.register_autograd(_mm_backward, setup_context=_mm_setup)


class CustomKernel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(32, 32))
        self.inner = nn.Linear(32, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(_mm(x, self.w))


def test_ops_without_a_formula_are_listed_with_their_share() -> None:
    torch.manual_seed(0)
    t = labkit.trace(CustomKernel(), torch.randn(64, 32), repeat=3)
    (rec,) = t.meta.no_flop_formula
    assert rec["op"] == "labkit_test.mm" and rec["calls"] == 1 and rec["module"] == ""
    op = next(n for n in t.nodes if n.kind == "op" and n.name.startswith("mm"))
    assert rec["nodes"] == [op.key] and op.flops_fwd == 0
    step = t.meta.forward_time + t.meta.backward_time
    assert rec["time"] == pytest.approx(op.fwd_time + op.bwd_time)
    assert rec["share"] == pytest.approx(min(1.0, rec["time"] / step))
    assert 0 < rec["share"] <= 1
    said = t.summary()
    assert "FLOPs not counted (no formula): labkit_test.mm x1 (" in said
    # advise no longer calls the GEMMs' share of the counted FLOPs a share of all FLOPs
    advice = labkit.advise(t, inference=True)
    assert any("labkit_test.mm" in n for n in advice.notes)
    assert not any("of FLOPs" in s.title for s in advice.suggestions)
    assert any("of counted FLOPs" in s.title for s in advice.suggestions)


def test_elementwise_ops_need_no_caveat() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.LayerNorm(8), nn.GELU(), nn.Dropout(0.1))
    t = labkit.trace(model, torch.randn(4, 8), repeat=0)
    assert t.meta.no_flop_formula == ()
    assert "FLOPs not counted" not in t.summary()
