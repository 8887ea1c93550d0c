"""StandIn, ToFake and held_state: the user's modules and tensors standing for their fakes."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from labkit.plan import PlanError
from labkit.plan._fake import new_mode
from labkit.plan._standin import StandIn, ToFake, held_state


def _pair() -> tuple[nn.Sequential, nn.Sequential]:
    real = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1))
    return real, copy.deepcopy(real)


def test_each_module_holds_its_copys_state_and_gets_its_own_dict_back() -> None:
    real, fake = _pair()
    dicts = [vars(m) for m in real.modules()]
    children, first = list(real.children()), fake[0]
    with StandIn(zip(real.modules(), fake.modules(), strict=True)) as s:
        assert real[0].weight is fake[0].weight
        assert list(real.children()) == children  # the user's own modules, not the copies
        real.cache = "set in the step"
        real[0].weight = nn.Parameter(torch.zeros(3, 2))
        assert repr(s) == "StandIn(modules=4, entered=True)"
    assert [vars(m) for m in real.modules()] == dicts
    assert all(vars(m) is d for m, d in zip(real.modules(), dicts, strict=True))
    assert not hasattr(real, "cache") and fake.cache == "set in the step"  # the copy kept it
    assert real[0].weight is not first.weight and not first.weight.any()  # the copy's
    assert repr(s) == "StandIn(modules=4, entered=False)"


@pytest.mark.parametrize("raised", [RuntimeError, KeyboardInterrupt])
def test_dicts_come_back_on_error_and_interrupt(raised: type[BaseException]) -> None:
    real, fake = _pair()
    dicts = [vars(m) for m in real.modules()]
    with pytest.raises(raised), StandIn(zip(real.modules(), fake.modules(), strict=True)):
        raise raised("stopped in the step")
    assert all(vars(m) is d for m, d in zip(real.modules(), dicts, strict=True))


def test_a_module_met_twice_stands_in_once() -> None:
    real, fake = _pair()
    s = StandIn([(real, fake), (real, fake), (real[0], fake[0])])
    assert len(s.pairs) == 2 and s.covers(real) and not s.covers(real[1])


def test_to_fake_hands_ops_the_fakes_and_refuses_an_earlier_graph() -> None:
    mode = new_mode()
    w = nn.Parameter(torch.randn(3, 2))
    known = mode.from_tensor(w)
    stray = nn.Parameter(torch.randn(2))  # a parameter only a closure names
    to_fake = ToFake({id(w): known}, [w], mode, torch.device("cpu"))
    with mode, to_fake:
        out = torch.cat([w.sum(0), stray * 2])
        out.sum().backward()
    assert w.grad is None and stray.grad is None  # the fakes got them
    assert known.grad is not None and to_fake.met == [stray]
    assert repr(to_fake) == "ToFake(tensors=2, met=1)"
    earlier = (w * 2).sum()  # a real graph built before
    refused = r"shape \(\) computed before the call .*SumBackward0"
    with pytest.raises(PlanError, match=refused), mode, ToFake({}, [], mode, torch.device("cpu")):
        torch.add(earlier, 1)


def test_held_state_finds_modules_kept_apart_and_kept_graphs() -> None:
    shared, other = nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2))
    model = nn.Sequential(nn.Linear(2, 2))
    model.others = [shared]
    model.by_name = {"other": other}
    model.parent_ref = [model]  # itself: not apart
    model.kept = (model[0].weight * 2).sum()  # a graph's tensor
    foreign, graphs = held_state(model)
    assert {id(m) for m in foreign} == {id(shared), id(other), id(other[0])}
    assert graphs == [("the root module .kept", model.kept)]
