"""No full garbage collection while labkit records; the collector's settings put back."""

from __future__ import annotations

import gc
from typing import Any

import torch
from torch import nn

from labkit._gc import OLDEST_THRESHOLD, young_gc_only
from labkit.trace.instrument import Instrumentation, Observer
from labkit.trace.step import Step, record_step


class Thresholds(Observer):
    """Writes down the collector's thresholds and whether it runs when the recording starts."""

    def start(self, inst: Instrumentation) -> None:
        self.inside = gc.get_threshold()
        self.enabled = gc.isenabled()


def test_a_recording_makes_no_full_collection_and_puts_the_thresholds_back() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    before = gc.get_threshold()
    seen = Thresholds()
    record_step(Step(model, (torch.randn(3, 4),)), observers=(seen,))
    assert seen.inside[:2] == before[:2]  # the young generations as they were
    assert seen.inside[2] == OLDEST_THRESHOLD
    assert seen.enabled
    assert gc.get_threshold() == before
    full: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(count)
    try:
        with young_gc_only():
            junk = [[i] for i in range(50_000)]  # survivors enough for full collections
            del junk
    finally:
        gc.callbacks.remove(count)
    assert not full
    assert gc.get_threshold() == before


def test_thresholds_the_code_inside_sets_are_kept() -> None:
    before = gc.get_threshold()
    try:
        with young_gc_only():
            gc.set_threshold(500, 5, 5)
        assert gc.get_threshold() == (500, 5, 5)
    finally:
        gc.set_threshold(*before)


def test_nested_keeps_the_outer_setting_until_the_outer_exit() -> None:
    before = gc.get_threshold()
    with young_gc_only():
        with young_gc_only():
            pass
        assert gc.get_threshold()[2] == OLDEST_THRESHOLD
    assert gc.get_threshold() == before
