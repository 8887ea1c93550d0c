"""labkit.watch.lightning(): a user's own Trainer recorded, stopped and guarded as Lab.fit is."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

import labkit
from labkit.train.guards import NonFiniteError
from labkit.train.lab import _quiet_lightning
from labkit.train.run import Run
from tests.train._helpers import TinyModule, tensors


def _fit(cb, module, *, batches=8, epochs=1, extra=()):
    x, y = tensors(16)
    data = DataLoader(TensorDataset(x.repeat(batches, 1), y.repeat(batches)), batch_size=16)
    with _quiet_lightning():
        trainer = pl.Trainer(
            max_epochs=epochs,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            enable_checkpointing=False,
            callbacks=[cb, *extra],
        )
        trainer.fit(module, data)
    return trainer


class StopAt(pl.Callback):
    def __init__(self, cb, at):
        self.cb, self.at = cb, at

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, i):
        if i == self.at:
            self.cb.session.stop_file.touch()  # what the dashboard's Stop makes the server do


def test_records_steps_epochs_lr_and_files(tmp_path):
    cb = labkit.watch.lightning(logdir=tmp_path, dashboard=False, log_every=2)
    _fit(cb, TinyModule(), epochs=2)
    run = cb.run
    assert run.status == "finished" and run.source == "lightning"
    assert [s["step"] for s in run.steps] == list(range(1, 17))
    assert [e["epoch"] for e in run.epochs] == [0, 1]
    assert run.config["lr"] == 0.01 and run.config["optimizer"] == "SGD"
    assert Run.load(tmp_path) == run
    assert list((tmp_path / "tensorboard").glob("events.out.tfevents.*"))
    assert not (tmp_path / ".labkit.lock").exists()


def test_stop_file_ends_the_fit_as_stopped_with_a_checkpoint(tmp_path):
    cb = labkit.watch.lightning(logdir=tmp_path, dashboard=False)
    trainer = _fit(cb, TinyModule(), batches=400, extra=[StopAt(cb, 2)])
    assert cb.run.status == "stopped" and trainer.global_step < 400
    assert (tmp_path / "checkpoints" / "last.ckpt").exists()
    assert cb.run.last_checkpoint == str(tmp_path / "checkpoints" / "last.ckpt")


class Broken(TinyModule):
    def training_step(self, batch, i):
        if self.global_step == 3:
            with torch.no_grad():
                self.net[2].weight.fill_(float("nan"))  # nn.Sequential(Linear, ReLU, Dropout, ...)
        return super().training_step(batch, i)


def test_a_nan_in_the_users_module_is_named_by_a_replay_of_its_training_step(tmp_path):
    cb = labkit.watch.lightning(logdir=tmp_path, dashboard=False)
    module = Broken()
    module.net[2] = torch.nn.Linear(16, 16)  # a module with weights between ReLU and the head
    module.net[3] = torch.nn.Linear(16, 2)
    with pytest.raises(NonFiniteError) as info:
        _fit(cb, module)
    assert info.value.step == 3 and info.value.module == "net.2" and info.value.where == "output"
    assert cb.run.status == "failed" and "NonFiniteError" in cb.run.error
    assert Run.load(tmp_path).status == "failed"


def test_bad_options_are_named():
    with pytest.raises(TypeError, match="did you mean 'histogram_every'"):
        labkit.watch.lightning(histogram_evry=3)
    with pytest.raises(TypeError, match="dashboard"):
        labkit.watch.lightning(dashboard="yes")
    cb = labkit.watch.lightning(logdir="runs/x", guard=False)
    assert repr(cb) == "labkit.watch.lightning(logdir='runs/x', WatchOptions(guard=False))"
