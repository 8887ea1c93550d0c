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
