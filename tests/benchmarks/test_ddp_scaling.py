"""The DDP scaling benchmark runs end to end and reports every figure (never timing values)."""

from __future__ import annotations

import pytest
import torch

from benchmarks import ddp_scaling as ds

pytestmark = pytest.mark.slow


def test_one_round_reports_scaling_and_overhead():
    threads = torch.get_num_threads()
    try:
        result, scale = ds.bench(steps=6, rounds=1, scaling_steps=6, hook_steps=12)
    finally:
        torch.set_num_threads(threads)
    assert [r.name for r in result.rows] == [
        f"2 processes, rank_stats {k} ({c})" for c in ds.CLOCKS for k in ("off", "on")
    ]
    assert all(r.median_s > 0 and r.samples == 1 for r in result.rows)
    assert [p.processes for p in scale.points] == [1, 2]
    assert result.meta["efficiency_2"] == scale.point(2).efficiency
    assert set(result.meta["on_off"]) == set(ds.CLOCKS)
    assert set(result.meta["hook_cost_thread_cpu_s"]) == {"built-in", "labkit hook"}
    assert "2 processes: the step takes" in scale.summary()
