"""Tiny models and data shared by the training tests."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def mlp(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 2))


def tensors(n: int = 128, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 8, generator=g)
    return x, (x.sum(1) > 0).long()


def datasets(n: int = 128) -> tuple[TensorDataset, TensorDataset]:
    x, y = tensors(n)
    k = n * 3 // 4
    return TensorDataset(x[:k], y[:k]), TensorDataset(x[k:], y[k:])


def loaders(n: int = 128, batch_size: int = 16) -> tuple[DataLoader, DataLoader]:
    train, val = datasets(n)
    return DataLoader(train, batch_size=batch_size), DataLoader(val, batch_size=batch_size)


def accuracy(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (out.argmax(1) == y).float().mean()


LOSS = F.cross_entropy


class TinyModule(pl.LightningModule):
    """A hand-written LightningModule around :func:`mlp` (for callback tests)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()

    def training_step(self, batch, i):  # type: ignore[no-untyped-def]
        x, y = batch
        return LOSS(self.net(x), y)

    def configure_optimizers(self):  # type: ignore[no-untyped-def]
        return torch.optim.SGD(self.parameters(), lr=0.01)
