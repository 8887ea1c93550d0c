"""What-if estimates, checked against the real thing measured by the same recorder."""

from __future__ import annotations

import pytest
import torch
from torch.utils.checkpoint import checkpoint

import labkit
from labkit.memory import WhatIf, whatif
from tests.memory.conftest import Stack


class CheckpointedStack(Stack):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False)
        return self.head(x)


def test_checkpoint_estimate_is_close_to_the_measured_saving() -> None:
    torch.manual_seed(0)
    model, x = Stack(d=64, n=4), torch.randn(256, 64)
    rep = labkit.memory(model, x)
    w = rep.whatif()
    assert isinstance(w, WhatIf) and w.peak == rep.peak_bytes
    names = [e.name for e in w.estimates]
    assert {f"checkpoint 'blocks.{i}'" for i in range(4)} <= set(names)
    # blocks 1-3 save their input (64 x 256 floats) and two 256 x 256 activations; the input
    # is kept by the checkpoint, so each drops the two 256 x 256 float32 tensors
    assert w.get("checkpoint 'blocks.2'").saving == 2 * 256 * 256 * 4
    assert all(e.peak_after == w.peak - e.saving for e in w.estimates)
    # the recomputed forward, from the trace's FLOPs: each block's own forward FLOPs
    for i in range(4):
        e = w.get(f"checkpoint 'blocks.{i}'")
        call = rep.trace.calls_of(f"blocks.{i}")[0]
        assert e.extra_flops == rep.trace.total(call.id, "flops_fwd") > 0
    assert "FLOP" in w.table()
    estimate = w.get("checkpoint all 4 blocks").saving
    ckpt = CheckpointedStack(d=64, n=4)
    ckpt.load_state_dict(model.state_dict())
    measured = rep.peak_bytes - labkit.memory(ckpt, x).peak_bytes
    assert measured > 0
    assert abs(estimate - measured) <= 0.15 * measured


def test_bf16_estimate_is_an_upper_bound_of_the_measured_saving() -> None:
    torch.manual_seed(0)
    model, x = Stack(d=64, n=4), torch.randn(256, 64)
    rep = labkit.memory(model, x)
    estimate = rep.whatif().get("bf16 activations (autocast)").saving
    with torch.autocast("cpu", dtype=torch.bfloat16):
        measured = rep.peak_bytes - labkit.memory(model, x).peak_bytes
    assert estimate > 0 and measured <= estimate


def test_table_repr_and_chosen_blocks() -> None:
    torch.manual_seed(0)
    rep = labkit.memory(Stack(d=16, n=2), torch.randn(32, 16))
    w = whatif(rep.trace, blocks=["blocks.1"])
    assert [e.name for e in w.estimates if e.kind == "checkpoint"] == ["checkpoint 'blocks.1'"]
    assert repr(w).startswith("WhatIf(peak=") and "estimates=2" in repr(w)
    table = w.table()
    head = table.splitlines()[0].split()
    assert head == ["change", "saving", "peak", "after", "extra", "compute"]
    assert "checkpoint 'blocks.1'" in table
    with pytest.raises(KeyError, match="no estimate"):
        w.get("nope")
    with pytest.raises(ValueError, match="no memory recording"):
        whatif(labkit.trace(Stack(d=4, n=1), torch.randn(2, 4), mode="timing"))
