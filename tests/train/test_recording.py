"""StepRecorder (one way every run's steps become events) and the lr a run records."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from labkit.train.recording import StepRecorder, StopPoll, learning_rates, read_values
from tests.train._helpers import datasets, mlp


def test_steps_are_kept_as_tensors_and_read_at_the_flush():
    events: list = []
    rec = StepRecorder(events.append, flush_interval=3600)
    losses = [torch.tensor(0.5 + i, requires_grad=False) for i in range(3)]
    for i, loss in enumerate(losses):
        assert rec.add_step(i + 1, 0, loss, 0.01, 0.0, 4, {"acc": torch.tensor(0.25 * i)}) == []
    assert events == []  # nothing read before the flush
    steps = rec.flush()
    assert [s["loss"] for s in steps] == [0.5, 1.5, 2.5]
    assert [s["acc"] for s in steps] == [0.0, 0.25, 0.5]
    assert events[0]["type"] == "steps" and events[0]["steps"] == steps
    assert rec.flush() == []


def test_a_flush_interval_of_zero_reads_every_step():
    events: list = []
    rec = StepRecorder(events.append, flush_interval=0)
    assert rec.add_step(1, 0, 0.5, 0.0, 0.0, 0)[0]["loss"] == 0.5
    assert len(events) == 1


def test_read_values_mixes_numbers_and_tensors():
    vals = [1, torch.tensor(2.0), 3.5, torch.tensor([4.0], dtype=torch.float64)]
    assert read_values(vals) == [1.0, 2.0, 3.5, 4.0]


def test_tensorboard_scalars_every_log_every(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path))
    rec = StepRecorder(lambda e: None, flush_interval=3600, writer=writer, log_every=2)
    for step in range(1, 6):
        rec.add_step(step, 0, float(step), 0.0, 0.0, 0, {"lr": 0.1})
    rec.end("finished", 5)
    writer.close()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    # every log_every-th step, and the run's last one
    assert [e.step for e in acc.Scalars("train_loss")] == [2, 4, 5]
    assert [e.value for e in acc.Scalars("train_loss")] == [2.0, 4.0, 5.0]
    assert [e.step for e in acc.Scalars("train_lr")] == [2, 4, 5]


def test_learning_rate_is_sent_once_per_run():
    events: list = []
    rec = StepRecorder(events.append)
    opt = torch.optim.SGD(
        [{"params": [torch.zeros(1)], "lr": 0.1}, {"params": [torch.zeros(1)], "lr": 0.2}]
    )
    rec.learning_rate(opt, 1)
    rec.learning_rate(opt, 2)
    assert events == [
        {"type": "optimizer", "step": 1, "lr": [0.1, 0.2], "optimizer": "SGD", "t": events[0]["t"]}
    ]
    assert learning_rates(torch.optim.Adam([torch.zeros(1)], lr=0.01)) == 0.01


def test_stop_poll_looks_at_the_file_at_most_every_file_check_s(tmp_path):
    poll = StopPoll(file=tmp_path / "STOP")
    assert not poll(0.0)
    (tmp_path / "STOP").touch()
    assert not poll(0.05)  # looked at 0.0: not again before 0.1
    assert poll(0.2)
    poll.event.set()
    assert poll(0.21) and repr(poll) == f"StopPoll(file={str(tmp_path / 'STOP')!r})"


@pytest.mark.slow
def test_lab_fit_records_the_lr_its_optimizer_had(tmp_path):
    """Issue 35 item 7: an optimizer factory training at 0.01 under Lab(lr=0.001)."""
    from labkit import runs
    from labkit.train import Lab

    lab = Lab(
        mlp(),
        datasets(64),
        loss=F.cross_entropy,
        lr=0.001,
        batch_size=16,
        optimizer=lambda params: torch.optim.SGD(params, lr=0.01),
        logdir=tmp_path / "lab",
    )
    run = lab.fit(max_epochs=1, dashboard=False, dry_run=False)
    assert run.config["lr"] == 0.01 and run.source == "lab"
    assert any("lr=0.01" in n and "0.001" in n for n in run.notes)
    row = runs(tmp_path / "lab")[0]
    assert row.options["lr"] == 0.01 and row.source == "lab"


def test_scalar_file_is_read_by_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from labkit.train._tensorboard import ScalarFile

    rec = StepRecorder(
        lambda e: None, flush_interval=3600, scalars=lambda: ScalarFile(tmp_path), log_every=2
    )
    for step in range(1, 6):
        rec.add_step(step, 0, torch.tensor(float(step)), 0.0, 0.0, 0, {"val_acc": 0.5})
    rec.epoch(0, 5, {"val_loss": 0.25})
    rec.end("finished", 5)  # closes the file
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("train_loss")] == [(2, 2.0), (4, 4.0), (5, 5.0)]
    assert [e.step for e in acc.Scalars("val_acc")] == [2, 4, 5]
    assert [(e.step, e.value) for e in acc.Scalars("val_loss")] == [(5, 0.25)]
    assert len(list(tmp_path.glob("events.out.tfevents.*.labkit"))) == 1
