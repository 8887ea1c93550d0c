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


def _regression(n: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.randn(n, 3, generator=torch.Generator().manual_seed(0))
    return x, x.sum(1)


@pytest.mark.parametrize(
    ("model", "target", "loss", "message"),
    [
        (
            nn.Linear(3, 1),
            "[N]",
            nn.functional.mse_loss,
            r"output float32\[6, 1\] and target "
            r"float32\[6\], which broadcast to \[6, 6\].*mse_loss\(out\.squeeze\(-1\), y\)",
        ),
        (nn.Linear(3, 1), "[N]", nn.functional.l1_loss, r"l1_loss\(out\.squeeze\(-1\), y\)"),
        (
            nn.Linear(3, 1),
            "[N]",
            lambda o, t: ((o - t) ** 2).mean(),
            r"<lambda>\(output, target\).*apply out\.squeeze\(-1\) to the output inside the loss",
        ),
        (
            nn.Sequential(nn.Linear(3, 1), nn.Flatten(0)),
            "[N, 1]",
            nn.functional.mse_loss,
            r"output float32\[6\] and target float32\[6, 1\].*squeeze the target's last dim",
        ),
    ],
)
def test_dry_run_refuses_a_loss_that_broadcasts(model, target, loss, message):
    x, y = _regression()
    batch = (x, y if target == "[N]" else y[:, None])
    with pytest.raises(ShapeCheckError, match=message):
        dry_run(model, batch, step=default_step, loss=loss)


@pytest.mark.parametrize(
    ("model", "y", "loss"),
    [
        (nn.Linear(3, 1), "float", lambda o, t: nn.functional.mse_loss(o.squeeze(-1), t)),
        (nn.Linear(3, 1), "float[N,1]", nn.functional.mse_loss),
        (nn.Linear(3, 4), "long", nn.functional.cross_entropy),  # [N, C] vs [N]: no broadcast
        (nn.Linear(3, 1), "float", lambda o, t: nn.functional.mse_loss(o.view(-1), t)),
    ],
)
def test_dry_run_accepts_losses_that_line_shapes_up(model, y, loss):
    x, t = _regression()
    target = {"float": t, "float[N,1]": t[:, None], "long": (t > 0).long()}[y]
    dry_run(model, (x, target), step=default_step, loss=loss)


def test_dry_run_passes_on_the_losses_other_warnings():
    def noisy(o, t):
        import warnings

        warnings.warn("my loss warns about something else", UserWarning, stacklevel=1)
        return nn.functional.mse_loss(o, t)

    x, t = _regression()
    with pytest.warns(UserWarning, match="something else"):
        dry_run(nn.Linear(3, 1), (x, t[:, None]), step=default_step, loss=noisy)


def test_check_loaders_says_drop_last_and_batch_size():
    from torch.utils.data import DataLoader, TensorDataset

    from labkit.train.data import PairDataModule
    from labkit.train.guards import check_loaders

    ds = TensorDataset(*_regression(6))
    full = DataLoader(ds, batch_size=4)
    check_loaders(PairDataModule(full, full))
    with pytest.raises(
        ValueError,
        match=r"the val loader is empty: its TensorDataset has 6 "
        r"samples \(batch_size=8 and drop_last=True\)",
    ):
        check_loaders(PairDataModule(full, DataLoader(ds, batch_size=8, drop_last=True)))


def _contiguous_nan(w: torch.Tensor) -> torch.Tensor:
    g = torch.zeros_like(w)
    g.view(-1)[-1] = float("nan")  # the last element read from memory
    return g


def _transposed_inf(w: torch.Tensor) -> torch.Tensor:
    g = torch.zeros(w.shape[1], w.shape[0], dtype=w.dtype)
    g[-1, 0] = float("inf")
    return g.t()  # the parameter's shape, not contiguous: read by torch, not from memory


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("bad", [_contiguous_nan, _transposed_inf])
def test_the_every_step_gradient_check_sees_any_gradient(dtype, bad):
    """Budget 0: after the first step only the cheap every-step check runs; it must see it."""
    from labkit.train._step_guard import StepGuard

    torch.manual_seed(0)
    model = nn.Linear(4, 3, bias=False).to(dtype)  # one parameter: the one checked each step
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    guard = StepGuard(model, budget=0.0).attach(opt)
    x = torch.randn(5, 4, dtype=dtype)
    with pytest.raises(NonFiniteError) as info:
        for step in range(1, 5):
            opt.zero_grad()
            model(x).square().mean().backward()
            if step == 3:
                model.weight.grad = bad(model.weight)
            opt.step()
            guard.stepped(step)
    guard.detach()
    assert info.value.step == 3 and info.value.where == "gradient"
    assert guard.full_checks == 1  # the first step's: the cheap check found it
