"""A tiny regression Lab for the fault table, and a model that records whether it ran."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import TensorDataset

import labkit


class Counting(nn.Module):
    """``nn.Linear(4, width)`` that counts its forward calls: 0 means no work was done."""

    def __init__(self, width: int = 1, d_in: int = 4) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(d_in, width)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.fc(x)


def data(n: int = 32, *, target_shape: str = "[N, 1]", d_in: int = 4) -> TensorDataset:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, d_in, generator=g)
    y = x.sum(1, keepdim=True)
    return TensorDataset(x, y if target_shape == "[N, 1]" else y.squeeze(-1))


def lab(logdir: Path, model: nn.Module | None = None, train: Any = None, **kw: Any) -> labkit.Lab:
    return labkit.Lab(
        model if model is not None else Counting(),
        train if train is not None else data(),
        loss=F.mse_loss,
        optimizer="sgd",
        lr=0.01,
        batch_size=8,
        logdir=logdir,
        **kw,
    )


FIT = {"dashboard": False, "launch": "inline", "trainer_kwargs": {"enable_progress_bar": False}}


class FillDisk(pl.Callback):
    """Fills the logdir's filesystem (leaving ``leave`` bytes) on the last batch of ``epoch``."""

    def __init__(self, folder: Path, epoch: int, leave: int = 8192) -> None:
        self.folder, self.epoch, self.leave = folder, epoch, leave

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.current_epoch == self.epoch and trainer.is_last_batch:
            free = shutil.disk_usage(self.folder).free
            with open(self.folder / "ballast", "wb") as f:
                f.write(b"\0" * max(0, free - self.leave))
