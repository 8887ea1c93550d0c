"""Per-rank step breakdown and stragglers: real DDP fits, 2 CPU processes over gloo."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import Dataset

from labkit.train import Lab
from labkit.train._ranks import RankStats, per_rank, stragglers
from labkit.train.run import Run
from labkit.views.dashboard import Dashboard
from tests.train._helpers import LOSS, datasets, mlp

SLEEP = 0.03  # rank 1's planted delay per step


def _rank1() -> bool:
    return os.environ.get("LOCAL_RANK") == "1"


class SlowOnRank1(Dataset):
    """The training set, with a 30 ms pause per batch in rank 1's data path (8 per batch)."""

    def __init__(self, base: Dataset) -> None:
        self.base = base

    def __len__(self) -> int:
        return len(self.base)  # type: ignore[arg-type]

    def __getitem__(self, i: int):  # type: ignore[no-untyped-def]
        if _rank1():
            time.sleep(SLEEP / 8)
        return self.base[i]


class SlowForwardOnRank1(mlp().__class__):
    """The MLP, sleeping 30 ms in each training forward on rank 1."""

    def __init__(self) -> None:
        super().__init__(*mlp())

    def forward(self, x):  # type: ignore[override]
        if self.training and _rank1():
            time.sleep(SLEEP)
        return super().forward(x)


def _fit(tmp_path, model, data, **kw):  # type: ignore[no-untyped-def]
    lab = Lab(model, data, loss=LOSS, batch_size=8, logdir=tmp_path)
    kw = {"max_epochs": 1, **kw}
    return lab.fit(
        devices=2,
        accelerator="cpu",
        dashboard=False,
        dry_run=False,
        trainer_kwargs={"enable_progress_bar": False},
        **kw,
    )


@pytest.mark.slow
@pytest.mark.parametrize("where", ["data", "forward"])
def test_planted_straggler_is_named_with_its_cause(tmp_path, where):
    train, val = datasets(256)  # 192 train samples: 12 steps of 8 per rank
    model = mlp() if where == "data" else SlowForwardOnRank1()
    if where == "data":
        train = SlowOnRank1(train)
    run = _fit(tmp_path, model, (train, val))
    assert run.status == "finished"
    gathered = run.ranks[-1]
    ranks = gathered["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["steps"] == 11 for r in ranks)
    assert gathered["comm_hook"] is True
    for r in ranks:  # the parts add up to the step, measured end to end, within 5%
        parts = (
            r["data_time"]
            + r["forward_time"]
            + r["backward_time"]
            + r["comm_wait"]
            + r["optimizer_time"]
        )
        assert parts == pytest.approx(r["step_time"], rel=0.05), r
        # the tiny MLP's gradients fit one bucket: 16*8+16+2*16+2 floats
        assert r["buckets"] == 1 and r["bucket_bytes"] == 4 * (8 * 16 + 16 + 16 * 2 + 2)
        assert r["comm_time"] > 0
    slow, fast = ranks[1], ranks[0]
    key = "data_time" if where == "data" else "forward_time"
    assert slow[key] - fast[key] == pytest.approx(SLEEP, abs=0.015)
    assert fast["comm_wait"] > SLEEP * 0.6  # rank 0 waits for rank 1 in the all-reduce
    cause = "data wait" if where == "data" else "compute"
    assert [(s["rank"], s["cause"]) for s in run.stragglers] == [(1, cause)]
    assert run.stragglers[0]["waited_by"] == [0]
    assert f"straggler=rank 1 ({cause})" in repr(run)
    assert "rank 1 is a straggler" in run.summary() and "rank 0 waits" in run.summary()
    # the event stream and run.json keep the gathering
    events = [json.loads(ln) for ln in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["epoch"] for e in events if e["type"] == "ranks"] == [0]
    assert Run.load(tmp_path).ranks == run.ranks
    # the dashboard's state carries the per-rank bars and names the straggler
    dash = Dashboard(throttle=0.05)
    for e in events:
        dash.push(e)
    dash.finish(run)
    assert [r["rank"] for r in dash.stats["ranks"]] == [0, 1]
    assert dash.stats["ranks"][1]["data_time"] == ranks[1]["data_time"]
    assert dash.stats["stragglers"] == [run.stragglers[0]["text"]]
    assert run.stragglers[0]["text"] in dash.notes


@pytest.mark.slow
def test_even_ranks_have_no_straggler_and_option_turns_it_off(tmp_path):
    run = _fit(tmp_path / "a", mlp(), datasets(128), max_epochs=2)
    assert [g["epoch"] for g in run.ranks] == [0, 1] and run.stragglers == []
    assert "no straggler" in run.summary()
    on_model, off_model = mlp(), mlp()
    on = _fit(tmp_path / "b", on_model, datasets(128))
    off = _fit(tmp_path / "c", off_model, datasets(128), rank_stats=False)
    assert on.ranks and off.status == "finished" and off.ranks == []
    # the timed all-reduce averages exactly as DDP's own: the same weights, bit for bit
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            on_model.state_dict().values(), off_model.state_dict().values(), strict=True
        )
    )
    assert not (tmp_path / "c" / "ranks").exists()


def _row(rank: int, data: float, compute: float, wait: float) -> dict:
    return {
        "rank": rank,
        "steps": 10,
        "data_time": data,
        "compute_time": compute,
        "comm_wait": wait,
    }


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([_row(0, 0.001, 0.010, 0.02), _row(1, 0.001, 0.030, 0.0)], [(1, "compute")]),
        ([_row(0, 0.020, 0.010, 0.0), _row(1, 0.001, 0.010, 0.02)], [(0, "data wait")]),
        ([_row(0, 0.010, 0.030, 0.0), _row(1, 0.010, 0.0379, 0.0)], []),  # under 20%
        ([_row(0, 0.0001, 0.001, 0.0), _row(1, 0.0001, 0.0055, 0.0)], []),  # under 5 ms
        (
            [_row(r, 0.001, 0.010, 0.03) for r in range(3)] + [_row(3, 0.031, 0.010, 0.0)],
            [(3, "data wait")],
        ),
    ],
)
def test_straggler_rule(rows, expected):
    found = stragglers(rows)
    assert [(s["rank"], s["cause"]) for s in found] == expected
    for s in found:  # excess is against the others' median of data + compute
        others = [r["data_time"] + r["compute_time"] for r in rows if r["rank"] != s["rank"]]
        assert s["excess"] == pytest.approx(s["own"] - statistics.median(others))


def test_per_rank_means_and_repr():
    row = [4.0, 0.09, 0.4, 0.04, 0.08, 0.16, 0.04, 0.08, 0.02, 4.0, 4096.0]
    d = per_rank(1, row)
    assert d["steps"] == 4 and d["own_median"] == 0.09 and d["step_time"] == pytest.approx(0.1)
    assert d["compute_time"] == pytest.approx(0.02 + 0.04 + 0.01)
    assert d["buckets"] == 1.0 and d["bucket_bytes"] == 1024
    assert repr(RankStats(print)) == "RankStats(margin=0.2, min_s=0.005, skip=1)"


SCRIPT = """
from labkit.train import Lab, fit_from_args
from tests.train._helpers import LOSS, datasets, mlp

lab = Lab(mlp(), datasets(256), loss=LOSS, batch_size=8)
fit_from_args(lab, max_epochs=1, dry_run=False)
"""


@pytest.mark.slow
def test_under_torchrun_each_rank_writes_its_file(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    path = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    logdir = tmp_path / "run"
    cmd = [
        str(Path(sys.executable).with_name("torchrun")),
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(port),
        str(script),
        "--devices",
        "2",
        "--strategy",
        "ddp",
        "--logdir",
        str(logdir),
    ]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    gathered = Run.load(logdir).ranks
    assert len(gathered) == 1 and [r["rank"] for r in gathered[0]["ranks"]] == [0, 1]
    for r in (0, 1):  # each rank's own file holds what rank 0 gathered from it
        lines = (logdir / "ranks" / f"rank_{r}.jsonl").read_text().splitlines()
        (own,) = [json.loads(ln) for ln in lines]
        assert own == {"epoch": 0, "step": gathered[0]["step"], **gathered[0]["ranks"][r]}
