"""A plan too large to finish in reasonable time is refused up front (issue 41 item 3):
by the modules that can be called before anything is made, by the module calls while the
step runs (a loop calling one module many times); ``max_module_calls=`` allows it."""

from __future__ import annotations

import inspect

import pytest
import torch
from torch import nn

import labkit
from labkit.plan import PlanTooLarge, max_batch_size
from labkit.plan._limit import MAX_MODULE_CALLS, SECONDS_PER_CALL, callable_modules
from tests.memory.conftest import assert_clean
from tests.plan.test_plan_scale import Chain


class Loop(nn.Module):
    """Two modules that can be called, ``1 + times`` module calls."""

    def __init__(self, times: int) -> None:
        super().__init__()
        self.block = nn.Linear(2, 2)
        self.times = times

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.times):
            x = self.block(x)
        return x


class NeverRuns(Chain):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise AssertionError("the step ran: the refusal came too late")


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(model: nn.Module, before: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_a_model_above_the_limit_is_refused_before_its_step_runs() -> None:
    model = NeverRuns(12)
    before = _state(model)
    with pytest.raises(PlanTooLarge) as info:
        labkit.plan(model, torch.randn(4, 2), max_module_calls=5)
    err = info.value
    assert isinstance(err, labkit.PlanError)  # caught as any plan error
    assert (err.calls, err.limit) == (13, 5)  # the chain and its 12 Linear; not the ModuleList
    msg = str(err)
    assert "NeverRuns: it has 13 modules that can be called, above max_module_calls=5" in msg
    assert f"~{SECONDS_PER_CALL * 1e3:.1f} ms a module call" in msg  # the expected time
    assert "max_module_calls=None (no limit)" in msg and "max_module_calls=26" in msg
    assert "labkit.memory(model, batch)" in msg  # the faster way for a real model
    assert err.__cause__ is None and err.__suppress_context__ is False
    assert_clean(model)
    assert _same(model, before) and model.training


def test_the_option_allows_it_and_the_plan_is_the_same() -> None:
    torch.manual_seed(0)
    model, x = Chain(12), torch.randn(4, 2)
    allowed = labkit.plan(model, x, max_module_calls=13)
    unlimited = labkit.plan(model, x, max_module_calls=None)
    measured = labkit.memory(model, x)
    assert allowed.peak_bytes == unlimited.peak_bytes == measured.peak_bytes
    assert sum(1 for n in allowed.trace.nodes if n.kind == "module") == 13
    with pytest.raises(PlanTooLarge):
        labkit.plan(model, x, max_module_calls=12)  # the limit is the last call allowed


def test_a_loop_calling_one_module_many_times_is_stopped_while_it_runs() -> None:
    model = Loop(times=50)
    assert callable_modules(model) == 2  # passes the count made before the step
    before = _state(model)
    with pytest.raises(PlanTooLarge) as info:
        labkit.plan(model, torch.randn(4, 2), max_module_calls=20)
    err = info.value
    assert (err.calls, err.limit) == (21, 20)  # stopped at the first call past it
    msg = str(err)
    assert "stopped Loop's step at module call 21, above max_module_calls=20" in msg
    assert "module 'block' alone was called 20 times: a loop" in msg
    assert "nothing was changed" in msg and "labkit.memory(model, batch)" in msg
    assert err.__cause__ is None and err.__suppress_context__  # no deep traceback chained
    assert_clean(model)
    assert _same(model, before) and model.block.weight.grad is None and model.training
    plan = labkit.plan(model, torch.randn(4, 2), max_module_calls=51)
    assert sum(1 for n in plan.trace.nodes if n.kind == "module") == 51


def test_a_meta_model_is_not_sent_to_labkit_memory() -> None:
    with torch.device("meta"):
        model = Chain(8)
    with pytest.raises(PlanTooLarge, match=r"needs real parameters \(this model is on the meta"):
        labkit.plan(model, torch.Size([4, 2]), max_module_calls=3)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "100"])
def test_a_limit_that_is_not_a_count_is_named(bad: object) -> None:
    with pytest.raises(ValueError, match=r"max_module_calls must be a positive number"):
        labkit.plan(Chain(2), torch.randn(4, 2), max_module_calls=bad)  # type: ignore[arg-type]


def test_the_default_refuses_a_model_larger_than_it() -> None:
    params = inspect.signature(labkit.plan).parameters
    assert params["max_module_calls"].default == MAX_MODULE_CALLS
    assert params["max_module_calls"].kind is inspect.Parameter.KEYWORD_ONLY
    assert MAX_MODULE_CALLS * SECONDS_PER_CALL >= 100  # the refused case: over ~2 minutes

    class Wide(nn.Module):  # modules without parameters: cheap to build, as many calls
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(nn.Identity() for _ in range(MAX_MODULE_CALLS))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return x

    with pytest.raises(PlanTooLarge, match=f"it has {MAX_MODULE_CALLS + 1:,} modules"):
        labkit.plan(Wide(), torch.randn(4, 2))


def test_max_batch_size_and_a_plans_replan_hold_the_option() -> None:
    model, x = Chain(12), torch.randn(4, 2)
    with pytest.raises(PlanTooLarge, match="max_module_calls=5"):
        max_batch_size(model, x, budget=1 << 20, max_module_calls=5)
    found = max_batch_size(model, x, budget=1 << 20, max_module_calls=13, limit=64)
    assert found.batch == 64
    plan = labkit.plan(model, x, max_module_calls=13)
    assert plan.request is not None and plan.request.options["max_module_calls"] == 13
    assert plan.max_batch_size(1 << 20, limit=64) == 64


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_modules_that_can_be_called_are_counted_whatever_they_are() -> None:
    class Holder(nn.Module):  # no forward of its own: cannot be called
        def __init__(self) -> None:
            super().__init__()
            self.enc = torch.jit.script(nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
            self.layers = nn.ModuleList([nn.Linear(2, 2)])
            self.shared = self.layers[0]  # the same module twice: counted once

    # the scripted Sequential, its Linear and ReLU, and the Linear in the list
    assert callable_modules(Holder()) == 4
