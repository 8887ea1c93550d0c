from __future__ import annotations

import pytest
import torch
from torch import nn

from labkit.train.module import LabModule, batch_size_of, default_step, make_optimizer
from tests.train._helpers import LOSS, accuracy


def test_repr():
    m = LabModule(nn.Linear(4, 2), loss=LOSS, optimizer="sgd", lr=0.1, metrics={"acc": accuracy})
    assert (
        repr(m)
        == "LabModule(net=Linear, loss=cross_entropy, optimizer='sgd', lr=0.1, metrics=['acc'])"
    )


def test_optimizers():
    p = [nn.Parameter(torch.zeros(2))]
    assert isinstance(make_optimizer("adamw", p, 0.1, {"weight_decay": 0.0}), torch.optim.AdamW)
    assert isinstance(make_optimizer(torch.optim.SGD, p, 0.1, None), torch.optim.SGD)
    assert isinstance(
        make_optimizer(lambda ps: torch.optim.SGD(ps, lr=1), p, 0.1, None), torch.optim.SGD
    )
    with pytest.raises(ValueError, match="unknown optimizer 'lion'"):
        make_optimizer("lion", p, 0.1, None)


def test_default_step_and_batch_size():
    net = nn.Linear(3, 1)
    out, _ = default_step(net, (torch.zeros(5, 3), torch.ones(5)))
    assert out.shape == (5, 1) and batch_size_of((torch.zeros(5, 3), torch.ones(5))) == 5
    with pytest.raises(TypeError, match="cannot split a batch of type int"):
        default_step(net, 3)


def test_a_dict_batch_gives_keyword_inputs_and_its_target():
    class Tagger(nn.Module):  # Hugging Face style: keyword inputs
        def forward(self, input_ids, attention_mask):
            return input_ids.float() * attention_mask

    ids, mask, labels = torch.arange(6).view(2, 3), torch.ones(2, 3), torch.tensor([0, 1])
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    out, target = default_step(Tagger(), batch)
    assert torch.equal(out, ids.float()) and target is labels
    out, target = default_step(nn.Linear(3, 1), {"x": torch.zeros(4, 3), "y": torch.ones(4)})
    assert out.shape == (4, 1) and torch.equal(target, torch.ones(4))
    with pytest.raises(
        TypeError,
        match=r"cannot find the target in a dict batch with keys "
        r"\['attention_mask', 'input_ids'\]: name it one of y, target",
    ):
        default_step(Tagger(), {"input_ids": ids, "attention_mask": mask})


@pytest.mark.parametrize("resumed_epoch, kept", [(0, True), (1, False)])
def test_epoch_means_continue_after_a_mid_epoch_checkpoint(resumed_epoch, kept):
    """A Stop checkpoint mid-epoch carries the epoch's sums; a new epoch starts from zero."""
    import lightning.pytorch as pl

    before = LabModule(nn.Linear(4, 2), loss=LOSS)
    before._means["train"].add({"loss": torch.tensor(2.0)}, 10)
    checkpoint: dict = {}
    before.on_save_checkpoint(checkpoint)  # at epoch 0
    after = LabModule(nn.Linear(4, 2), loss=LOSS)
    after.on_load_checkpoint(checkpoint)
    trainer = pl.Trainer(
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    trainer.fit_loop.epoch_progress.current.completed = resumed_epoch
    after.trainer = trainer
    after.on_train_epoch_start()
    after._means["train"].add({"loss": torch.tensor(4.0)}, 10)
    assert float(after._means["train"].means()["loss"]) == (3.0 if kept else 4.0)
