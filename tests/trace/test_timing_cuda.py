"""On a GPU: per-module times are GPU times, checked against torch.profiler's kernel times.

Skipped without a CUDA device (CI has none). The reference wraps each block's forward in
a ``record_function`` range; the profiler sums the kernels launched inside each range.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


class TinyGPT(nn.Module):
    """GPT-2-like: token and position embeddings, pre-norm encoder blocks, a tied-free head."""

    def __init__(self, vocab: int = 8192, d: int = 768, layers: int = 6, ctx: int = 512) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(ctx, d)
        block = nn.TransformerEncoderLayer(
            d, 12, 4 * d, dropout=0.0, batch_first=True, norm_first=True, activation="gelu"
        )
        self.h = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1], device=idx.device)
        return self.lm_head(self.ln_f(self.h(self.wte(idx) + self.wpe(pos))))


def _profiled_forward_ms(model: TinyGPT, idx: torch.Tensor, paths: list[str], amp) -> dict:
    """Kernel time per module (ms) of one forward, from torch.profiler."""
    from torch.profiler import ProfilerActivity, profile, record_function

    ranges: dict[int, contextlib.AbstractContextManager] = {}
    mods = dict(model.named_modules())
    handles = []
    for p in paths:
        m = mods[p]
        handles.append(
            m.register_forward_pre_hook(
                lambda mod, args, p=p: (
                    ranges.__setitem__(id(mod), record_function(f"lk:{p}"))
                    or ranges[id(mod)].__enter__()
                )
            )
        )
        handles.append(
            m.register_forward_hook(
                lambda mod, args, out: ranges.pop(id(mod)).__exit__(None, None, None)
            )
        )
    try:
        with amp():
            model(idx)  # warm-up
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof, amp():
            model(idx)
            torch.cuda.synchronize()
    finally:
        for h in handles:
            h.remove()
    out = dict.fromkeys(paths, 0.0)
    for e in prof.events():
        if e.name.startswith("lk:"):
            out[e.name[3:]] += e.device_time_total / 1e3
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_module_gpu_times_match_profiler_kernel_times(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = TinyGPT().cuda()
    idx = torch.randint(0, 8192, (8, 512), device="cuda")

    def amp():
        if dtype is torch.float32:
            return contextlib.nullcontext()
        return torch.autocast("cuda", dtype=dtype)

    with amp():
        t = labkit.trace(
            model,
            idx,
            loss=lambda out: F.cross_entropy(out.flatten(0, 1).float(), idx.flatten()),
            repeat=5,
        )
    assert "CUDA events" in t.meta.timing
    paths = [f"h.layers.{i}" for i in range(6)] + ["lm_head"]
    ref = _profiled_forward_ms(model, idx, paths, amp)
    for p in paths:
        ours = t.calls_of(p)[0].fwd_time * 1e3
        assert ours == pytest.approx(ref[p], rel=0.10), (p, ours, ref[p])
    # backward times are GPU times: no module runs faster than the GPU can (H200 dense
    # peaks: ~67 TFLOP/s fp32, ~990 TFLOP/s bf16; 10% headroom)
    peak = 1.1 * (67e12 if dtype is torch.float32 else 990e12)
    for n in t.nodes:
        if n.kind == "module" and n.bwd_self_time > 0 and n.flops_bwd > 1e9:
            assert n.flops_bwd / n.bwd_self_time < peak, (n.key, n.flops_bwd, n.bwd_self_time)
        if n.kind == "module" and n.fwd_time > 0 and n.flops_fwd > 1e9:
            assert n.flops_fwd / n.fwd_time < peak, (n.key, n.flops_fwd, n.fwd_time)
