"""The trainer benchmark runs end to end and reports every figure (never timing values)."""

from __future__ import annotations

import pytest
import torch

from benchmarks import trainer_parity as tp


def test_paired_ratio_is_the_median_of_within_round_ratios():
    assert tp.paired_ratio([2.0, 9.0, 3.0], [1.0, 3.0, 3.0]) == 2.0


def test_one_round_reports_every_variant_and_ratio():
    threads = torch.get_num_threads()
    try:
        results = tp.bench("mlp", steps=12, rounds=1)
    finally:
        torch.set_num_threads(threads)
    assert set(results) == set(tp.CLOCKS)
    result = results["thread CPU"]
    assert [r.name for r in result.rows] == [
        "raw loop",
        "plain Lightning",
        "bare Lightning (no self.log)",
        tp.LAB,
        tp.LAB_DASH,
        tp.LAB_NOGUARD,
    ]
    assert all(r.median_s > 0 and r.samples == 1 for r in result.rows)
    assert result.row("raw loop").ratio == pytest.approx(1.0)
    assert len(result.meta["paired_ratios"]) == len(tp.COMPARISONS)
    assert all(v > 0 for v in result.meta["best_ratios"].values())
    assert len(result.meta["added_us_per_step"]) == len(tp.EXTRA)
    assert result.meta["dashboard_messages"] >= 1 and result.meta["dashboard_fit_s"] > 0
