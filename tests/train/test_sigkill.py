"""SIGKILL the training process at random moments (checkpoint writes included), resume."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from labkit.train.checkpoint import load_checkpoint

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
EPOCHS = 6


def _start(logdir: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    logdir.mkdir(parents=True, exist_ok=True)
    with open(logdir.parent / f"{logdir.name}.log", "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.train._sigkill_script", str(logdir), str(EPOCHS)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _tail(logdir: Path) -> str:
    return (logdir.parent / f"{logdir.name}.log").read_text()[-2000:]


def _step_losses(logdir: Path) -> dict[int, float]:
    """Loss per step from every attempt's events (a later attempt overwrites a step)."""
    out: dict[int, float] = {}
    for line in (logdir / "events.jsonl").read_text().splitlines():
        ev = json.loads(line)
        if ev["type"] == "steps":
            for s in ev["steps"]:
                out[s["step"]] = s["loss"]
    return out


def test_sigkill_at_random_moments_then_resume(tmp_path):
    ref_dir, dir_ = tmp_path / "reference", tmp_path / "killed"
    ref = _start(ref_dir)
    assert ref.wait(timeout=120) == 0, _tail(ref_dir)
    reference = _step_losses(ref_dir)
    assert sorted(reference) == list(range(1, EPOCHS * 9 + 1))

    rng = random.Random(0)
    kills = mid_write = 0
    ck = dir_ / "checkpoints"
    for attempt in range(4):
        proc = _start(dir_)
        # wait until training runs (imports take seconds), then kill at a random moment;
        # even attempts wait for a checkpoint write (the script holds each temp file 0.5 s
        # before the rename, so a loaded machine still sees it), odd ones land anywhere
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if (dir_ / "events.jsonl").stat().st_size if (dir_ / "events.jsonl").exists() else 0:
                break
            time.sleep(0.02)
        if attempt % 2 == 0:
            t_end = time.monotonic() + 60
            while time.monotonic() < t_end and proc.poll() is None:
                if ck.exists() and any(p.suffix == ".tmp" for p in ck.iterdir()):
                    break
                time.sleep(0.005)
        else:
            time.sleep(rng.uniform(0.0, 1.0))
        if proc.poll() is not None:
            continue  # ended before the kill: the next attempt resumes from its checkpoint
        writing = ck.exists() and any(p.suffix == ".tmp" for p in ck.iterdir())
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        mid_write += writing
        last = ck / "last.ckpt"
        if last.exists():  # the last checkpoint always loads
            state = load_checkpoint(last)
            assert state["state_dict"]["net.ballast"].shape == (2_000_000,)
    assert kills >= 3
    assert mid_write >= 1, "no kill landed during a checkpoint write"
    final = _start(dir_)
    assert final.wait(timeout=120) == 0, _tail(dir_)
    assert _step_losses(dir_) == reference
    a = load_checkpoint(ref_dir / "checkpoints" / "last.ckpt")["state_dict"]
    b = load_checkpoint(dir_ / "checkpoints" / "last.ckpt")["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)
