"""labkit/train/_preflight.py: the logdir layout checked up front, and the first
checkpoint's size estimated from the model and optimizer (checked against real ones)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

from labkit._paths import OutputPathError
from labkit.train import Lab
from labkit.train._preflight import check_logdir, first_checkpoint_bytes, optimizer_states


@pytest.mark.parametrize(
    ("optimizer", "kwargs", "states"),
    [
        ("adam", {}, 2),
        ("adamw", {}, 2),
        (torch.optim.Adam, {}, 2),
        ("sgd", {}, 0),
        ("sgd", {"momentum": 0.9}, 1),
        ("rmsprop", {}, 1),
        (None, {}, 1),
    ],
)
def test_optimizer_states(optimizer, kwargs, states):
    assert optimizer_states(optimizer, kwargs) == states


@pytest.mark.parametrize(("optimizer", "kwargs"), [("adam", {}), ("sgd", {"momentum": 0.9})])
def test_estimate_covers_a_real_first_checkpoint(tmp_path, optimizer, kwargs):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.BatchNorm1d(128), nn.Linear(128, 1))
    x = torch.randn(32, 64)
    lab = Lab(
        model,
        TensorDataset(x, x[:, :1]),
        loss=F.mse_loss,
        optimizer=optimizer,
        optimizer_kwargs=kwargs,
        batch_size=16,
        logdir=tmp_path,
    )
    lab.fit(max_epochs=1, dashboard=False, trainer_kwargs={"enable_progress_bar": False})
    written = (tmp_path / "checkpoints" / "last.ckpt").stat().st_size  # the reference
    estimate = first_checkpoint_bytes(model, optimizer_states(optimizer, kwargs))
    assert estimate <= written <= estimate + (64 << 10)  # plus pickled metadata only


def test_layout_problems_are_named(tmp_path):
    (tmp_path / "tensorboard").write_text("a file")
    with pytest.raises(OutputPathError, match=r"holds a file 'tensorboard' where labkit keeps"):
        check_logdir(tmp_path)
    (tmp_path / "tensorboard").unlink()
    (tmp_path / "run.json").mkdir()
    with pytest.raises(OutputPathError, match=r"holds a folder 'run\.json' where labkit writes"):
        check_logdir(tmp_path)
    (tmp_path / "run.json").rmdir()
    assert check_logdir(tmp_path / "new" / "run") == tmp_path / "new" / "run"
    assert (tmp_path / "new" / "run").is_dir()
