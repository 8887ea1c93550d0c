"""Fault table, runs that cannot corrupt each other (issue 30, item 2): one fit per logdir
(a lock with pid and host, released on every exit path, a dead holder's lock taken over
with a note), a second fit on a running Lab refused, resume that says what it changes,
fit options type-checked before Lightning, a raising metric named, a graph without masks
named. Every refusal happens before a step runs and leaves the logdir as it was."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F

from labkit.train._lock import LOCK_FILE, LogdirBusyError
from labkit.train._resume import ResumeError
from labkit.train.checkpoint import load_checkpoint
from labkit.train.fit_options import FitOptionError
from labkit.train.module import MetricError
from tests.faults._lab import FIT, Counting, lab

HOLD = """
import sys, time
from labkit.train._lock import LogdirLock
lock = LogdirLock.acquire(sys.argv[1])
print("held", flush=True)
time.sleep(60)
"""


def _snapshot(logdir: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(logdir)): p.read_bytes() for p in sorted(logdir.rglob("*")) if p.is_file()
    }


# ---------------------------------------------------------------- the logdir lock
def test_a_logdir_held_by_another_process_is_refused_naming_it(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        model = Counting()
        with pytest.raises(LogdirBusyError) as info:
            lab(tmp_path, model).fit(max_epochs=1, **FIT)
        message = str(info.value)
        assert f"pid {proc.pid} on {socket.gethostname()!r}" in message
        assert "held by another running fit" in message and str(tmp_path) in message
        assert model.calls == 0 and not (tmp_path / "run.json").exists()
    finally:
        proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    # the holder died without releasing: its lock is taken over, and the run says so
    run = lab(tmp_path).fit(max_epochs=1, **FIT)
    assert run.status == "finished"
    assert any(
        f"stale lock of {tmp_path / LOCK_FILE}" in n and f"pid {proc.pid}" in n for n in run.notes
    )
    assert not (tmp_path / LOCK_FILE).exists()


class Interrupt(pl.Callback):
    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        if trainer.global_step == 2:
            raise KeyboardInterrupt


def _bad_metric(out: torch.Tensor, y: torch.Tensor) -> float:
    return 1 / 0


@pytest.mark.parametrize("how", ["finished", "failed", "interrupted", "refused"])
def test_the_lock_is_released_on_every_exit_path(tmp_path: Path, how: str) -> None:
    kw: dict[str, Any] = dict(FIT)
    if how == "interrupted":
        kw["trainer_kwargs"] = {**kw["trainer_kwargs"], "callbacks": [Interrupt()]}
    if how == "refused":
        lab(tmp_path).fit(max_epochs=1, **FIT)
        kw["resume"] = True
    try:
        metrics = {"bad": _bad_metric} if how == "failed" else None
        lr = 0.5 if how == "refused" else 0.01
        the_lab = lab(tmp_path, metrics=metrics)
        the_lab.lr = lr
        the_lab.fit(max_epochs=2, **kw)
    except (MetricError, ResumeError):
        pass
    assert not (tmp_path / LOCK_FILE).exists()
    lab(tmp_path).fit(max_epochs=1, **FIT)  # the logdir is free again


def test_a_second_fit_on_a_running_lab_is_refused_naming_the_running_one(tmp_path: Path) -> None:
    the_lab = lab(tmp_path)
    run = the_lab.fit(max_epochs=10_000, background=True, **FIT)
    try:
        with pytest.raises(RuntimeError, match=r"this Lab is still fitting \(Run\(status="):
            the_lab.fit(max_epochs=1, **FIT)
        other = Counting()
        with pytest.raises(LogdirBusyError, match=r"another fit in this process is still running"):
            lab(tmp_path, other).fit(max_epochs=1, **FIT)
        assert other.calls == 0
    finally:
        the_lab.stop()
        run.wait(60)
    assert run.status == "stopped"
    assert not (tmp_path / LOCK_FILE).exists()


# ---------------------------------------------------------------- resume says what it changes
def test_a_changed_lr_on_resume_is_refused_by_default_naming_both(tmp_path: Path) -> None:
    lab(tmp_path).fit(max_epochs=1, **FIT)  # lr 0.01
    before = _snapshot(tmp_path)
    changed = lab(tmp_path)
    changed.lr = 0.1
    with pytest.raises(
        ResumeError,
        match=r"last\.ckpt would change .*lr: checkpoint 0\.01, Lab "
        r"0\.1.*on_change='apply'.*on_change='keep'",
    ):
        changed.fit(max_epochs=2, resume=True, **FIT)
    assert _snapshot(tmp_path) == before and changed.model.calls == 0


@pytest.mark.parametrize(("rule", "lr_after"), [("apply", 0.1), ("keep", 0.01)])
def test_on_change_applies_or_keeps_the_lr_and_says_so(
    tmp_path: Path, rule: str, lr_after: float
) -> None:
    lab(tmp_path).fit(max_epochs=1, **FIT)
    changed = lab(tmp_path)
    changed.lr = 0.1
    run = changed.fit(max_epochs=2, resume=True, on_change=rule, **FIT)
    assert any(
        f"on_change='{rule}'" in n and "lr: checkpoint 0.01, Lab 0.1" in n for n in run.notes
    )
    ck = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert ck["optimizer_states"][0]["param_groups"][0]["lr"] == lr_after
    assert ck["labkit"]["optimizer"] == {"type": "SGD", "lr": [lr_after]}


def test_a_changed_recipe_on_resume_is_named(tmp_path: Path) -> None:
    lab(tmp_path).fit(max_epochs=1, **FIT)
    changed = lab(tmp_path, recipe={"matmul_precision": "high"})
    with pytest.raises(ResumeError, match=r"Recipe: matmul_precision 'highest' -> 'high'"):
        changed.fit(max_epochs=2, resume=True, **FIT)
    with pytest.raises(ResumeError, match=r"on_change='keep' cannot keep the checkpoint's Recipe"):
        changed.fit(max_epochs=2, resume=True, on_change="keep", **FIT)


def test_another_optimizer_type_names_both_types_and_the_checkpoint(tmp_path: Path) -> None:
    lab(tmp_path).fit(max_epochs=1, **FIT)  # SGD
    last = tmp_path / "checkpoints" / "last.ckpt"
    before = _snapshot(tmp_path)
    adam = lab(tmp_path)
    adam.optimizer = "adam"
    with pytest.raises(ResumeError) as info:
        adam.fit(max_epochs=2, resume=True, **FIT)
    message = str(info.value)
    assert f"{last} holds the state of a SGD optimizer, and this fit uses Adam" in message
    assert "optimizer='SGD'" in message and "KeyError" not in message
    assert _snapshot(tmp_path) == before and adam.model.calls == 0


def test_another_optimizer_type_is_named_for_a_checkpoint_without_labkit_s_record(
    tmp_path: Path,
) -> None:
    lab(tmp_path).fit(max_epochs=1, **FIT)
    last = tmp_path / "checkpoints" / "last.ckpt"
    ck = load_checkpoint(last)
    del ck["labkit"]["optimizer"]  # as written by an earlier labkit
    ck["optimizer_states"][0]["state"] = {0: {"momentum_buffer": torch.zeros(1, 4)}}
    torch.save(ck, last)
    rms = lab(tmp_path)
    rms.optimizer = "rmsprop"
    with pytest.raises(ResumeError, match=r"state of a SGD optimizer, and this fit uses RMSprop"):
        rms.fit(max_epochs=2, resume=True, **FIT)


# ---------------------------------------------------------------- options, metrics, graphs
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_epochs": "2"}, r"max_epochs='2' \(str\): max_epochs takes an integer"),
        ({"max_epochs": 2.0}, r"max_epochs=2\.0 \(float\)"),
        ({"seed": None}, r"seed=None \(NoneType\)"),
        ({"resume": "yes"}, r"resume='yes' \(str\): resume takes True or False"),
        ({"limit_train_batches": "5"}, r"limit_train_batches='5'"),
        ({"launch": "thread"}, r"launch='thread': one of"),
        ({"on_change": "ignore"}, r"on_change='ignore': one of \('refuse', 'apply', 'keep'\)"),
        ({"max_epochs": -3}, r"max_epochs=-3: at least -1"),
        ({"ddp_timeout": 0}, r"ddp_timeout=0: seconds, above 0"),
    ],
)
def test_fit_options_are_type_checked_before_lightning(
    tmp_path: Path, options: dict[str, Any], message: str
) -> None:
    model = Counting()
    with pytest.raises(FitOptionError, match=rf"^Lab\.fit\(\): fit option {message}"):
        lab(tmp_path / "logdir", model).fit(**{**FIT, **options})
    assert model.calls == 0 and not (tmp_path / "logdir").exists()


def test_a_raising_metric_is_named_with_the_batch(tmp_path: Path) -> None:
    with pytest.raises(MetricError) as info:
        lab(tmp_path, metrics={"ratio": _bad_metric}).fit(max_epochs=1, **FIT)
    message = str(info.value)
    assert message.startswith(
        "the metric 'ratio' raised ZeroDivisionError: division by zero "
        "on train batch 0 of epoch 0 (output [8, 1] float32, target "
        "[8, 1] float32)"
    )
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["status"] == "failed" and "metric 'ratio'" in record["error"]


def test_a_graph_without_masks_is_named(tmp_path: Path) -> None:
    import warnings

    from labkit.train import Lab

    with warnings.catch_warnings():  # PyG's import-time jit.script deprecation (tests/realworld)
        warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
        from torch_geometric.data import Data

    g = Data(
        x=torch.randn(10, 3),
        edge_index=torch.tensor([[0, 1], [1, 2]]),
        y=torch.zeros(10, dtype=torch.long),
    )
    with pytest.raises(
        ValueError,
        match=r"this graph \(10 nodes\) has no train_mask and no "
        r"val_mask: Lab trains node classification .*RandomNodeSplit",
    ):
        Lab(torch.nn.Linear(3, 2), g, loss=F.cross_entropy, logdir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_lock_file_names_pid_and_host_while_a_fit_runs(tmp_path: Path) -> None:
    seen: list[dict[str, Any]] = []

    class Peek(pl.Callback):
        def on_train_start(self, trainer: pl.Trainer, *args: Any) -> None:
            seen.append(json.loads((tmp_path / LOCK_FILE).read_text()))

    kw = {**FIT, "trainer_kwargs": {**FIT["trainer_kwargs"], "callbacks": [Peek()]}}
    lab(tmp_path).fit(max_epochs=1, **kw)
    import os

    assert seen and seen[0]["pid"] == os.getpid() and seen[0]["host"] == socket.gethostname()
    assert time.time() - seen[0]["started"] < 600


def test_a_graph_without_val_mask_says_so_in_the_run(tmp_path: Path) -> None:
    import warnings

    from labkit.train import Lab

    with warnings.catch_warnings():  # PyG's import-time jit.script deprecation (tests/realworld)
        warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
        from torch_geometric.data import Data

    class PerNode(torch.nn.Module):  # a node classifier: forward(x, edge_index)
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 2)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
            return self.lin(x)

    g = Data(
        x=torch.randn(10, 3),
        edge_index=torch.tensor([[0, 1], [1, 2]]),
        y=torch.zeros(10, dtype=torch.long),
        train_mask=torch.ones(10, dtype=torch.bool),
    )
    run = Lab(PerNode(), g, loss=F.cross_entropy, logdir=tmp_path).fit(max_epochs=1, **FIT)
    assert "the graph has no val_mask: no validation runs" in " ".join(run.notes)
