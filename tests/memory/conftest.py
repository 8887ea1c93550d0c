from __future__ import annotations

import itertools

import torch
from torch import nn
from torch.optim import optimizer as _optim

from tests.trace.conftest import assert_clean as _assert_trace_clean


def assert_clean(model: nn.Module) -> None:
    """No module hooks, modes, saved-tensor hooks, optimizer or gradient hooks left."""
    _assert_trace_clean(model)
    assert not _optim._global_optimizer_pre_hooks
    assert not _optim._global_optimizer_post_hooks
    for p in model.parameters():
        assert not p._post_accumulate_grad_hooks


class MLP(nn.Sequential):
    """Linear and Tanh only: every tensor they keep is one Python can see."""

    def __init__(self, sizes: tuple[int, ...] = (64, 256, 128, 10)) -> None:
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), nn.Tanh()]
        super().__init__(*layers[:-1])


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, 4 * d)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(self.act(self.fc1(x)))


class Stack(nn.Module):
    """Repeated residual blocks: checkpointing candidates."""

    def __init__(self, d: int = 32, n: int = 3) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.head = nn.Linear(d, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.head(x)
