from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from labkit.train._callback_group import CallbackGroup
from labkit.train.lab import _quiet_lightning
from tests.train._helpers import TinyModule, datasets


class Recorder(pl.Callback):
    def __init__(self, name: str, calls: list) -> None:
        self.name, self.calls = name, calls

    @property
    def state_key(self) -> str:
        return f"Recorder[{self.name}]"

    def on_train_batch_start(self, trainer, pl_module, batch, i):
        self.calls.append((self.name, "batch_start", i))

    def state_dict(self):
        return {"seen": len(self.calls)}

    def load_state_dict(self, state):
        self.calls.append((self.name, "loaded", state["seen"]))


class EpochEnd(pl.Callback):
    def __init__(self, calls: list) -> None:
        self.calls = calls

    def on_train_epoch_end(self, trainer, pl_module):
        self.calls.append(("epoch_end", "epoch_end", trainer.current_epoch))


def fit(callbacks, tmp_path, epochs=1, ckpt_path=None):
    with _quiet_lightning():
        trainer = pl.Trainer(
            max_epochs=epochs,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            limit_train_batches=2,
            enable_checkpointing=False,
            default_root_dir=str(tmp_path),
            callbacks=callbacks,
        )
        trainer.fit(TinyModule(), DataLoader(datasets()[0], batch_size=16), ckpt_path=ckpt_path)
    return trainer


def test_members_are_called_in_order_only_for_hooks_they_override(tmp_path):
    calls: list = []
    group = CallbackGroup([Recorder("a", calls), EpochEnd(calls), Recorder("b", calls)])
    assert group.on_train_epoch_end == group.callbacks[1].on_train_epoch_end  # one member
    assert "on_before_backward" not in vars(group)  # no member: Lightning's no-op stays
    trainer = fit([group], tmp_path)
    assert calls == [
        ("a", "batch_start", 0),
        ("b", "batch_start", 0),
        ("a", "batch_start", 1),
        ("b", "batch_start", 1),
        ("epoch_end", "epoch_end", 0),
    ]
    ckpt = tmp_path / "g.ckpt"
    trainer.save_checkpoint(str(ckpt))
    state = torch.load(ckpt, weights_only=True)["callbacks"]["CallbackGroup"]
    assert state == {"Recorder[a]": {"seen": 5}, "Recorder[b]": {"seen": 5}}
    again: list = []  # resuming hands each member its own state
    fit(
        [CallbackGroup([Recorder("a", again), Recorder("b", again)])],
        tmp_path,
        epochs=2,
        ckpt_path=str(ckpt),
    )
    assert again[:2] == [("a", "loaded", 5), ("b", "loaded", 5)]
    assert again[2:] == [
        ("a", "batch_start", 0),
        ("b", "batch_start", 0),
        ("a", "batch_start", 1),
        ("b", "batch_start", 1),
    ]


def test_members_need_distinct_state_keys():
    with pytest.raises(ValueError, match=r"distinct state keys, got \['Recorder\[x\]', "):
        CallbackGroup([Recorder("x", []), Recorder("x", [])])
