"""Attaching puts the module hooks where ``register_forward_pre_hook`` /
``register_forward_hook(with_kwargs=True)`` put them, after the user's own, and takes every
entry out again; the parameter and buffer walks read the modules' tables as
``parameters()`` / ``buffers()`` would."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from labkit.trace import Recorder
from labkit.trace._raw import buffers_of, parameters_of


def _tables(m: nn.Module) -> tuple[dict[Any, Any], ...]:
    return tuple(
        dict(getattr(m, name))
        for name in (
            "_forward_pre_hooks",
            "_forward_pre_hooks_with_kwargs",
            "_forward_hooks",
            "_forward_hooks_with_kwargs",
            "_forward_hooks_always_called",
        )
    )


def test_hooks_run_after_the_users_and_leave_every_table_as_found() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 2))
    seen: list[str] = []

    def user_pre(m: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
        seen.append("pre")
        return (args[0] * 2,)  # what the recorder sees is the input the user's hook made

    def user_post(m: nn.Module, args: tuple[Any, ...], out: torch.Tensor) -> torch.Tensor:
        seen.append("post")
        return out + 1

    model[0].register_forward_pre_hook(user_pre)
    model[0].register_forward_hook(user_post, always_call=True)
    before = [_tables(m) for m in model.modules()]
    x = torch.ones(2, 3)
    expected = model(x)
    seen.clear()
    rec = Recorder(model, mode="timing").attach()
    assert rec.attached
    ours = model[0]._forward_pre_hooks
    assert next(iter(ours)) in before[1][0] and len(ours) == 2  # after the user's
    with rec:
        out = model(x)
    assert torch.equal(out, expected) and seen == ["pre", "post"]
    node = next(n for n in rec.trace.nodes if n.key == "0#0")
    assert node.inputs[0].shape == (2, 3) and rec.trace.meta.calls == 1
    rec.detach()
    assert not rec.attached
    assert [_tables(m) for m in model.modules()] == before
    rec.detach()  # twice: nothing more to take out
    assert [_tables(m) for m in model.modules()] == before


def test_each_attachment_has_ids_of_its_own() -> None:
    model = nn.Sequential(nn.Linear(2, 2))
    a, b = Recorder(model, mode="timing").attach(), Recorder(model, mode="timing").attach()
    try:
        assert len(model[0]._forward_pre_hooks) == 2 and len(model[0]._forward_hooks) == 2
        h = model[0].register_forward_hook(lambda *args: None)  # torch's next id: not ours
        assert len(model[0]._forward_hooks) == 3
        a.detach()
        assert len(model[0]._forward_pre_hooks) == 1 and len(model[0]._forward_hooks) == 2
        h.remove()
    finally:
        a.detach()
        b.detach()
    assert not model[0]._forward_hooks and not model[0]._forward_pre_hooks
    assert not model[0]._forward_hooks_with_kwargs and not model[0]._forward_pre_hooks_with_kwargs


class _Subset(nn.Module):
    """A model that answers ``parameters()`` / ``buffers()`` itself (a frozen backbone)."""

    def __init__(self) -> None:
        super().__init__()
        self.backbone, self.head = nn.Linear(2, 2), nn.BatchNorm1d(2)

    def parameters(self, recurse: bool = True) -> Any:  # type: ignore[override]
        return self.head.parameters(recurse)

    def buffers(self, recurse: bool = True) -> Any:  # type: ignore[override]
        return iter(())


def _tied() -> nn.Module:
    model = nn.Sequential(nn.Embedding(5, 3), nn.Linear(3, 5), nn.BatchNorm1d(5))
    model[1].weight = model[0].weight  # tied: one parameter, two owners
    model.add_module("again", model[2])  # a module registered twice
    model.register_buffer("scratch", torch.zeros(2), persistent=False)
    model[2].register_parameter("unused", None)
    return model


@pytest.mark.parametrize("make", [_tied, _Subset, lambda: nn.Linear(2, 2)])
def test_parameter_and_buffer_walks_are_the_models(make: Any) -> None:
    model = make()
    assert [id(p) for p in parameters_of(model)] == [id(p) for p in model.parameters()]
    assert [id(b) for b in buffers_of(model)] == [id(b) for b in model.buffers()]


def test_gradient_hooks_run_after_the_users_and_leave_each_table_as_found() -> None:
    model = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 2))
    seen: list[int] = []
    model[0].weight.register_post_accumulate_grad_hook(lambda p: seen.append(id(p)))
    before = {id(p): dict(p._post_accumulate_grad_hooks or {}) for p in model.parameters()}
    x = torch.randn(4, 3)
    with Recorder(model, mode="full") as rec:
        mid = dict(model[1].bias._post_accumulate_grad_hooks or {})
        model(x).sum().backward()
    assert len(mid) == 1  # ours, on a parameter that had none
    assert seen == [id(model[0].weight)]  # the user's hook ran, once
    assert rec.trace.memory[-1].bytes["gradients"] > 0  # ours saw them made
    after = {id(p): dict(p._post_accumulate_grad_hooks or {}) for p in model.parameters()}
    assert after == before  # the user's hook kept, ours gone
    model(x).sum().backward()  # nothing of labkit's left to run
    assert seen == [id(model[0].weight)] * 2
