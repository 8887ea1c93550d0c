"""Fault table, ``Lab(loss="model")`` takes only a loss: a ``(pred, None)`` output (nanoGPT's
``GPT(x)`` without targets) and a one-element prediction are refused before any weight
changes, naming the ``None`` and how to pass the targets; with its targets nanoGPT trains
on the loss it returns, at batch size 1 too."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import labkit
from labkit.train import ShapeCheckError
from tests.faults._lab import FIT
from tests.realworld.models import GPT, GPTConfig


def _gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(block_size=8, vocab_size=32, n_layer=1, n_head=2, n_embd=16))


def _tokens(n: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(3)
    return torch.randint(0, 32, (n, 8), generator=g), torch.randint(0, 32, (n, 8), generator=g)


def _weights(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


class PredOrLoss(nn.Module):
    """``forward(x, y=None) -> (pred, loss)``: ``(pred, None)`` without targets, nanoGPT-style."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        pred = self.fc(x)
        return pred, None if y is None else nn.functional.mse_loss(pred, y)


class Pred(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)  # [1, 1] at batch size 1: one element, and still a prediction


def _fit(model: nn.Module, loader: DataLoader, logdir: Path, **kw: object) -> labkit.Lab:
    the_lab = labkit.Lab(model, loader, loss="model", optimizer="sgd", lr=0.1, logdir=logdir)
    the_lab.fit(max_epochs=1, **FIT, **kw)  # type: ignore[arg-type]
    return the_lab


@pytest.mark.parametrize("dry_run", [True, False])
def test_nanogpt_without_targets_is_refused_naming_the_none(tmp_path: Path, dry_run: bool) -> None:
    model, (x, _) = _gpt(), _tokens()
    before = _weights(model)
    loader = DataLoader(TensorDataset(x), batch_size=1)  # GPT(x): (logits, None)
    # the dry run refuses it before training; without one, the first step does (no backward)
    error = ShapeCheckError if dry_run else TypeError
    with pytest.raises(error) as err:
        _fit(model, loader, tmp_path, dry_run=dry_run)
    msg = str(err.value)
    assert "(Tensor [1, 1, 32] float32, None)" in msg
    assert "second element (the loss of a (logits, loss) pair) is None" in msg
    assert "(x, y) batches call model(x, y) (nanoGPT's forward(idx, targets))" in msg
    assert _same(_weights(model), before)
    assert not (tmp_path / "checkpoints" / "last.ckpt").exists()


def test_nanogpt_with_targets_trains_on_its_loss_at_batch_size_1(tmp_path: Path) -> None:
    model, (x, y) = _gpt(), _tokens()
    twin = _gpt()  # the same loop written by hand: its losses are the reference
    opt = torch.optim.SGD(twin.parameters(), lr=0.1)
    expected = []
    for i in range(len(x)):
        opt.zero_grad()
        _, loss = twin(x[i : i + 1], y[i : i + 1])
        loss.backward()
        opt.step()
        expected.append(loss.item())
    the_lab = _fit(model, DataLoader(TensorDataset(x, y), batch_size=1), tmp_path)
    run = the_lab.runs[-1]
    assert run.status == "finished", run.error
    assert run.losses == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("dry_run", [True, False])
def test_pred_none_at_batch_size_1_never_trains_on_the_prediction(
    tmp_path: Path, dry_run: bool
) -> None:
    # the case: pred is one element, once taken as "the one scalar of a tuple"
    model = PredOrLoss()
    before = _weights(model)
    loader = DataLoader(TensorDataset(torch.randn(4, 4)), batch_size=1)
    the_lab = labkit.Lab(model, loader, loss="model", optimizer="sgd", lr=0.1, logdir=tmp_path)
    with pytest.raises(
        ShapeCheckError if dry_run else TypeError,
        match=r"\(Tensor \[1, 1\] "
        r"float32, None\), and its second element .* is None",
    ):
        the_lab.fit(max_epochs=1, dry_run=dry_run, **FIT)  # type: ignore[arg-type]
    assert _same(_weights(model), before)
    run = the_lab.runs[-1]
    assert run.status == "failed" and run.steps == [] and "is None" in (run.error or "")


def test_pred_with_targets_trains(tmp_path: Path) -> None:
    model = PredOrLoss()
    x = torch.randn(4, 4, generator=torch.Generator().manual_seed(1))
    the_lab = _fit(
        model, DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=1), tmp_path
    )
    assert the_lab.runs[-1].status == "finished" and len(the_lab.runs[-1].losses) == 4


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_one_element_prediction_is_never_a_loss(tmp_path: Path, dry_run: bool) -> None:
    model = Pred()
    before = _weights(model)
    loader = DataLoader(TensorDataset(torch.randn(4, 4)), batch_size=1)
    said = r"returned a tensor \[1, 1\] float32, with no loss in it"
    with pytest.raises(ShapeCheckError if dry_run else TypeError, match=said):
        _fit(model, loader, tmp_path, dry_run=dry_run)
    assert _same(_weights(model), before)


class ConstantSecond(nn.Module):
    """``(pred, count)``: the second element is 0-dim but no loss (it needs no grad)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.fc(x), torch.tensor(float(x.shape[0]))


def test_a_second_element_that_needs_no_grad_is_refused_at_the_first_step(
    tmp_path: Path,
) -> None:
    model = ConstantSecond()
    before = _weights(model)
    loader = DataLoader(TensorDataset(torch.randn(4, 4)), batch_size=1)
    with pytest.raises(TypeError, match=r"does not require grad"):
        _fit(model, loader, tmp_path)
    assert _same(_weights(model), before)
