"""The trace reader's record-at-a-time path (labkit/trace/io.py, _validate.Readers): any JSON
layout of a trace loads equal, every record is checked as before, errors name the record."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

import labkit
from benchmarks.trace_io import synthetic_trace
from labkit.trace import Trace, TraceFileError
from labkit.trace.io import trace_to_dict
from labkit.trace.model import Node


@pytest.fixture(scope="module")
def big() -> Trace:
    return synthetic_trace(2_000)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "t.json"
    path.write_text(text)
    return path


def _reorder(data: dict[str, Any]) -> dict[str, Any]:
    """Top-level keys reversed (schema last) and each node's keys shuffled."""
    rng = random.Random(0)
    out = {k: data[k] for k in reversed(list(data))}
    nodes = []
    for node in data["nodes"]:
        keys = list(node)
        rng.shuffle(keys)
        nodes.append({k: node[k] for k in keys})
    out["nodes"] = nodes
    return out


@pytest.mark.parametrize(
    "write",
    [
        lambda d: json.dumps(d, indent=2),
        lambda d: json.dumps(d, indent="\t", separators=(" ,\n ", " : ")) + "\n\n",
        lambda d: json.dumps(_reorder(d)),
        lambda d: json.dumps({**{k: v for k, v in d.items() if k != "nodes"}, "nodes": d["nodes"]}),
    ],
    ids=["indented", "odd-spacing", "keys-reordered", "nodes-last"],
)
def test_any_json_layout_loads_equal(
    tmp_path: Path, big: Trace, write: Callable[[dict[str, Any]], str]
) -> None:
    assert Trace.load(_write(tmp_path, write(trace_to_dict(big)))) == big


def test_save_writes_what_json_dumps_writes(tmp_path: Path, big: Trace) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
    mem = labkit.memory(model, torch.randn(2, 4)).trace
    for trace in (big, mem):
        trace.save(tmp_path / "t.json")
        expected = json.dumps(trace_to_dict(trace), separators=(",", ":"), allow_nan=False)
        assert (tmp_path / "t.json").read_text() == expected
        assert Trace.load(tmp_path / "t.json") == trace


def test_a_file_without_the_newest_fields_loads_with_their_defaults(
    tmp_path: Path, big: Trace
) -> None:
    data = trace_to_dict(big)
    last = [f for f in dataclasses.fields(Node)][-2:]  # the fields added last have defaults
    assert all(
        f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        for f in last
    )
    for node in data["nodes"]:
        for f in last:
            del node[f.name]
    back = Trace.load(_write(tmp_path, json.dumps(data)))
    defaults = {
        f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
        for f in last
    }  # type: ignore[misc]
    assert back.nodes == tuple(dataclasses.replace(n, **defaults) for n in big.nodes)


def test_equal_tensor_metas_and_strings_are_shared(tmp_path: Path, big: Trace) -> None:
    big.save(tmp_path / "t.json")
    back = Trace.load(tmp_path / "t.json")
    linear = [n for n in back.nodes if n.type == "Linear"]
    assert len(linear) > 100
    assert all(n.inputs is linear[0].inputs for n in linear)  # one tuple of one TensorMeta
    assert all(n.type is linear[0].type for n in linear)
    shapes = {id(t.shape) for n in back.nodes for t in (*n.inputs, *n.outputs)}
    assert len(shapes) == 3  # (32, 64), (64, 64), (64,)


def test_unknown_fields_in_records_are_tolerated_and_checked(tmp_path: Path, big: Trace) -> None:
    data = trace_to_dict(big)
    data["nodes"][1500]["future_note"] = "from a newer labkit"
    data["nodes"][1500]["future_time"] = 0.5
    assert Trace.load(_write(tmp_path, json.dumps(data))) == big
    data["nodes"][1500]["future_time"] = -0.5
    with pytest.raises(TraceFileError, match=r"field nodes\[1500\]\.future_time must be >= 0"):
        Trace.load(_write(tmp_path, json.dumps(data)))


def _set(path: tuple[object, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        target: Any = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_set(("nodes", 1234, "fwd_time"), -1.0), r"nodes\[1234\]\.fwd_time must be >= 0"),
        (_set(("nodes", 1234, "kind"), "layer"), r"nodes\[1234\]\.kind is 'layer'"),
        (
            _set(("nodes", 77, "inputs", 0, "shape"), [3, -1]),
            r"nodes\[77\]\.inputs\[0\]\.shape\[1\] must be >= 0",
        ),
        (
            _set(("nodes", 77, "inputs", 0, "shape"), [32.0, 64]),
            r"nodes\[77\]\.inputs\[0\]\.shape\[0\] must be an integer, got 32\.0",
        ),
        (_set(("nodes", 900, "parent"), 1999), r"nodes\[900\]\.parent is 1999"),
        (_set(("edges", 700, "dst"), 10**6), r"edges\[700\]\.dst is 1000000, but the trace"),
        (_set(("modules", 300, "params"), "many"), r"modules\[300\]\.params must be an integer"),
        (_set(("nodes", 5, "outputs"), {}), r"nodes\[5\]\.outputs must be a list, got \{\}"),
    ],
    ids=[
        "negative-time",
        "kind",
        "negative-dim",
        "float-dim",
        "parent",
        "edge",
        "params",
        "outputs-object",
    ],
)
def test_a_bad_record_deep_in_a_big_file_is_named(
    tmp_path: Path, big: Trace, edit: Callable[[dict[str, Any]], None], message: str
) -> None:
    data = trace_to_dict(big)
    edit(data)
    with pytest.raises(TraceFileError, match=rf"t\.json: field {message}"):
        Trace.load(_write(tmp_path, json.dumps(data, separators=(",", ":"))))


@pytest.mark.parametrize(
    "cut",
    [
        lambda t: t[: len(t) // 2],
        lambda t: t + " x",
        lambda t: t.replace("},{", "}{", 1),
        lambda t: t.replace(',"edges":', ',"edges"', 1),
        lambda t: t.replace('"edges":[', '"edges":[,', 1),
        lambda t: t.replace('"edges":[', '"edges":[1,', 1).replace("]}]", "]}", 1),
        lambda t: t.replace(',"modules":', ",modules:", 1),
    ],
    ids=[
        "truncated",
        "trailing-text",
        "missing-comma",
        "missing-colon",
        "leading-comma",
        "unclosed",
        "unquoted-key",
    ],
)
def test_broken_json_names_line_and_column_as_json_does(
    tmp_path: Path, big: Trace, cut: Callable[[str], str]
) -> None:
    big.save(tmp_path / "good.json")
    text = cut((tmp_path / "good.json").read_text())
    with pytest.raises(json.JSONDecodeError) as expected:
        json.loads(text)
    e = expected.value
    where = rf"line {e.lineno}, column {e.colno}: {e.msg}"
    with pytest.raises(TraceFileError, match=rf"t\.json: not valid JSON \({where}\)"):
        Trace.load(_write(tmp_path, text))
