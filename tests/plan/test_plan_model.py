"""The Plan: a 'plan'-mode trace with the memory report's views, labelled predicted."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import labkit
from labkit.plan import Plan
from tests.plan.models import CNN


@pytest.fixture(scope="module")
def cnn_plan() -> tuple[nn.Module, torch.Tensor, Plan]:
    torch.manual_seed(0)
    model, x = CNN(), torch.randn(4, 3, 16, 16)
    return model, x, labkit.plan(model, x, optimizer=lambda ps: torch.optim.SGD(ps, lr=0.1))


def test_save_and_load_give_the_same_plan(cnn_plan, tmp_path: Path) -> None:
    _, _, plan = cnn_plan
    plan.save(tmp_path / "p.json")
    back = Plan.load(tmp_path / "p.json")
    assert back == plan and back.trace == plan.trace
    assert back.trace.meta.mode == "plan"
    assert back.peak_bytes == plan.peak_bytes and back.total_flops == plan.total_flops
    with pytest.raises(ValueError, match="cannot re-plan"):
        back.max_batch_size(budget=1 << 30)


def test_summary_and_repr_say_predicted(cnn_plan) -> None:
    _, _, plan = cnn_plan
    text = plan.summary()
    assert text.startswith("PREDICTED step of CNN")
    assert "FLOPs forward+backward" in text and "by category" in text
    assert plan.trace.meta.notes[0].startswith("predicted on fake tensors")
    assert plan.trace.meta.device == plan.meta.device == "cpu"
    r = repr(plan)
    assert r.startswith("Plan(model=CNN, device=cpu, peak=") and "in backward" in r


def test_flops_by_module_add_up_to_the_total(cnn_plan) -> None:
    _, _, plan = cnn_plan
    rows = plan.flops_by_module()
    fwd, bwd = rows[""]  # the root call holds everything inside the model
    m = plan.trace.meta
    assert fwd + bwd + m.outside_flops_fwd + m.outside_flops_bwd == plan.total_flops
    assert rows["body.0"][0] == 2 * 4 * 8 * 16 * 16 * 3 * 3 * 3  # conv: 2 * N*Cout*H*W * Cin*k*k


def test_a_measured_trace_is_not_a_plan() -> None:
    model = nn.Linear(4, 2)
    rep = labkit.memory(model, torch.randn(3, 4))
    with pytest.raises(ValueError, match=r"measured .* not planned"):
        Plan(rep.trace)


def test_show_titles_every_tab_predicted(cnn_plan) -> None:
    _, _, plan = cnn_plan
    view = plan.show()
    assert view.titles == ("Graph (predicted)", "Profile (predicted)", "Memory (predicted)")
    assert view.graph.metric == "flops"


def test_nothing_of_the_predicted_size_is_allocated() -> None:
    # 64 MiB of weights planned on the meta device with a 256 MiB input batch: the process
    # would need far more than the plan's own bookkeeping if anything real were allocated
    import resource

    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 10))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    plan = labkit.plan(model, torch.Size([16384, 4096]), optimizer=torch.optim.Adam)
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before
    assert plan.peak_bytes > 1 << 30
    assert grown < plan.peak_bytes // 50, f"the process grew {grown} B for a plan of {plan}"


def test_beside_puts_predicted_next_to_measured(cnn_plan) -> None:
    model, x, plan = cnn_plan
    measured = labkit.memory(model, x, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    model.zero_grad(set_to_none=True)
    rows = plan.beside(measured).splitlines()
    assert rows[0].split() == ["predicted", "measured", "error"]
    peak = rows[1].split()
    assert peak[0] == "peak" and peak[-1] == "+0.00%"
    assert " ".join(peak[1:3]) == " ".join(peak[3:5])  # the same size, as printed
    assert len(rows) == 2 + len(measured.meta.peak_by_category) + 1
    assert rows[-1].startswith("peak where   predicted backward of")
