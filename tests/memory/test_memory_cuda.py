"""CUDA: the storage accounting against the caching allocator (run with ``pytest -m cuda``)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit.memory import MemoryRecordError
from tests.memory.conftest import assert_clean

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

MiB = 1 << 20


def _big_mlp() -> nn.Module:
    # 4096 x 4096 float32 weights are 64 MiB each: sizes the allocator does not round
    return nn.Sequential(
        nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096)
    )


def _warm(model: nn.Module, x: torch.Tensor, y: torch.Tensor, opt: torch.optim.Optimizer) -> None:
    """One step outside the recording: cuBLAS workspaces and optimizer state exist afterwards."""
    F.mse_loss(model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def test_cuda_peak_within_1pct_of_max_memory_allocated() -> None:
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = _big_mlp().to(dev)
    x, y = torch.randn(2048, 4096, device=dev), torch.randn(2048, 4096, device=dev)
    opt = torch.optim.Adam(model.parameters())
    _warm(model, x, y, opt)
    rep = labkit.memory(model, x, loss=lambda out: F.mse_loss(out, y), optimizer=opt)
    a = rep.allocator
    assert a["peak_allocated"] == torch.cuda.max_memory_allocated(dev)
    truth = a["peak_allocated"]
    ours = a["tracked_peak"] + a["untracked_at_start"]
    assert abs(ours - truth) <= 0.01 * truth, (ours, truth, a)
    assert abs(rep.peak_bytes - a["tracked_peak"]) <= 64 * 1024  # CPU scalars (Adam's step)
    assert a["reserved"] >= a["allocated"] and a["peak_reserved"] >= a["peak_allocated"]
    assert 0 <= a["fragmentation_pct"] < 100 and a["alloc_retries"] >= 0 and a["ooms"] == 0
    # PyTorch's terms: fragmentation is inactive split bytes over reserved, not the cache
    expected = round(100 * a["inactive_split_bytes"] / a["reserved"], 3)
    assert a["fragmentation_pct"] == expected
    assert a["cached"] == a["reserved"] - a["allocated"]
    assert {s.phase for s in rep.samples} == {"forward", "backward", "optimizer"}
    # the autograd device thread's allocations are charged to the module whose backward ran
    assert any(s.module for s in rep.samples if s.phase == "backward")
    assert rep.meta.device.startswith("cuda") and "allocator" in rep.summary()
    assert_clean(model)


def test_cuda_fragmentation_is_reported() -> None:
    class Cache(nn.Module):
        """Keeps every other 3 MiB chunk it makes: holes in the allocator's segments."""

        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(256, 256)
            self.kept: list[torch.Tensor] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            chunks = [torch.empty(3 * MiB, dtype=torch.uint8, device=x.device) for _ in range(24)]
            self.kept += chunks[::2]
            del chunks
            return self.lin(x)

    dev = torch.device("cuda")
    model = Cache().to(dev)
    torch.cuda.empty_cache()
    rep = labkit.memory(model, torch.randn(8, 256, device=dev))
    a = rep.allocator
    assert a["fragmentation_pct"] > 0
    assert a["reserved"] - a["allocated"] >= 12 * 3 * MiB
    assert a["inactive_split_bytes"] > 0 and a["largest_free_block"] >= 3 * MiB
    assert rep.samples[-1].bytes["temporaries"] >= 12 * 3 * MiB  # the kept chunks
    model.kept.clear()
    assert_clean(model)


def test_cuda_out_of_memory_keeps_partial_timeline_and_cleans_up() -> None:
    class Greedy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pre = nn.Linear(64, 64)
            self.hog = nn.Linear(64, 64)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.pre(x)
            return self.hog(h) + torch.empty(1 << 45, dtype=torch.uint8, device=x.device).sum()

    dev = torch.device("cuda")
    model = Greedy().to(dev)
    with pytest.raises(MemoryRecordError, match="out of memory") as e:
        labkit.memory(model, torch.randn(4, 64, device=dev))
    assert isinstance(e.value.__cause__, torch.OutOfMemoryError)
    rep = e.value.report
    assert rep.samples and rep.allocator["ooms"] >= 1
    assert any(s.module == "pre" for s in rep.samples)
    assert_clean(model)
    torch.cuda.empty_cache()


def test_cuda_full_mode_trace_has_allocator_figures() -> None:
    dev = torch.device("cuda")
    model = nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 8)).to(dev)
    t = labkit.trace(model, torch.randn(64, 128, device=dev))
    assert t.memory and t.memory_meta is not None
    assert t.memory_meta.allocator["peak_allocated"] > 0
    assert t.memory_meta.allocator["tracked_peak"] > 0
    assert_clean(model)


def test_cuda_history_snapshot_is_written_for_memory_viz(tmp_path) -> None:
    import pickle

    dev = torch.device("cuda")
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 4)).to(dev)
    path = tmp_path / "step.pickle"
    rep = labkit.memory(model, torch.randn(32, 256, device=dev), cuda_history=path)
    assert rep.allocator["history"] == str(path)
    with open(path, "rb") as f:
        snap = pickle.load(f)
    assert snap["segments"]
    actions = {e["action"] for trace in snap["device_traces"] for e in trace}
    assert "alloc" in actions
    assert_clean(model)


def test_cuda_gpt2_like_peak_within_1pct_of_the_allocator() -> None:
    from tests.trace.test_timing_cuda import TinyGPT

    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = TinyGPT().to(dev)
    idx = torch.randint(0, 8192, (8, 512), device=dev)
    opt = torch.optim.AdamW(model.parameters())

    def loss(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out.flatten(0, 1), idx.flatten())

    rep = labkit.memory(model, idx, loss=loss, optimizer=opt)  # AdamW's first step: state made
    a = rep.allocator
    truth = a["peak_allocated"]
    ours = a["tracked_peak"] + a["untracked_at_start"]
    assert abs(ours - truth) <= 0.01 * truth, (ours, truth, a)
    state = sum(t.untyped_storage().nbytes() for s in opt.state.values() for t in s.values())
    assert rep.samples[-1].bytes["optimizer"] == state
    if rep.peak_phase == "optimizer":
        assert rep.meta.peak_by_category["optimizer"] == state
    assert_clean(model)
