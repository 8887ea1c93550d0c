"""The front door of labkit.trace, memory and plan: one helper, each default written once
(issue 40 item 3)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
from torch import nn

import labkit
from labkit.trace.entry import StepOptions, front_door


@pytest.mark.parametrize("call", [labkit.trace, labkit.memory, labkit.plan])
def test_each_default_is_the_one_of_step_options(call) -> None:
    fields = {f.name: f.default for f in dataclasses.fields(StepOptions)}
    params = inspect.signature(call).parameters
    shared = [name for name in params if name in fields]
    assert "loss" in shared and "backward" in shared and "progress" in shared
    for name in shared:
        assert params[name].default is fields[name] or params[name].default == fields[name], name
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name


def test_reprs() -> None:
    assert repr(StepOptions()) == "StepOptions()"
    assert repr(StepOptions(repeat=3, progress=False)) == "StepOptions(repeat=3, progress=False)"
    door = front_door(
        "labkit.memory", nn.Linear(2, 2), {}, batch=torch.randn(3, 2), model_kwargs={}
    )
    assert repr(door) == "FrontDoor(labkit.memory, model=Linear, args=1, kwargs=[])"


class _TakesRepeat(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor, repeat: int = 1, backward: bool = True) -> torch.Tensor:
        return self.lin(x).repeat(1, repeat)


def test_the_front_door_checks_what_every_entry_checked() -> None:
    model, x = _TakesRepeat(), torch.randn(3, 2)
    # an option named like a forward argument, given a value: the model's or labkit's?
    with pytest.raises(TypeError, match=r"labkit.trace got repeat=2.*model_kwargs=\{'repeat': 2\}"):
        labkit.trace(model, x, repeat=2)
    with pytest.raises(TypeError, match=r"labkit.memory got backward=False"):
        labkit.memory(model, x, backward=False)
    with pytest.raises(TypeError, match=r"labkit.plan got backward=False"):
        labkit.plan(model, x, backward=False)
    # with model_kwargs given, every option is labkit's
    t = labkit.trace(model, x, repeat=1, model_kwargs={"repeat": 2}, progress=False)
    assert t.meta.calls == 1
    with pytest.raises(TypeError, match="one-shot iterator"):
        labkit.memory(model, iter([x]))
    with pytest.raises(ValueError, match="meta device"):
        labkit.memory(model, x.to("meta"))
    plan = labkit.plan(model, x.to("meta"), progress=False)  # a plan takes meta
    assert plan.peak_bytes > 0
