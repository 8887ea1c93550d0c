"""Memory figures that add up: state from its allocation, inputs by what the batch uses,
the peak named where it is, phases as they happened."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit.memory.errors import MemoryRecordError
from tests.trace.conftest import assert_clean

PHASE_ORDER = {"forward": 0, "backward": 1, "optimizer": 2}


def _param_bytes(model: nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _state_bytes(opt: torch.optim.Optimizer) -> int:
    return sum(
        t.untyped_storage().nbytes()
        for s in opt.state.values()
        for t in s.values()
        if isinstance(t, torch.Tensor)
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda ps: torch.optim.AdamW(ps, lr=1e-3),
        lambda ps: torch.optim.Adam(ps, lr=1e-3, foreach=False),
        lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    ],
    ids=["adamw", "adam-for-loop", "sgd-momentum"],
)
def test_optimizer_state_counts_from_its_allocation(make) -> None:
    torch.manual_seed(0)
    model = nn.Linear(1000, 1000)
    opt = make(model.parameters())
    x = torch.randn(8, 1000)
    rep = labkit.memory(model, x, loss=lambda out: out.pow(2).mean(), optimizer=opt, keep_step=True)
    state = _state_bytes(opt)
    assert state >= _param_bytes(model)  # moments / momentum: at least one per parameter
    opt_samples = [s for s in rep.samples if s.phase == "optimizer"]
    assert opt_samples
    # the state is optimizer state at every moment it exists: it only grows, never sits in
    # temporaries first, and the temporaries of the step are what the step frees
    seen = [s.bytes.get("optimizer", 0) for s in rep.samples]
    assert seen == sorted(seen) and seen[-1] == state
    end = rep.samples[-1].bytes
    assert end["temporaries"] <= 8 * 1000 * 4 + 64  # the output and loss the step still holds
    assert rep.meta.peak_by_category.get("optimizer", 0) in (0, state)
    if rep.peak_phase == "optimizer":
        assert rep.meta.peak_by_category["optimizer"] == state
        assert rep.meta.peak_where == f"{type(opt).__name__}.step"


def test_no_phase_after_the_optimizer_that_did_not_happen() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.AdamW(model.parameters())
    rep = labkit.memory(model, torch.randn(4, 16), loss=lambda o: o.sum(), optimizer=opt)
    order = [PHASE_ORDER[s.phase] for s in rep.samples]
    assert order == sorted(order)  # forward, then backward, then optimizer: never back
    assert {s.phase for s in rep.samples} == set(PHASE_ORDER)


def test_a_batch_sliced_from_a_dataset_counts_its_own_bytes() -> None:
    torch.manual_seed(0)
    data = torch.randn(20_000, 100)
    model = nn.Linear(100, 10)
    x = data[:64]
    rep = labkit.memory(model, x)
    assert rep.samples[0].bytes["inputs"] == 64 * 100 * 4
    assert rep.meta.resident_before == (20_000 - 64) * 100 * 4
    assert rep.process_peak_bytes == rep.peak_bytes + rep.meta.resident_before
    text = rep.summary()
    assert "resident before the step, not counted" in text and "process peak" in text
    # a strided view spans from its first to its last element
    cols = data[:10, :50]
    rep2 = labkit.memory(nn.Linear(50, 2), cols)
    assert rep2.samples[0].bytes["inputs"] == (9 * 100 + 50) * 4


def test_the_peak_names_the_module_or_the_call() -> None:
    model = nn.Sequential(nn.Linear(64, 4096), nn.ReLU(), nn.Linear(4096, 8))
    rep = labkit.memory(model, torch.randn(256, 64), backward=False)
    assert rep.meta.peak_where.startswith("module '")
    big_loss = labkit.memory(
        nn.Linear(4, 4), torch.randn(2, 4), loss=lambda o: o.sum() + torch.zeros(4_000_000).sum()
    )
    assert big_loss.meta.peak_where == "outside any module after the forward (the loss)"
    assert "(the loss)" in big_loss.summary()


def test_grad_scaler_state_is_optimizer_state() -> None:
    model = nn.Linear(32, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    rep = labkit.memory(
        model,
        torch.randn(4, 32),
        loss=lambda o: o.pow(2).mean(),
        optimizer=opt,
        scaler=scaler,
        keep_step=True,
    )
    scale_bytes = scaler._scale.untyped_storage().nbytes()
    growth = scaler._growth_tracker.untyped_storage().nbytes()
    assert rep.samples[-1].bytes.get("optimizer", 0) == scale_bytes + growth
    first = next(s for s in rep.samples if s.bytes.get("optimizer"))
    assert first.phase == "forward"  # made by scaler.scale(loss): state from that moment
    with pytest.raises(ValueError, match="scaler= needs optimizer="):
        labkit.memory(model, torch.randn(4, 32), scaler=scaler)


def test_a_step_that_fails_in_the_optimizer_says_where() -> None:
    class Boom(torch.optim.SGD):
        def step(self, closure=None):  # type: ignore[override]
            super().step(closure)
            raise RuntimeError("optimizer exploded")

    model = nn.Linear(8, 8)
    opt = Boom(model.parameters(), lr=0.1, momentum=0.9)
    with pytest.raises(MemoryRecordError, match=r"failed in Boom\.step: RuntimeError") as e:
        labkit.memory(
            model, torch.randn(2, 8), loss=lambda o: F.mse_loss(o, torch.zeros(2, 8)), optimizer=opt
        )
    # the partial report has its categories right up to the failure
    last = e.value.report.samples[-1].bytes
    assert last["optimizer"] == _param_bytes(model)  # one momentum buffer per parameter
    assert last["gradients"] == _param_bytes(model)
    assert_clean(model)
    # and the failed step was undone: no state, no .grad
    assert not opt.state and all(p.grad is None for p in model.parameters())


def test_the_memory_trace_has_the_same_dataflow_as_a_trace() -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
    model = nn.Sequential(nn.Embedding(50, 16), encoder, nn.LayerNorm(16), nn.Linear(16, 50))
    model.eval()
    idx = torch.randint(0, 50, (2, 7))
    rep = labkit.memory(model, idx)
    ref = labkit.trace(model, idx, repeat=0)

    def flow(t: labkit.Trace) -> set[tuple[str, str]]:
        return {(t.nodes[e.src].key, t.nodes[e.dst].key) for e in t.edges}

    assert flow(rep.trace) == flow(ref) and len(flow(ref)) > 10
    assert rep.trace.total_flops == ref.total_flops
    view = rep.show()
    assert view.selected_index == 2 and view.graph.metric == "activations"


def test_largest_storages_with_lifetimes_answer_what_was_live_then(tmp_path) -> None:
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8))
    opt = torch.optim.Adam(model.parameters())
    rep = labkit.memory(model, torch.randn(32, 64), optimizer=opt)
    big = rep.meta.largest
    assert [r["bytes"] for r in big] == sorted((r["bytes"] for r in big), reverse=True)
    assert big[0]["bytes"] == 256 * 64 * 4  # the first weight, its grad and Adam's moments
    at_peak = rep.live_between()
    cats = {r["category"] for r in at_peak}
    assert {"parameters", "gradients", "optimizer"} <= cats
    # a storage freed before the peak is not "live at the peak"
    for r in at_peak:
        assert r["start"] <= rep.meta.peak_time and (
            r["end"] is None or r["end"] >= rep.meta.peak_time
        )
    assert rep.live_between(-1.0, -0.5) == []
    assert "largest storages live at the peak" in rep.summary()
    rep.save(tmp_path / "m.json")
    assert type(rep).load(tmp_path / "m.json") == rep
