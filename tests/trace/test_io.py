from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import labkit
from labkit.trace import Trace, TraceFileError
from tests.trace._models import structured_inputs, zoo


@pytest.mark.parametrize("name", ["rescnn", "structured", "branchy"])
def test_round_trip_equal(tmp_path: Path, name: str) -> None:
    model, args, kwargs = zoo()[name]
    t = labkit.trace(model, *args, **kwargs)
    path = tmp_path / "t.json"
    t.save(path)
    back = Trace.load(path)
    assert back == t
    assert back.summary() == t.summary()
    assert json.loads(path.read_text())["version"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["t.json"]  # no temporary left


def test_merged_trace_round_trips(tmp_path: Path) -> None:
    model, args, _ = zoo()["branchy"]
    m = Trace.merge(labkit.trace(model, *args), labkit.trace(model, -args[0]))
    m.save(tmp_path / "m.json")
    assert Trace.load(tmp_path / "m.json") == m


def test_corrupt_file_names_file_and_problem(tmp_path: Path) -> None:
    model, args, _ = zoo()["mlp"]
    path = tmp_path / "t.json"
    labkit.trace(model, *args).save(path)
    path.write_text(path.read_text()[:-40])
    with pytest.raises(TraceFileError, match=rf"{path}: not valid JSON \(line 1, column \d+"):
        Trace.load(path)


def test_unknown_version_and_other_json(tmp_path: Path) -> None:
    model, args, _ = zoo()["mlp"]
    path = tmp_path / "t.json"
    labkit.trace(model, *args).save(path)
    data = json.loads(path.read_text())
    data["version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(TraceFileError, match=r"t\.json: trace schema version 99 is not supported"):
        Trace.load(path)
    path.write_text('{"hello": 1}')
    with pytest.raises(TraceFileError, match="not a labkit trace"):
        Trace.load(path)
    data["version"] = 1
    del data["nodes"]
    path.write_text(json.dumps(data))
    with pytest.raises(TraceFileError, match=r"t\.json: field nodes is missing"):
        Trace.load(path)
    with pytest.raises(TraceFileError, match="no such trace file"):
        Trace.load(tmp_path / "missing.json")


def test_failed_save_leaves_old_file(tmp_path: Path) -> None:
    model, args, _ = zoo()["mlp"]
    t = labkit.trace(model, *args)
    path = tmp_path / "t.json"
    t.save(path)
    before = path.read_text()
    bad = t.replace(meta=t.meta.__class__(**{**t.meta.__dict__, "forward_time": float("nan")}))
    with pytest.raises(ValueError):
        bad.save(path)
    assert path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]


def test_structured_names_survive() -> None:
    from tests.trace._models import Structured

    args, kwargs = structured_inputs()
    t = labkit.trace(Structured(), *args, **kwargs)
    names = {n.name for n in t.nodes if n.kind in ("input", "output")}
    assert {"batch.image", "batch.extra", "pair[0]", "pair[1]", "scale['w']"} <= names
    assert {"output['out'].logits", "output['out'].features", "output['aux'][0]"} <= names
    assert isinstance(t.to_dict()["nodes"], list)
    assert torch.is_tensor(args[0].image)  # inputs untouched
