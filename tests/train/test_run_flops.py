"""Lab.fit's run summary states achieved FLOP/s: one training step's FLOPs (counted on the
first step) over the median compute time of the other steps; no MFU on a CPU."""

from __future__ import annotations

import copy
import statistics

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from labkit._format import fmt_count
from labkit.train import Lab
from labkit.train.run import Run
from tests.train._helpers import LOSS, loaders, mlp


def _step_flops(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    """FlopCounterMode's count of one hand-written training step on a copy of ``model``."""
    model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with FlopCounterMode(display=False) as counter:
        opt.zero_grad()
        LOSS(model(x), y).backward()
        opt.step()
    return int(counter.get_total_flops())


def test_fit_summary_states_flops_per_second(tmp_path):
    model = mlp()
    train, val = loaders(n=128, batch_size=16)
    x, y = next(iter(train))
    expected = _step_flops(model, x, y)
    # 2 FLOPs a multiply-add; backward twice forward, less the first layer's input gradient
    assert expected == 2 * 16 * (8 * 16 + 16 * 2) * 3 - 2 * 16 * 8 * 16
    lab = Lab(model, (train, val), loss=LOSS, lr=0.1, logdir=tmp_path)
    run = lab.fit(max_epochs=2, dashboard=False)
    assert run.flops["flops"] == expected and run.flops["step"] == 1
    others = [s["compute_time"] for s in run.steps if s["step"] != 1]
    assert len(others) == len(run.steps) - 1 == 11
    rate, mfu, text = run.utilization()
    assert rate == pytest.approx(expected / statistics.median(others), rel=1e-12)
    assert mfu is None and "no MFU on cpu" in text
    assert f"utilization: achieved {fmt_count(rate)}FLOP/s" in run.summary()
    assert "median compute time of 11 other steps" in text
    assert "FLOPs counted in training step 1 (forward, backward and optimizer step" in text
    loaded = Run.load(tmp_path)  # the counted FLOPs travel in run.json
    assert loaded.flops == run.flops and loaded.utilization() == run.utilization()


def test_mfu_against_the_device_table_and_unknown_devices():
    steps = [
        {"step": i, "epoch": 0, "loss": 1.0, "compute_time": t}
        for i, t in enumerate((9.0, 0.5, 0.25, 0.5), start=1)
    ]
    flops = {
        "flops": 10**12,
        "step": 1,
        "device": "cuda:0",
        "dtype": "bf16",
        "device_name": "NVIDIA H100 80GB HBM3",
        "how": "training step 1",
    }
    run = Run(steps=steps, flops=flops)
    rate, mfu, text = run.utilization()
    assert rate == 2e12 and mfu == pytest.approx(2e12 / 989e12)  # step 1 (9 s) left out
    assert "MFU 0.2% of NVIDIA H100 80GB HBM3's" in text
    unknown = Run(steps=steps, flops={**flops, "device_name": "Mystery GPU"})
    assert unknown.utilization()[1] is None
    assert "MFU unknown: 'Mystery GPU' (bf16)" in unknown.summary()
    alone = Run(steps=steps[:1], flops=flops)
    assert alone.utilization()[0] is None and "no step ran besides" in alone.summary()
    assert Run(steps=steps).utilization() == (None, None, "")  # a watched loop: nothing said
