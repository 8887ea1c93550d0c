"""labkit.watch under torchrun: rank 0 records, Stop reaches every rank at the same step."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = """\
import json, os, sys, time
import torch, torch.distributed as dist
import torch.nn.functional as F
from torch import nn
import labkit

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
model = nn.parallel.DistributedDataParallel(net)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
g = torch.Generator().manual_seed(rank)
x = torch.randn(32, 8, generator=g)
y = (x.sum(1) > 0).long()
logdir = sys.argv[1]
done = 0
with labkit.watch(model, opt, logdir=logdir, dashboard=False) as run:
    for i in range(1000):
        opt.zero_grad()
        if rank == 1:
            time.sleep(0.03)  # a planted straggler: rank 1 waits 30 ms for its data
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if rank == 0 and i == 14:  # what the server extension does for the Stop button
            open(os.path.join(logdir, "STOP"), "w").close()
        run.step(loss=loss, epoch=i // 8)
        done += 1
print("RESULT", json.dumps({"rank": rank, "status": run.status, "done": done,
                            "steps": len(run.steps)}))
dist.destroy_process_group()
"""


def test_two_ranks_stop_together_and_rank_zero_records(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    logdir = tmp_path / "runs"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            str(script),
            str(logdir),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = sorted(
        (
            json.loads(line.split(" ", 1)[1])
            for line in done.stdout.splitlines()
            if line.startswith("RESULT ")
        ),
        key=lambda r: r["rank"],
    )
    # Stop is agreed every 10 steps (one all-reduce): both ranks stop after step 20
    assert [(r["status"], r["done"]) for r in results] == [("stopped", 19), ("stopped", 19)]
    assert [r["steps"] for r in results] == [20, 0]  # only rank 0 records
    record = json.loads((logdir / "run.json").read_text())
    assert record["status"] == "stopped" and len(record["steps"]) == 20
    assert record["config"]["model"] == "Sequential"  # the module DDP wraps
    assert not (logdir / "STOP").exists() and not (logdir / ".labkit.lock").exists()
    # rank_stats: gathered when the epoch changed (seen at the Stop agreement, steps 10 and
    # 20), the first step left out (DDP builds its buckets)
    gathered = record["ranks"]
    assert [(g["epoch"], g["step"]) for g in gathered] == [(0, 10), (1, 20)]
    assert [[r["steps"] for r in g["ranks"]] for g in gathered] == [[9, 9], [10, 10]]
    for g in gathered:
        slow, fast = g["ranks"][1], g["ranks"][0]
        assert slow["data_time"] - fast["data_time"] > 0.02  # the planted 30 ms
        assert fast["comm_wait"] > 0.015  # rank 0 waits for it in backward's all-reduce
        assert [(s["rank"], s["cause"]) for s in g["stragglers"]] == [(1, "data wait")]
    for r in (0, 1):  # each rank's own file holds what rank 0 gathered from it
        rows = [
            json.loads(ln) for ln in (logdir / "ranks" / f"rank_{r}.jsonl").read_text().splitlines()
        ]
        assert rows == [{"epoch": g["epoch"], "step": g["step"], **g["ranks"][r]} for g in gathered]
