"""Op times: taken up to ``OP_TIMES_MAX_CALLS`` module calls, left out above it with a note
naming the size and the option, taken or left out on request (``op_times=``); every other
figure of the trace is the same either way."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import labkit
from labkit.trace import _passes
from labkit.trace.io import trace_to_dict


class _Chain(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(3, 3) for _ in range(n))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x)) + x  # op nodes between the module calls
        return x


def _untimed(d: Any) -> Any:
    if isinstance(d, dict):
        skip = ("time", "iqr", "hook_cost", "floored", "timing", "notes")
        clocks = ("t", "start", "end")  # memory samples' and largest storages' clock
        return {
            k: _untimed(v)
            for k, v in d.items()
            if not any(s in k for s in skip) and k not in clocks
        }
    if isinstance(d, (list, tuple)):
        return [_untimed(v) for v in d]
    return d


def _trace(model: nn.Module, **options: Any) -> labkit.Trace:
    torch.manual_seed(0)
    return labkit.trace(model, torch.randn(4, 3), warmup=0, repeat=2, progress=False, **options)


def _op_times(t: labkit.Trace) -> list[float]:
    return [n.fwd_time + n.bwd_time for n in t.nodes if n.kind == "op"]


def test_above_the_limit_ops_are_untimed_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    model = _Chain(6)
    timed = _trace(model)
    assert any(_op_times(timed)) and "op times from 2 op-only passes" in timed.meta.timing
    monkeypatch.setattr(_passes, "OP_TIMES_MAX_CALLS", 5)  # 7 module calls: above it
    big = _trace(model)
    assert not any(_op_times(big))
    (note,) = [n for n in big.meta.notes if "op nodes untimed" in n]
    assert "7 module calls is above 5" in note and "op_times=True" in note
    assert "op nodes untimed" in big.meta.timing
    assert any(n.fwd_time > 0 for n in big.nodes if n.kind == "module")  # modules still timed
    asked = _trace(model, op_times=True)
    assert any(_op_times(asked)) and not any("op nodes untimed" in n for n in asked.meta.notes)
    for other in (big, asked):
        assert _untimed(trace_to_dict(other)) == _untimed(trace_to_dict(timed))
        assert [n for n in other.meta.notes if "op nodes" not in n] == list(timed.meta.notes)


def test_op_times_false_leaves_ops_untimed_without_a_note() -> None:
    t = _trace(_Chain(2), op_times=False)
    assert not any(_op_times(t)) and _op_times(t)
    assert not any("op nodes untimed" in n for n in t.meta.notes)
    assert "op nodes untimed (op_times=False" in t.meta.timing


def test_op_times_takes_a_bool_or_none() -> None:
    with pytest.raises(TypeError, match="op_times must be True, False or None, got 'yes'"):
        labkit.trace(nn.Linear(2, 2), torch.randn(1, 2), op_times="yes")
