"""Tiny models shared by the optimize tests."""

from __future__ import annotations

import pytest
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d: int = 32, hidden: int = 64, classes: int = 4) -> None:
        super().__init__()
        self.blocks = nn.Sequential(
            nn.Sequential(nn.Linear(d, hidden), nn.GELU()),
            nn.Sequential(nn.Linear(hidden, hidden), nn.GELU()),
        )
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.features(x)).flatten(1))


@pytest.fixture
def mlp() -> MLP:
    torch.manual_seed(0)
    return MLP()


@pytest.fixture
def x() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(8, 32)


@pytest.fixture
def convnet() -> ConvNet:
    torch.manual_seed(0)
    net = ConvNet()
    # give BatchNorm non-trivial statistics, as a trained net has
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
    return net


def state_equal(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(
        type(sa[k]) is type(sb[k]) and torch.equal(sa[k], sb[k]) for k in sa
    )
