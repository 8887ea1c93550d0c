"""Lab with the user's own LightningModule and LightningDataModule (how Lightning code is
written: ``self.log`` in the steps, ``configure_optimizers``, ``save_hyperparameters``):
``fit`` trains it and ``Lab.trace`` traces its ``training_step``, before and after a fit."""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.flop_counter import FlopCounterMode

import labkit

pytestmark = pytest.mark.slow


class LitClassifier(pl.LightningModule):
    def __init__(self, hidden: int = 32, lr: float = 1e-2) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(10, hidden), nn.ReLU(), nn.Linear(hidden, 3))

    def forward(self, x):  # type: ignore[no-untyped-def]
        return self.net(x)

    def training_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return {"loss": loss}

    def validation_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        self.log("val_loss", F.cross_entropy(self(x), y))

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class Data(pl.LightningDataModule):
    def setup(self, stage: str) -> None:
        g = torch.Generator().manual_seed(0)
        x = torch.randn(256, 10, generator=g)
        y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
        torch.randperm(4)  # a random_split here draws from the global generator, as they do
        self.train, self.val = TensorDataset(x[:192], y[:192]), TensorDataset(x[192:], y[192:])

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=32)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val, batch_size=32)


def _flops_of_training_step(module: LitClassifier, batch) -> int:  # type: ignore[no-untyped-def]
    twin = copy.deepcopy(module)
    twin.log = lambda *a, **k: None  # type: ignore[method-assign]
    with FlopCounterMode(display=False) as fc:
        twin.training_step(batch, 0)["loss"].backward()
    return fc.get_total_flops()


def test_lab_traces_a_lightning_modules_training_step_before_and_after_fit(tmp_path) -> None:
    torch.manual_seed(0)
    module = LitClassifier()
    lab = labkit.Lab(module, Data(), logdir=tmp_path)
    before = {k: v.clone() for k, v in module.state_dict().items()}
    rng = torch.get_rng_state()
    t = lab.trace(repeat=1)
    assert torch.equal(rng, torch.get_rng_state())  # setup's random_split drew from a fork
    data = Data()
    data.setup("fit")
    batch = next(iter(data.train_dataloader()))
    assert t.total_flops == _flops_of_training_step(module, batch)
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    assert all(p.grad is None for p in module.parameters())
    run = lab.fit(max_epochs=2, dashboard=False)
    assert run.status == "finished", run.error
    assert "val_loss" in run.epochs[-1]
    after = lab.trace(repeat=1)  # the module now holds a finished Trainer: self.log raised
    assert after.total_flops == t.total_flops
    assert "log" not in module.__dict__  # the no-op logging was taken off again
