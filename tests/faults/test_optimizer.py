"""Fault table, optimizers: one that holds none or only some of the trained parameters is
refused before the first step, naming the parameters it misses (issue 30, item 1)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import labkit
from labkit.train._optimizer import OptimizerCoverageError
from tests.faults._lab import FIT, data


def lab(logdir: Path, model: nn.Module, *, optimizer: object, train: object = None) -> labkit.Lab:
    return labkit.Lab(
        model,
        data(),
        loss=torch.nn.functional.mse_loss,
        optimizer=optimizer,
        batch_size=8,
        logdir=logdir,
    )


class Two(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.head(self.body(x).relu())


def test_an_optimizer_of_another_model_is_refused_naming_every_missed_parameter(
    tmp_path: Path,
) -> None:
    model, other = Two(), Two()
    factory = lambda ps: torch.optim.SGD(other.parameters(), lr=0.1)  # noqa: E731
    with pytest.raises(OptimizerCoverageError) as info:
        lab(tmp_path, model, optimizer=factory).fit(max_epochs=1, **FIT)
    message = str(info.value)
    assert "holds none of the model's trainable parameters" in message
    assert "body.weight, body.bias, head.weight, head.bias" in message
    assert model.calls == 0 and not (tmp_path / "run.json").exists()
    assert not (tmp_path / "checkpoints").exists()


def test_an_optimizer_over_part_of_the_model_names_the_rest(tmp_path: Path) -> None:
    model = Two()
    opt = torch.optim.Adam(model.head.parameters(), lr=0.1)
    with pytest.raises(
        OptimizerCoverageError,
        match=r"holds 2 of 4 .* misses body\.weight, "
        r"body\.bias.*requires_grad_\(False\)",
    ):
        lab(tmp_path, model, optimizer=opt).fit(max_epochs=1, **FIT)
    assert model.calls == 0


def test_an_optimizer_holding_foreign_parameters_too_is_refused(tmp_path: Path) -> None:
    model, stray = Two(), nn.Parameter(torch.zeros(3, 3))
    opt = torch.optim.SGD([*model.parameters(), stray], lr=0.1)
    with pytest.raises(OptimizerCoverageError, match=r"1 parameter\(s\) that are not .*\[3, 3\]"):
        lab(tmp_path, model, optimizer=opt).fit(max_epochs=1, **FIT)
    assert model.calls == 0


def test_freezing_what_the_optimizer_leaves_out_is_accepted(tmp_path: Path) -> None:
    model = Two()
    model.body.requires_grad_(False)
    opt = torch.optim.SGD(model.head.parameters(), lr=0.01)
    run = lab(tmp_path, model, optimizer=opt, train=data()).fit(max_epochs=1, **FIT)
    assert run.status == "finished" and model.calls > 0
