"""labkit.diff's matching, N-way tables and bad input for TraceDiff.explain."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from torch import nn

import labkit
from labkit.trace._explain_match import match_modules
from labkit.trace.io import trace_from_dict, trace_to_dict


class Net(nn.Module):
    def __init__(self, hidden: int = 16, name: str = "blocks") -> None:
        super().__init__()
        blocks = nn.Sequential(nn.Linear(8, hidden), nn.ReLU(), nn.Linear(hidden, 8))
        setattr(self, name, blocks)
        self.head = nn.Linear(8, 2)
        self._name = name

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(getattr(self, self._name)(x))


class Wrapper(nn.Module):  # what DistributedDataParallel does to paths: 'module.'
    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)


X = torch.randn(4, 8)


def test_wrapped_model_matches_under_its_wrapper_and_says_so() -> None:
    a = labkit.trace(Net(), X, repeat=0)
    b = labkit.trace(Wrapper(Net(hidden=32)), X, repeat=0)
    d = labkit.diff(a, b)
    rows = {r["path"]: r for r in d.rows}
    assert rows["blocks.0"]["paths"] == ("blocks.0", "module.blocks.0")
    assert "under wrapper 'module.'" in rows["blocks.0"]["match"]
    assert rows["blocks.0"]["params"] == (8 * 16 + 16, 8 * 32 + 32)
    wrapper = next(r for r in d.rows if r["paths"] == (None, ""))
    assert wrapper["status"] == "added" and wrapper["type"] == "Wrapper"
    e = d.explain("params")
    top = e.rows[0]
    assert (top.module, top.delta) == ("blocks.0", 8 * 16 + 16)  # before blocks.2 (+16 * 8)
    assert "under wrapper" in top.match


def test_renamed_module_matches_by_structure() -> None:
    a = labkit.trace(Net(), X, repeat=0)
    b = labkit.trace(Net(name="layers"), X, repeat=0)
    rows = {r["path"]: r for r in labkit.diff(a, b).rows}
    assert rows["blocks"]["paths"] == ("blocks", "layers")
    assert rows["blocks"]["match"].startswith("structure: Sequential")
    assert rows["blocks.0"]["match"] == "name under matched 'blocks'"
    assert {r["status"] for r in rows.values()} == {"same"}
    assert labkit.diff(a, b).explain("flops").headline.startswith("FLOPs: no change")


def test_compiled_and_added_modules_match_rules() -> None:
    a = [("", "Net"), ("b", "Seq"), ("b.0", "Blk"), ("b.0.fc", "Linear")]
    b = [
        ("", "Net"),
        ("b", "Seq"),
        ("b.0", "OptimizedModule"),
        ("b.0._orig_mod", "Blk"),
        ("b.0._orig_mod.fc", "Linear"),
        ("b.1", "ReLU"),
    ]
    got = {(m.a, m.b): m.rule for m in match_modules(a, b)}
    assert "'_orig_mod.' dropped" in got[("b.0", "b.0._orig_mod")]
    assert got[("b.0.fc", "b.0._orig_mod.fc")].startswith("path")
    assert got[(None, "b.0")] == "added" and got[(None, "b.1")] == "added"


def test_n_way_table_has_a_column_group_per_trace() -> None:
    ts = [labkit.trace(Net(hidden=h), X, repeat=0) for h in (16, 32, 64)]
    d = labkit.diff(*ts, labels=("h16", "h32", "h64"))
    rows = {r["path"]: r for r in d.rows}
    assert rows["blocks.0"]["params"] == (8 * 16 + 16, 8 * 32 + 32, 8 * 64 + 64)
    text = d.table("params")
    head = next(ln for ln in text.splitlines() if ln.startswith("module"))
    assert head.split() == [
        "module",
        "h16",
        "h32",
        "h32",
        "delta",
        "h32",
        "95%",
        "h64",
        "h64",
        "delta",
        "h64",
        "95%",
    ]
    assert text.splitlines()[0].startswith("h32: params +")
    on_h64 = labkit.diff(*ts, base="h64", labels=("h16", "h32", "h64"))
    assert on_h64.explain("params", against="h16").delta < 0
    assert "params_delta_h32" in d.to_pandas().columns
    with pytest.raises(ValueError, match="base trace"):
        d.explain("params", against=0)
    e = d.explain("params", against="h64")
    assert repr(e) == f"Explanation(params: {e.headline!r}, rows={len(e.rows)})"
    assert repr(d).startswith("TraceDiff(Net -> Net: changed=")


def test_plan_against_measured_explains_flops_and_refuses_time() -> None:
    plan = labkit.plan(Net(), X).trace
    measured = labkit.trace(Net(), X, repeat=2)
    d = labkit.diff(plan, measured)
    e = d.explain("flops")
    assert any("modes differ" in n and "plan" in n for n in e.notes)
    with pytest.raises(ValueError, match="a plan"):
        d.explain("time")


def test_batch_sizes_differ_figures_per_sample() -> None:
    a = labkit.trace(Net(), torch.randn(4, 8), repeat=0)
    b = labkit.trace(Net(), torch.randn(8, 8), repeat=0)
    e = labkit.diff(a, b).explain("flops")
    assert e.per_sample and any("batch sizes differ (a 4, b 8)" in n for n in e.notes)
    assert e.headline.startswith("FLOPs per sample: no change")
    assert labkit.diff(a, b).explain("params").per_sample is False


def test_devices_differ_is_stated() -> None:
    a = labkit.trace(Net(), X, repeat=0)
    b = a.replace(meta=dataclasses.replace(a.meta, device="cuda:0"))  # saved on a GPU machine
    e = labkit.diff(a, b).explain("flops")
    assert any("devices differ (a cpu, b cuda:0)" in n for n in e.notes)


def test_older_file_without_pass_times_names_what_is_missing(tmp_path) -> None:
    t = labkit.trace(Net(), X, repeat=3)
    data = trace_to_dict(t)
    for n in data["nodes"]:  # what a file of an older labkit holds
        n.pop("fwd_pass_times", None)
        n.pop("bwd_pass_times", None)
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    old = labkit.Trace.load(path)
    assert old == trace_from_dict(data)
    e = labkit.diff(old, t).explain("time")
    assert any(n.startswith("a lacks per-pass times") for n in e.notes)
    assert e.low is None and all(r.low is None for r in e.rows)
    assert "95%" not in e.headline


def test_no_times_is_refused_naming_the_trace() -> None:
    a = labkit.trace(Net(), X, repeat=0)
    with pytest.raises(ValueError, match=r"trace a has no times .*repeat=0"):
        labkit.diff(a, labkit.trace(Net(), X, repeat=2)).explain("time")
    with pytest.raises(ValueError, match="metric must be one of"):
        labkit.diff(a, a).explain("latency")
    with pytest.raises(TypeError, match="argument 1 is a str"):
        labkit.diff(a, "b.json")  # type: ignore[arg-type]


@pytest.mark.slow
def test_thousands_of_modules_summary_stays_short_and_table_pages() -> None:
    model = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(700)])
    a = labkit.trace(model, torch.randn(2, 4), mode="timing", repeat=3)
    assert len(a.modules) > 2000
    e = labkit.diff(a, a).explain("time")
    assert len(e.summary().splitlines()) <= 40
    wide = nn.Sequential(*[nn.Sequential(nn.Linear(4, 4), nn.ReLU()) for _ in range(700)])
    wide[5][0] = nn.Linear(4, 4, bias=False)
    b = labkit.trace(wide, torch.randn(2, 4), mode="timing", repeat=0)
    p = labkit.diff(a, b).explain("params")
    assert len(p.summary().splitlines()) <= 40
    assert p.rows[0].module == "5.0" and p.rows[0].delta == -4
    page = labkit.diff(a, a).explain("time").table(page=2, per_page=50)
    assert page.splitlines()[-1].startswith("page 2 of ")
    assert len(page.splitlines()) == 50 + 3


def test_memory_without_a_peak_attribution_says_what_it_compares() -> None:
    a = labkit.trace(Net(), X, repeat=0)
    assert a.memory_meta is not None and a.memory_meta.peak_by_module
    b = labkit.trace(Net(hidden=32), X, repeat=0).replace(memory_meta=None)  # as a file without
    e = labkit.diff(a, b).explain("memory")
    assert any(n.startswith("b lacks a memory recording's peak by module") for n in e.notes)
    assert e.notes[0] == "memory: bytes each module's own ops saved for backward"
    assert e.rows[0].module in ("blocks.1", "blocks.2") and e.delta > 0
