"""A random generator the user holds (a module attribute, a module global, a variable the
loss closes over; torch's or NumPy's) is as it was after measuring: the user's next draw is
the one it would have been. Before, every labkit pass advanced it and nothing was said."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import labkit

_GLOBAL = torch.Generator().manual_seed(1)


class _OwnGenerator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.g = nn.Linear(4, 4), torch.Generator().manual_seed(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x + 0.1 * torch.randn(x.shape, generator=self.g))


class _GlobalGenerator(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x + 0.1 * torch.randn(x.shape, generator=_GLOBAL))


def _measure(what: str, model: nn.Module, x: torch.Tensor, **kw: Any) -> None:
    if what == "trace":
        labkit.trace(model, x, repeat=2, progress=False, **kw)
    else:
        labkit.memory(model, x, progress=False, **kw)


@pytest.mark.parametrize("what", ["trace", "memory"])
@pytest.mark.parametrize("where", ["attribute", "global"])
def test_a_models_own_generator_draws_as_if_unmeasured(what: str, where: str) -> None:
    model = _OwnGenerator() if where == "attribute" else _GlobalGenerator()
    g = model.g if isinstance(model, _OwnGenerator) else _GLOBAL
    x = torch.randn(3, 4)
    before = g.get_state().clone()
    _measure(what, model, x)
    assert torch.equal(g.get_state(), before)


def test_a_numpy_generator_the_loss_closes_over_is_put_back() -> None:
    rng = np.random.default_rng(0)
    model, x = nn.Linear(4, 2), torch.randn(3, 4)

    def loss(out: torch.Tensor) -> torch.Tensor:  # a random target, drawn by the loss
        return (out - torch.from_numpy(rng.standard_normal(out.shape)).float()).pow(2).mean()

    expected = np.random.default_rng(0).standard_normal(3)
    labkit.trace(model, x, loss=loss, repeat=2, progress=False)
    assert np.array_equal(rng.standard_normal(3), expected)
