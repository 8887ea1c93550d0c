"""CUDA: the plan against the caching allocator's peak, and the batch search verified
(run with ``pytest -m cuda``; skipped without a GPU)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import labkit
from labkit.plan import max_batch_size
from labkit.plan.batch import resize
from tests.plan.models import GPT

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _loss(out: torch.Tensor) -> torch.Tensor:
    target = torch.arange(out.shape[0] * out.shape[1], device=out.device) % out.shape[-1]
    return F.cross_entropy(out.flatten(0, 1), target)


def _model() -> GPT:
    torch.manual_seed(0)
    return GPT(vocab=4096, d=512, layers=4, heads=8, ctx=512).cuda()


def test_predicted_peak_within_5_percent_of_max_memory_allocated() -> None:
    model = _model()
    idx = torch.randint(0, 4096, (16, 512), device="cuda")
    make = lambda ps: torch.optim.AdamW(ps)  # noqa: E731
    warm = make(model.parameters())  # cuBLAS workspaces exist before the measured step
    _loss(model(idx)).backward()
    warm.step()
    model.zero_grad(set_to_none=True)
    del warm
    plan = labkit.plan(model, idx, loss=_loss, optimizer=make)
    assert plan.meta.device.startswith("cuda")
    opt = make(model.parameters())
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    _loss(model(idx)).backward()
    opt.step()
    torch.cuda.synchronize()
    real = torch.cuda.max_memory_allocated() - base + plan.meta.start_bytes
    assert abs(plan.peak_bytes - real) / real <= 0.05, (plan.peak_bytes, real)


def test_max_batch_size_verified_fits_and_ten_percent_more_does_not() -> None:
    model = _model()
    idx = torch.randint(0, 4096, (2, 512), device="cuda")
    make = lambda ps: torch.optim.AdamW(ps)  # noqa: E731
    budget = 4 << 30
    r = max_batch_size(model, idx, budget, loss=_loss, optimizer=make, verify=True)
    assert r.batch > 2 and r.measured_bytes is not None
    assert r.measured_bytes <= budget
    bigger = labkit.plan(model, resize(idx, int(r.batch * 1.1) + 1), loss=_loss, optimizer=make)
    assert bigger.peak_bytes > budget
    # no budget: the device's free memory less the margin, stated
    free = max_batch_size(model, idx, loss=_loss, optimizer=make, limit=64)
    assert "free of" in free.how and free.budget < torch.cuda.mem_get_info()[0]
