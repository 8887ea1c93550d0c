"""labkit.watch.transformers() under torchrun: rank_stats from a Hugging Face Trainer's DDP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

SCRIPT = """\
import json, os, sys, time
import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments
import labkit

rank = int(os.environ["RANK"])


class Tokens(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 64, (n, 8), generator=g)
        self.labels = (self.ids[:, 0] % 2).long()

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        if rank == 1:
            time.sleep(0.03 / 4)  # a planted straggler: rank 1 waits 30 ms a batch of 4
        return {"input_ids": self.ids[i], "attention_mask": torch.ones(8, dtype=torch.long),
                "labels": self.labels[i]}


torch.manual_seed(0)
cfg = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                 intermediate_size=32, max_position_embeddings=16, num_labels=2)
model = BertForSequenceClassification(cfg)
args = TrainingArguments(output_dir=os.path.join(sys.argv[1], "out"),
                         per_device_train_batch_size=4, num_train_epochs=2, learning_rate=1e-3,
                         save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
                         seed=0, ddp_backend="gloo", dataloader_num_workers=0,
                         # no collective before the model's forward (the token-count gather,
                         # DDP's buffer broadcast): the data wait stays on the rank that
                         # waited for data (see StepClock)
                         average_tokens_across_devices=False, ddp_broadcast_buffers=False)
cb = labkit.watch.transformers(logdir=os.path.join(sys.argv[1], "run"), dashboard=False)
Trainer(model=model, args=args, train_dataset=Tokens(64), callbacks=[cb]).train()
print("RESULT", json.dumps({"rank": rank, "status": cb.run.status, "steps": len(cb.run.steps)}))
"""


def test_trainer_under_ddp_gathers_rank_stats(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            str(script),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
        env=env,
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
    # 64 samples, 2 ranks, 4 a batch: 8 optimizer steps an epoch; only rank 0 records
    assert [(r["status"], r["steps"]) for r in results] == [("finished", 16), ("finished", 0)]
    logdir = tmp_path / "run"
    record = json.loads((logdir / "run.json").read_text())
    gathered = record["ranks"]
    assert [(g["epoch"], g["step"]) for g in gathered] == [(0, 8), (1, 16)]
    assert [[r["steps"] for r in g["ranks"]] for g in gathered] == [[7, 7], [8, 8]]
    for g in gathered:
        slow, fast = g["ranks"][1], g["ranks"][0]
        assert slow["data_time"] - fast["data_time"] > 0.02  # the planted 30 ms
        assert fast["comm_wait"] > 0.015  # rank 0 waits for it in backward's all-reduce
        assert [(s["rank"], s["cause"]) for s in g["stragglers"]] == [(1, "data wait")]
    for r in (0, 1):  # each rank's own file holds what rank 0 gathered from it
        lines = (logdir / "ranks" / f"rank_{r}.jsonl").read_text().splitlines()
        assert [json.loads(ln) for ln in lines] == [
            {"epoch": g["epoch"], "step": g["step"], **g["ranks"][r]} for g in gathered
        ]
