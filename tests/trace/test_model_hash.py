"""A Trace compares by value and is unhashable, as its comment says (a full trace holds dicts)."""

from __future__ import annotations

import pytest
import torch

import labkit


@pytest.mark.parametrize("mode", ["timing", "full"])
def test_trace_is_unhashable_in_every_mode(mode: str) -> None:
    trace = labkit.trace(torch.nn.Linear(2, 2), torch.randn(1, 2), mode=mode)
    with pytest.raises(TypeError, match="unhashable"):
        hash(trace)
    assert trace == trace
