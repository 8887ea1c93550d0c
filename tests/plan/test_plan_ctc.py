"""Plans of CTC losses (speech models): ``aten._ctc_loss``'s output shape depends on the
values of ``target_lengths``, which ``FakeTensorMode`` refuses; the plan makes its outputs
from the lengths it knows. Checked against ``labkit.memory`` and torch's MemTracker on the
real step."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit.plan import PlanError
from tests.plan._memtracker import memtracker_peak


class _Acoustic(nn.Module):
    """Frames to per-frame log-probabilities over 6 symbols (blank 0), time first."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(16, 24, batch_first=True)
        self.head = nn.Linear(24, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.head(self.rnn(x)[0]), -1).transpose(0, 1)


class _WithLabels(_Acoustic):
    """The loss inside forward, as Hugging Face's Wav2Vec2ForCTC computes it: labels padded
    with -100, the targets flattened by a mask, the lengths summed from it."""

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        log_probs = super().forward(x)
        mask = labels >= 0
        input_lengths = torch.full((x.shape[0],), x.shape[1], dtype=torch.long)
        return F.ctc_loss(
            log_probs, labels.masked_select(mask), input_lengths, mask.sum(-1), zero_infinity=True
        )


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    x = torch.randn(3, 11, 16)
    targets = torch.tensor([[1, 2, 3, 4], [2, 5, 0, 0], [3, 0, 0, 0]])
    return x, targets, torch.tensor([11, 9, 7]), torch.tensor([4, 2, 1])


def _sgd(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=0.1)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_a_ctc_loss_is_planned_to_the_byte(reduction: str) -> None:
    x, targets, input_lengths, target_lengths = _batch()
    model = _Acoustic()

    def loss(log_probs: torch.Tensor) -> torch.Tensor:
        out = F.ctc_loss(log_probs, targets, input_lengths, target_lengths, reduction=reduction)
        return out.sum()

    plan = labkit.plan(model, x, loss=loss, optimizer=_sgd(model))  # PlanError before
    measured = labkit.memory(model, x, loss=loss, optimizer=_sgd(model), progress=False)
    assert plan.peak_bytes == measured.peak_bytes
    assert plan.peak_bytes == memtracker_peak(model, _sgd(model), (x,), loss)


def test_a_model_computing_ctc_from_its_labels_is_planned_to_the_byte() -> None:
    x, targets, _, target_lengths = _batch()
    labels = torch.where(torch.arange(4) < target_lengths[:, None], targets, -100)
    model = _WithLabels()

    def loss(out: torch.Tensor) -> torch.Tensor:
        return out

    plan = labkit.plan(model, (x, labels), loss=loss, optimizer=_sgd(model))
    measured = labkit.memory(model, (x, labels), loss=loss, optimizer=_sgd(model), progress=False)
    assert plan.peak_bytes == measured.peak_bytes
    assert plan.peak_bytes == memtracker_peak(model, _sgd(model), (x, labels), loss)


def test_target_lengths_computed_from_float_data_still_stop_the_plan_naming_the_op() -> None:
    x, targets, input_lengths, _ = _batch()
    model = _Acoustic()

    def loss(log_probs: torch.Tensor) -> torch.Tensor:
        # values only the data has: the shape of log_alpha cannot be known
        lengths = (log_probs.detach()[:4].exp().sum(-1) > 0).sum(0)
        return F.ctc_loss(log_probs, targets, input_lengths, lengths)

    with pytest.raises(PlanError, match="_ctc_loss"):
        labkit.plan(model, x, loss=loss)


def test_list_lengths_with_a_mean_say_to_pass_tensors() -> None:
    # torch's own ctc_loss copies the list into a tensor's data there, which fakes lack
    x, targets, _, _ = _batch()
    model = _Acoustic()

    def loss(log_probs: torch.Tensor) -> torch.Tensor:
        return F.ctc_loss(log_probs, targets, [11, 9, 7], [4, 2, 1])

    with pytest.raises(PlanError, match="pass them as tensors"):
        labkit.plan(model, x, loss=loss)
    assert all(p.grad is None for p in model.parameters())
