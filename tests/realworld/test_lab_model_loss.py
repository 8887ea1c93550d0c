"""Lab trains models that compute their own loss (``loss="model"``), the way research code
is written: a Hugging Face model given its labels (``model(**batch).loss``) and nanoGPT's
``logits, loss = model(x, y)``. The reference is the same loop written by hand."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

import labkit
from labkit.train.module import output_loss
from tests.realworld.models import gpt

pytestmark = pytest.mark.slow


class Tokens(Dataset):  # a tokenized dataset: each item a dict, as datasets' map() gives
    def __init__(self, ids: torch.Tensor, mask: torch.Tensor, labels: torch.Tensor) -> None:
        self.ids, self.mask, self.labels = ids, mask, labels

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.labels[i]}


def _hand_loop(model: torch.nn.Module, batches: list, lr: float) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for b in batches:
        opt.zero_grad()
        out = model(**b) if isinstance(b, dict) else model(*b)
        loss = out.loss if hasattr(out, "loss") else out[1]
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_a_hugging_face_model_given_labels_trains_on_its_own_loss(tmp_path) -> None:
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    model = BertForSequenceClassification(
        BertConfig(  # dropout off: the loops compare exactly
            vocab_size=64,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
            num_labels=3,
            hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0,
        )
    )
    torch.manual_seed(1)
    ids, mask = torch.randint(0, 64, (32, 8)), torch.ones(32, 8, dtype=torch.long)
    labels = torch.randint(0, 3, (32,))
    data = Tokens(ids, mask, labels)
    twin = type(model)(model.config)
    twin.load_state_dict(model.state_dict())
    loader = DataLoader(data, batch_size=16)  # in order: the hand loop's batches
    lab = labkit.Lab(
        model,
        (loader, loader),
        loss="model",
        optimizer="sgd",
        lr=0.5,
        metrics={"acc": lambda out, y: (out.logits.argmax(-1) == y).float().mean()},
        logdir=tmp_path,
    )
    assert "loss=output_loss" in repr(lab)
    run = lab.fit(max_epochs=1, dashboard=False)
    assert run.status == "finished", run.error
    expected = _hand_loop(twin, list(loader), lr=0.5)
    got = [s["loss"] for s in run.steps]
    assert got == pytest.approx(expected, rel=1e-5), (got, expected)
    assert "val_acc" in run.epochs[-1]
    for a, b in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-6)  # the user's model is the one trained


def test_nanogpt_forward_x_y_returns_logits_and_loss(tmp_path) -> None:
    case = gpt(0, batch=8, dropout=0.0)
    model = case.model
    torch.manual_seed(2)
    x, y = torch.randint(0, 64, (16, 8)), torch.randint(0, 64, (16, 8))
    twin = type(model)(model.config)
    twin.load_state_dict(model.state_dict())
    loader = DataLoader(TensorDataset(x, y), batch_size=8)
    lab = labkit.Lab(
        model, (loader, loader), loss="model", optimizer="sgd", lr=0.1, logdir=tmp_path
    )
    run = lab.fit(max_epochs=1, dashboard=False)
    assert run.status == "finished", run.error
    expected = _hand_loop(twin, [(x[:8], y[:8]), (x[8:], y[8:])], lr=0.1)
    assert [s["loss"] for s in run.steps] == pytest.approx(expected, rel=1e-5)
    t = lab.trace(repeat=1)  # the same step traced: its loss is the model's
    assert t.meta.backward


def test_an_output_without_a_loss_names_the_fix() -> None:
    with pytest.raises(TypeError, match=r"with no loss in it .* pass loss=fn\(output, target\)"):
        output_loss(torch.randn(4, 3))
    with pytest.raises(ValueError, match=r'a loss is fn\(output, target\), or "model"'):
        labkit.Lab(torch.nn.Linear(2, 1), None, loss="mse")
    with torch.no_grad():  # in a training step (grad on) the loss must also require grad
        assert output_loss((torch.randn(2, 3), torch.tensor(1.5))).item() == 1.5
        assert output_loss({"loss": torch.tensor([2.0]), "logits": torch.zeros(2)}).item() == 2.0
