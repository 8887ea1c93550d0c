from __future__ import annotations

import time

import lightning.pytorch as pl
from torch.utils.data import DataLoader, TensorDataset

from labkit.train._callback import FILE_CHECK_S, LabCallback
from labkit.train.lab import _quiet_lightning
from tests.train._helpers import TinyModule, tensors


class TouchAt(pl.Callback):
    """Creates the stop file at batch ``at`` (as ``lab.stop()`` does for other processes)."""

    def __init__(self, path, at: int) -> None:
        self.path, self.at, self.touched = path, at, 0.0

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, i):
        if i == self.at:
            self.path.touch()
            self.touched = time.perf_counter()


def test_stop_file_stops_every_rank_soon_and_keeps_a_checkpoint(tmp_path):
    events: list = []
    stop = tmp_path / "STOP"
    lab_cb = LabCallback(events.append, stop_file=stop, logdir=tmp_path)
    touch = TouchAt(stop, at=3)
    looks: list[bool] = []  # what each look at the stop file after the touch found
    look = lab_cb.poll.file_seen

    def spy(now: float) -> bool:
        before = lab_cb.poll.checked
        seen = look(now)
        if lab_cb.poll.checked != before and touch.touched:
            looks.append(seen)
        return seen

    lab_cb.poll.file_seen = spy  # type: ignore[method-assign]
    x, y = tensors(8)
    data = DataLoader(TensorDataset(x.repeat(2000, 1), y.repeat(2000)), batch_size=2)
    with _quiet_lightning():
        trainer = pl.Trainer(
            max_epochs=1,
            logger=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            enable_checkpointing=False,
            callbacks=[touch, lab_cb],
            default_root_dir=str(tmp_path),
        )
        t0 = time.perf_counter()
        trainer.fit(TinyModule(), data)
    assert lab_cb.stopped and trainer.global_step < 8000
    # seen at the first look at the file after the touch (looks are FILE_CHECK_S apart),
    # not at the end of the epoch; the time limit is only a hang guard
    assert looks == [True]
    assert time.perf_counter() - touch.touched < FILE_CHECK_S + 60, time.perf_counter() - t0
    assert (tmp_path / "checkpoints" / "last.ckpt").exists()
    assert events[-1]["type"] == "end" and events[-1]["status"] == "stopped"
    assert any(e["type"] == "checkpoint" for e in events)
