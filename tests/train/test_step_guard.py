"""StepGuard: non-finite gradients found before optimizer.step, the replay leaves no trace."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from labkit.train._step_guard import NonFiniteError, StepGuard, replay_locate


class BackwardOnly(nn.Module):
    """Finite forward, finite loss; the gradient of ``w`` alone is NaN (sqrt at 0 backward)."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 1)
        self.w = nn.Parameter(torch.ones(64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x).mean() + 0.0 * torch.sqrt(self.w - self.w).sum()


def test_a_gradient_broken_in_backward_only_is_named_before_the_update():
    torch.manual_seed(0)
    model = BackwardOnly()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = StepGuard(model).attach(opt)
    before = [p.detach().clone() for p in model.parameters()]
    loss = model(torch.randn(8, 4))
    assert torch.isfinite(loss)
    loss.backward()
    assert torch.isfinite(model.head.bias.grad).all()  # the cheap check cannot see it
    with pytest.raises(NonFiniteError) as info:
        opt.step()  # the first step always gets the full check
    assert info.value.where == "gradient" and info.value.step == 1
    assert "'w'" in str(info.value) and guard.full_checks == 1
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    guard.detach()
    assert not opt._optimizer_step_pre_hooks and not model._forward_pre_hooks


class WithSmall(nn.Module):
    """A Linear and a smaller parameter of a given shape (the one checked every step)."""

    def __init__(self, small: torch.Tensor) -> None:
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.small = nn.Parameter(small)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x).mean() * self.small.mean()


@pytest.mark.parametrize(
    "small",
    [torch.ones(3), torch.tensor(1.0), torch.ones(2, 2), torch.ones(3, dtype=torch.float64)],
    ids=["bias-like 1-D", "0-dim", "2-D", "float64"],
)
def test_a_nan_input_is_caught_on_its_step_by_the_cheap_check(small):
    torch.manual_seed(0)
    model = WithSmall(small.clone())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    guard = StepGuard(model, budget=0.0).attach(opt)  # full checks: the first step only
    x = torch.randn(5, 4, dtype=small.dtype)
    model.body.to(small.dtype)
    for step in (1, 2):
        opt.zero_grad()
        model(x).backward()
        opt.step()
        guard.stepped(step)
    before = [p.detach().clone() for p in model.parameters()]
    x[0, 0] = float("nan")
    opt.zero_grad()
    model(x).backward()
    with pytest.raises(NonFiniteError) as info:
        opt.step()
    assert info.value.step == 3 and guard.full_checks == 1
    assert info.value.module == "body"  # the replay of the kept input names it
    assert all(torch.equal(p, b) for p, b in zip(model.parameters(), before, strict=True))
    guard.detach()


def test_full_checks_follow_the_budget():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 256), nn.ReLU(), nn.Linear(256, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    guard = StepGuard(model, budget=0.0).attach(opt)
    x = torch.randn(16, 32)
    for _ in range(20):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()
    assert guard.full_checks == 1  # the first step only: no budget earned afterwards
    guard.detach()


def test_replay_puts_back_buffers_rng_and_modes():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 2))
    model.train()
    model[3].eval()  # a mixed tree: each module's own flag comes back
    with torch.no_grad():
        model[3].weight[0, 0] = float("nan")
    stats = [b.clone() for b in model.buffers()]
    rng = torch.get_rng_state()
    found = replay_locate(model, lambda: model(torch.randn(5, 4, generator=torch.Generator())))
    assert found == ("3", "Linear output float32[5, 2]")
    assert all(torch.equal(a, b) for a, b in zip(model.buffers(), stats, strict=True))
    assert torch.equal(torch.get_rng_state(), rng)
    assert [m.training for m in model] == [True, True, True, False]
    assert not any(m._forward_hooks for m in model.modules())


def test_repr():
    assert repr(StepGuard(nn.Linear(2, 2))) == "StepGuard(budget=0.0025, check_grads=True)"
