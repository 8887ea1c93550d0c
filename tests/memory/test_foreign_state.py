"""labkit.memory and labkit.trace leave what the step reaches outside the model as it was.

The loss or the forward may call modules the model does not hold as submodules (a module
in a plain list attribute, one only a closure names, a GAN's discriminator or a frozen
teacher called by the loss) or use a foreign module's parameters directly (a list of them
captured before the call). The step puts ``.grad`` on them and updates a BatchNorm's
running statistics; measuring must leave all of it as it was (an existing ``.grad`` keeps
its identity and its values: backward accumulates into it in place).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit

Case = tuple[nn.Module, torch.Tensor, Callable[[Any], Any] | None, list[nn.Module]]


class _ListHeld(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.others = [nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))]  # not a submodule

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.tanh(self.others[0](x)))


def _list_held() -> Case:
    model = _ListHeld()
    return model, torch.randn(6, 8), None, [model.others[0]]


def _closure_only() -> Case:
    shared = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8))  # named by the forward only

    class UsesShared(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.tanh(shared(x)))

    return UsesShared(), torch.randn(6, 8), None, [shared]


def _discriminator() -> Case:
    gen = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    disc = nn.Sequential(nn.Linear(4, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 1))

    def loss(out: torch.Tensor) -> torch.Tensor:
        return -disc(out).mean()

    return gen, torch.randn(6, 8), loss, [disc]


def _teacher() -> Case:
    student = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    teacher = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 4)).eval()
    x = torch.randn(6, 8)

    def loss(out: torch.Tensor) -> torch.Tensor:  # params require grad: .grad would land
        return F.mse_loss(out, teacher(x))

    return student, x, loss, [teacher]


def _captured_params() -> Case:
    other = nn.Linear(8, 4)
    params = list(other.parameters())  # captured before the call

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) + F.linear(x, params[0], params[1])

    return Net(), torch.randn(6, 8), None, [other]


def _existing_grad() -> Case:
    model, x, loss, others = _discriminator()
    for m in others:  # a .grad already there: accumulated into in place by backward
        m(model(x)).sum().backward()
    model.zero_grad(set_to_none=True)
    return model, x, loss, others


def _teacher_set_to_eval() -> Case:
    student = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    teacher = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.5), nn.Linear(16, 4))  # training
    x = torch.randn(6, 8)

    def loss(out: torch.Tensor) -> torch.Tensor:  # flags change before its first call
        teacher.eval()
        teacher.requires_grad_(False)
        return F.mse_loss(out, teacher(x))

    return student, x, loss, [teacher]


CASES: dict[str, Callable[[], Case]] = {
    "list_held": _list_held,
    "closure_only": _closure_only,
    "discriminator": _discriminator,
    "teacher": _teacher,
    "captured_params": _captured_params,
    "existing_grad": _existing_grad,
    "teacher_set_to_eval": _teacher_set_to_eval,
}


def _state(modules: list[nn.Module]) -> list[tuple[str, object]]:
    """Every parameter and buffer of ``modules``: identity, values, requires_grad, ``.grad``
    (identity and values), and each module's ``training``."""
    out: list[tuple[str, object]] = []
    for i, m in enumerate(modules):
        for path, sub in m.named_modules():
            out.append((f"{i}.{path} training", sub.training))
        for name, t in (*m.named_parameters(), *m.named_buffers()):
            g = t.grad
            out.append((f"{i}.{name}", (id(t), t.detach().clone(), t.requires_grad)))
            out.append((f"{i}.{name}.grad", None if g is None else (id(g), g.clone())))
    return out


def _assert_same(before: list[tuple[str, object]], after: list[tuple[str, object]]) -> None:
    assert [k for k, _ in before] == [k for k, _ in after]
    for (k, a), (_, b) in zip(before, after, strict=True):
        if isinstance(a, tuple):
            assert isinstance(b, tuple), k
            assert len(a) == len(b), k
            for x, y in zip(a, b, strict=True):
                same = torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
                assert same, f"{k} changed"
        else:
            assert a == b, f"{k} changed: {a} -> {b}"


def _measure(what: str, model: nn.Module, x: torch.Tensor, loss: Any, **kw: Any) -> None:
    if what == "memory":
        labkit.memory(model, x, loss=loss, progress=False, **kw)
    else:
        labkit.trace(model, x, loss=loss, repeat=1, progress=False, **kw)


@pytest.mark.parametrize("what", ["memory", "trace"])
@pytest.mark.parametrize("name", list(CASES))
def test_what_the_step_reaches_outside_the_model_is_as_before(what: str, name: str) -> None:
    torch.manual_seed(0)
    model, x, loss, others = CASES[name]()
    owned = [model, *others]
    before = _state(owned)
    if name == "existing_grad":
        assert any(k.endswith(".grad") and v is not None for k, v in before)
    _measure(what, model, x, loss)
    _assert_same(before, _state(owned))


@pytest.mark.parametrize("what", ["memory", "trace"])
def test_the_foreign_state_is_put_back_on_error_too(what: str) -> None:
    torch.manual_seed(0)
    model, x, _, others = _discriminator()
    disc = others[0]

    def loss(out: torch.Tensor) -> torch.Tensor:
        disc(out).mean().backward()
        raise ValueError("the loss failed")

    before = _state([model, disc])
    with pytest.raises(Exception, match="the loss failed"):
        _measure(what, model, x, loss)
    _assert_same(before, _state([model, disc]))


@pytest.mark.parametrize("what", ["memory", "trace"])
def test_keep_step_keeps_the_foreign_changes_of_one_step(what: str) -> None:
    torch.manual_seed(0)
    model, x, loss, others = _discriminator()
    disc = others[0]
    bn = disc[1]
    assert isinstance(bn, nn.BatchNorm1d)
    _measure(what, model, x, loss, keep_step=True)
    assert bn.num_batches_tracked.item() == 1  # one step kept, not the timing passes' too
    grads = [p.grad for p in disc.parameters()]
    assert all(g is not None for g in grads)
    expected = [g.clone() for g in grads if g is not None]
    disc.zero_grad(set_to_none=True)
    model.zero_grad(set_to_none=True)
    loss(model(x)).backward()  # one step of the same (train-mode) computation from scratch
    # BatchNorm's batch statistics do not depend on its running ones: the same gradients
    for g, p in zip(expected, disc.parameters(), strict=True):
        assert p.grad is not None
        torch.testing.assert_close(g, p.grad)


_GLOBAL_DISC = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
_GLOBAL_W = nn.Parameter(torch.randn(4, 4))


def test_a_global_module_and_parameter_the_loss_uses_are_put_back_without_a_note() -> None:
    model, x = nn.Linear(4, 4), torch.randn(5, 4)

    def loss(out: torch.Tensor) -> torch.Tensor:
        return (out - _GLOBAL_DISC(out)).pow(2).mean() + (out @ _GLOBAL_W).sum()

    before = _state([model, _GLOBAL_DISC, nn.ParameterList([_GLOBAL_W])])
    trace = labkit.trace(model, x, loss=loss, repeat=1, progress=False)
    _assert_same(before, _state([model, _GLOBAL_DISC, nn.ParameterList([_GLOBAL_W])]))
    assert not any("module-level" in n for n in trace.meta.notes), trace.meta.notes


@pytest.mark.parametrize("what", ["memory", "trace"])
def test_a_step_that_freezes_part_of_the_model_leaves_it_trainable(what: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x = torch.randn(6, 8)

    def loss(out: torch.Tensor) -> torch.Tensor:  # a fine-tuning step freezing the stem
        model[0].requires_grad_(False)
        return out.pow(2).mean()

    before = _state([model])
    _measure(what, model, x, loss)
    _assert_same(before, _state([model]))
