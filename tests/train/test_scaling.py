"""lab.scaling: short fits at 1 and 2 CPU processes (gloo) on the same data."""

from __future__ import annotations

import json

import pytest
import torch

from labkit.train import Lab
from labkit.train._ranks import advice
from labkit.train.run import Run
from labkit.train.scaling import Scaling, ScalingPoint
from tests.train._helpers import LOSS, datasets, mlp


@pytest.mark.slow
def test_scaling_one_and_two_processes(tmp_path):
    model = mlp()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    lab = Lab(model, datasets(512), loss=LOSS, batch_size=16, logdir=tmp_path)
    s = lab.scaling(devices=[1, 2], steps=12)
    assert [p.processes for p in s.points] == [1, 2] and lab.runs == []
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    one, two = s.points
    # one process: rank 0's steps after the first (events.jsonl)
    lines = (tmp_path / "scaling" / "devices_1" / "events.jsonl").read_text().splitlines()
    rows = [r for e in map(json.loads, lines) if e["type"] == "steps" for r in e["steps"]][1:]
    mean = sum(r["compute_time"] + r["data_time"] for r in rows) / len(rows)
    assert one.steps == len(rows) == 11 and one.step_time == pytest.approx(mean)
    assert one.samples_per_s == pytest.approx(16 / mean)
    # two processes: the per-rank means in run.json, averaged over the ranks
    ranks = Run.load(tmp_path / "scaling" / "devices_2").ranks[-1]["ranks"]
    assert two.steps == 11 and all(r["steps"] == 11 for r in ranks)
    for key in ("step_time", "comm_wait", "comm_time", "data_time", "compute_time"):
        assert getattr(two, key) == pytest.approx(sum(r[key] for r in ranks) / 2)
    assert two.samples_per_s == pytest.approx(32 / two.step_time)
    assert one.efficiency == 1.0 and one.comm_wait == 0.0 and one.bucket_bytes == 0
    # one process: no per-rank timing attached (the single-process loop is unchanged)
    assert Run.load(tmp_path / "scaling" / "devices_1").ranks == []
    assert not (tmp_path / "scaling" / "devices_1" / "ranks").exists()
    assert two.efficiency == pytest.approx(two.samples_per_s / (2 * one.samples_per_s))
    assert two.comm_time > 0 and 0 <= two.comm_share < 1
    assert two.bucket_bytes == 4 * sum(p.numel() for p in model.parameters())
    text = s.summary()
    assert text.splitlines()[0].split()[:3] == ["processes", "step", "ms"]
    assert "2 processes: the step takes" in text
    assert repr(s) == "Scaling(processes=[1, 2], batch_size=16, device='cpu')"
    assert (
        Scaling(**{**s.to_dict(), "points": [ScalingPoint(**p) for p in s.to_dict()["points"]]})
        == s
    )


def test_scaling_arguments_are_checked(tmp_path):
    lab = Lab(mlp(), datasets(), loss=LOSS, logdir=tmp_path)
    with pytest.raises(ValueError, match="process counts"):
        lab.scaling(devices=[0])
    with pytest.raises(ValueError, match="steps=2"):
        lab.scaling(devices=[1], steps=2)


@pytest.mark.parametrize(
    ("r", "words"),
    [
        ({"step_time": 0.01, "comm_wait": 0.005, "data_time": 0.0}, ["bucket_cap_mb"]),
        ({"step_time": 0.01, "comm_wait": 0.0, "data_time": 0.004}, ["num_workers"]),
        ({"step_time": 0.01, "comm_wait": 0.001, "data_time": 0.001}, []),
    ],
)
def test_advice_follows_the_dominant_part(r, words):
    got = advice(r)
    assert len(got) == len(words) and all(w in g for w, g in zip(words, got, strict=True))
