from __future__ import annotations

import pytest
import torch
from torch import nn

from labkit.train import Lab, NonFiniteError, ShapeCheckError
from labkit.train.guards import NonFiniteGuard, dry_run
from labkit.train.module import default_step
from tests.train._helpers import LOSS, datasets


def test_dry_run_names_first_module_and_shapes():
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(12, 2))  # 16 != 12
    batch = (torch.zeros(4, 8), torch.zeros(4, dtype=torch.long))
    rng = torch.get_rng_state()
    with pytest.raises(ShapeCheckError) as info:
        dry_run(model, batch, step=default_step, loss=LOSS)
    msg = str(info.value)
    assert "module '2' (Linear)" in msg and "[4, 16]" in msg and "one train batch" in msg
    assert torch.equal(torch.get_rng_state(), rng) and model.training


def test_dry_run_names_loss_shapes():
    model = nn.Linear(8, 3)
    batch = (torch.zeros(4, 8), torch.zeros(5, dtype=torch.long))
    with pytest.raises(ShapeCheckError, match=r"output float32\[4, 3\] and target int64\[5\]"):
        dry_run(model, batch, step=default_step, loss=LOSS)


def test_fit_reports_mismatch_before_training(tmp_path):
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(12, 2))
    lab = Lab(model, datasets(), loss=LOSS, logdir=tmp_path)
    with pytest.raises(ShapeCheckError, match="module '2'"):
        lab.fit(max_epochs=1, dashboard=False)
    assert not (tmp_path / "checkpoints").exists()  # nothing trained
    assert lab.last_run.status == "failed"


class Blowup(nn.Module):
    """Multiplies by inf once its (trainable) scale passes a threshold."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.calls = 0
        self.after = after

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x * float("inf") if self.calls > self.after else x


def test_nonfinite_guard_names_step_and_module(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(8, 16), nn.Sequential(nn.ReLU(), Blowup(after=4)), nn.Linear(16, 2)
    )
    lab = Lab(model, datasets(), loss=LOSS, batch_size=16, logdir=tmp_path)
    with pytest.raises(NonFiniteError) as info:
        lab.fit(max_epochs=2, dashboard=False, dry_run=False)
    err = info.value
    assert err.step == 4 and err.module == "1.1" and err.where == "output"
    assert "non-finite loss" in str(err) and "module '1.1'" in str(err)
    assert repr(NonFiniteGuard(every=2)) == "NonFiniteGuard(every=2, check_grads=True)"


class _NanGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * float("nan")


class NanGradAfter(nn.Module):
    """Identity whose backward turns the gradient into NaN from call ``after`` on."""

    def __init__(self, after: int) -> None:
        super().__init__()
        self.after, self.calls = after, 0

    def forward(self, x):
        self.calls += 1
        return _NanGrad.apply(x) if self.calls > self.after else x


def test_nonfinite_gradient_with_finite_loss_is_caught(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), NanGradAfter(after=3), nn.Linear(16, 2))
    lab = Lab(model, datasets(), loss=LOSS, batch_size=16, logdir=tmp_path)
    with pytest.raises(NonFiniteError) as info:
        lab.fit(max_epochs=1, dashboard=False, dry_run=False)
    assert info.value.step == 3 and "non-finite gradient at step 3" in str(info.value)


def test_huge_but_finite_gradients_do_not_stop_training():
    from types import SimpleNamespace

    net = nn.Linear(4, 4)
    net.weight.grad = torch.full((4, 4), 3e30)  # its norm overflows float32; no value is inf
    net.bias.grad = torch.zeros(4)
    net.last_loss = torch.tensor(1.0)
    guard, trainer = NonFiniteGuard(), SimpleNamespace(global_step=0, current_epoch=0)
    guard.on_before_optimizer_step(trainer, net, None)  # no error
    net.weight.grad[0, 0] = float("inf")
    with pytest.raises(NonFiniteError, match="non-finite gradient at step 0"):
        guard.on_before_optimizer_step(trainer, net, None)
    net.weight.grad[0, 0], net.last_loss = 0.0, torch.tensor(float("nan"))
    with pytest.raises(NonFiniteError, match=r"non-finite loss \(nan\) at step 0"):
        guard.on_before_optimizer_step(trainer, net, None)
