"""The promoted script scales out on CPU: DDP from the script, under torchrun, and as two
"nodes" on one machine (static rendezvous on 127.0.0.1, two torchrun launches)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.promote.conftest import Trained, read_run, run_script

pytestmark = pytest.mark.slow

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
SMALL = ("--max-epochs", "1", "--limit-batches", "2")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}


def test_devices_2_ddp_from_the_script(trained: Trained):
    logdir = trained.folder / "runs" / "ddp"
    # command-line values override the notebook's (max_epochs=2, seed=0)
    run_script(
        trained.script,
        "--devices",
        "2",
        "--strategy",
        "ddp",
        *SMALL,
        "--seed",
        "3",
        "--logdir",
        str(logdir),
        cwd=trained.folder,
    )
    run = read_run(logdir)
    assert run["status"] == "finished" and run["config"]["processes"] == 2
    assert run["config"]["max_epochs"] == 1 and run["config"]["seed"] == 3
    # seen once in a full run (stop 48): finished with no steps; the events say what came
    events = logdir / "events.jsonl"
    tail = events.read_text()[-3000:] if events.exists() else "(no events.jsonl)"
    assert len(run["steps"]) >= 1, tail
    assert (logdir / "checkpoints" / "last.ckpt").exists()


def test_torchrun_nproc_per_node_2(trained: Trained):
    logdir = trained.folder / "runs" / "torchrun"
    cmd = [
        TORCHRUN,
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(_free_port()),
        str(trained.script),
        "--devices",
        "2",
        "--strategy",
        "ddp",
        *SMALL,
        "--logdir",
        str(logdir),
    ]
    done = subprocess.run(
        cmd, cwd=trained.folder, env=_env(), capture_output=True, text=True, timeout=180
    )
    assert done.returncode == 0, done.stderr[-3000:]
    run = read_run(logdir)
    assert run["status"] == "finished"
    assert (logdir / "checkpoints" / "last.ckpt").exists()


def test_two_nodes_on_one_machine(trained: Trained):
    logdir = trained.folder / "runs" / "nodes"
    port = str(_free_port())
    procs = []
    for rank in (0, 1):
        cmd = [
            TORCHRUN,
            "--nnodes",
            "2",
            "--node-rank",
            str(rank),
            "--nproc-per-node",
            "1",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            port,
            str(trained.script),
            "--num-nodes",
            "2",
            "--devices",
            "1",
            "--strategy",
            "ddp",
            *SMALL,
            "--logdir",
            str(logdir),
        ]
        procs.append(
            subprocess.Popen(
                cmd,
                cwd=trained.folder,
                env=_env(),
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
        )
    outputs = []
    try:
        for p in procs:
            outputs.append(p.communicate(timeout=180)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for rank, p in enumerate(procs):
        assert p.returncode == 0, f"node {rank}:\n{outputs[rank][-3000:]}"
    run = read_run(logdir)
    assert run["status"] == "finished" and run["config"]["num_nodes"] == 2
    assert (logdir / "checkpoints" / "last.ckpt").exists()
