"""Fault rows: a model or input on the ``meta`` device given to what measures a real run.

A meta tensor holds a shape and no values: its ops return at once, so a trace of it timed
labkit's hooks (``fwd=16.04 ms`` on ``cpu``) and a comparison ran without a word. Each entry
point refuses it, naming what is on meta and pointing to ``labkit.plan``, which takes meta;
the plan itself still runs on the same model.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import labkit
from labkit.optimize import Recipe


def _meta_model() -> nn.Module:
    with torch.device("meta"):
        return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _real_model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _trace(model: nn.Module, x: torch.Tensor) -> object:
    return labkit.trace(model, x, repeat=2, warmup=0)


def _memory(model: nn.Module, x: torch.Tensor) -> object:
    return labkit.memory(model, x)


def _compare(model: nn.Module, x: torch.Tensor) -> object:
    return labkit.compare(
        model, x, Recipe(precision="bf16-mixed"), mode="inference", steps=2, warmup=0, budget_s=0.5
    )


CALLS = [
    pytest.param(_trace, "labkit.trace", id="trace"),
    pytest.param(_memory, "labkit.memory", id="memory"),
    pytest.param(_compare, "compare", id="compare"),
]


@pytest.mark.parametrize(("call", "what"), CALLS)
def test_a_meta_model_is_refused_pointing_to_plan(call, what) -> None:
    model = _meta_model()
    with pytest.raises(ValueError) as err:
        call(model, torch.randn(4, 8))
    msg = str(err.value)
    assert msg.startswith(what), msg
    assert "meta device" in msg and "'0.weight'" in msg and "Sequential" in msg, msg
    assert "labkit.plan(" in msg and "to_empty" in msg, msg
    assert all(p.device.type == "meta" for p in model.parameters())  # left as it was


@pytest.mark.parametrize(("call", "what"), CALLS)
def test_a_meta_input_is_refused_naming_it(call, what) -> None:
    model = _real_model()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError) as err:
        call(model, torch.empty(4, 8, device="meta"))
    msg = str(err.value)
    assert msg.startswith(what) and "meta device" in msg and "labkit.plan(" in msg, msg
    assert "shape (4, 8)" in msg, msg
    # the error came before anything ran
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_a_meta_buffer_alone_is_refused() -> None:
    model = _real_model()
    model.register_buffer("scale", torch.empty(4, device="meta"))
    with pytest.raises(ValueError, match=r"buffer 'scale'.*labkit\.plan\("):
        labkit.trace(model, torch.randn(4, 8), repeat=2, warmup=0)


def test_plan_still_takes_the_meta_model_and_input() -> None:
    plan = labkit.plan(_meta_model(), torch.empty(4, 8, device="meta"))
    assert plan.peak_bytes > 0


def test_lab_trace_on_a_meta_model_is_refused_pointing_to_plan() -> None:
    from torch.utils.data import TensorDataset

    with torch.device("meta"):
        model = nn.Linear(4, 2)
    data = TensorDataset(torch.randn(8, 4), torch.randint(0, 2, (8,)))
    lab = labkit.Lab(model, data, loss=nn.functional.cross_entropy, batch_size=4)
    with pytest.raises(ValueError, match=r"labkit\.plan"):
        lab.trace()
    assert lab.traces == []
