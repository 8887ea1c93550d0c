"""A time whose spread exceeds half its median is flagged as noise (issue 31): in the
summary (marked, with a legend line) and in the profile payload (by module path)."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

import labkit
from labkit.trace.summary import is_noisy
from labkit.views._payload import profile_payload


def _trace(iqr: dict[str, float]) -> labkit.Trace:
    """A timing recording with forward times of 1 ms and the given spreads put in by hand."""
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    t = labkit.trace(model, torch.randn(1, 2), mode="timing", repeat=0)
    nodes = tuple(
        dataclasses.replace(n, fwd_time=1e-3, fwd_iqr=iqr.get(n.key, 0.0), bwd_time=2e-3)
        if n.kind == "module"
        else n
        for n in t.nodes
    )
    meta = dataclasses.replace(
        t.meta,
        forward_time=1e-3,
        forward_iqr=iqr.get("#0", 0.0),
        backward_time=2e-3,
        backward_iqr=3e-3,
    )
    return t.replace(nodes=nodes, meta=meta)


def test_the_rule_is_half_the_median() -> None:
    assert is_noisy(1.0, 0.51) and not is_noisy(1.0, 0.5) and not is_noisy(0.0, 1.0)


def test_summary_and_profile_flag_noisy_times_only() -> None:
    t = _trace({"0#0": 0.8e-3})  # Linear's forward spread 0.8 ms around 1 ms: noise
    rows = {r["path"]: r for r in t.rows()}
    assert rows["0"]["fwd_noisy"] and not rows["1"]["fwd_noisy"]
    assert not rows["0"]["bwd_noisy"]
    text = t.summary(columns=("fwd", "fwd_iqr", "bwd"))
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    assert lines["0"].split()[1:3] == ["1.00", "ms"] and "~" in lines["0"]
    assert "~" not in lines["1"]
    assert lines["Total"].count("~") == 1  # the step's backward: 3 ms spread around 2 ms
    assert "~ noisy: the spread (IQR) over the timing passes is more than half" in text
    assert profile_payload(t)["noisy"] == {"0": ["fwd_time"]}


def test_a_quiet_trace_has_no_flags() -> None:
    t = dataclasses.replace(_trace({}).meta, backward_iqr=0.0)
    quiet = _trace({}).replace(meta=t)
    assert "noisy" not in quiet.summary() and profile_payload(quiet)["noisy"] == {}
