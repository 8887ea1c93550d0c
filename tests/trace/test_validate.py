"""Trace-file validation (labkit/trace/_validate.py): checks follow the model's type hints,
fields a newer labkit adds are tolerated (their numbers still checked), the graph holds."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

import labkit
from labkit.trace import Trace, TraceFileError
from labkit.trace.io import trace_from_dict
from tests.trace._models import zoo


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    model, args, _ = zoo()["branchy"]
    return labkit.trace(model, *args).to_dict()


def _load(data: dict[str, Any]) -> Trace:
    return trace_from_dict(json.loads(json.dumps(data)), source="t.json")


def _child(data: dict[str, Any]) -> int:
    return next(n["id"] for n in data["nodes"] if n["parent"] is not None)


def test_unknown_fields_from_a_newer_labkit_are_tolerated(data: dict[str, Any]) -> None:
    newer = copy.deepcopy(data)
    newer["meta"]["future_time_spread"] = 0.001  # names this labkit does not have
    newer["meta"]["future_runs"] = 5
    newer["nodes"][0]["future_fwd_times"] = [0.1, 0.2]
    newer["future_section"] = {"clock": "wall", "repeats": 3}
    assert _load(newer) == _load(data)


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (("meta", "future_time_spread"), -0.1, r"meta\.future_time_spread must be >= 0"),
        (("meta", "future_runs"), float("nan"), r"meta\.future_runs must be a finite number"),
        (("future_section",), {"repeats": -3}, r"future_section\.repeats must be >= 0"),
    ],
)
def test_unknown_fields_still_get_their_numbers_checked(
    data: dict[str, Any], where: tuple[str, ...], value: Any, message: str
) -> None:
    bad = copy.deepcopy(data)
    target = bad
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    with pytest.raises(TraceFileError, match=rf"t\.json: field {message}"):
        _load(bad)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["meta"].update(calls=True), r"meta\.calls must be an integer, got True"),
        (lambda d: d["meta"].update(calls=1.5), r"meta\.calls must be an integer, got 1\.5"),
        (lambda d: d["meta"].update(model=3), r"meta\.model must be a string, got 3"),
        (lambda d: d["meta"].pop("model"), r"meta\.model is missing"),
        (lambda d: d.update(nodes={}), r"nodes must be a list, got \{\}"),
        (lambda d: d["nodes"][0].update(kind="layer"), r"nodes\[0\]\.kind is 'layer'; it must"),
        (lambda d: d["nodes"][1].update(id=7), r"nodes\[1\]\.id is 7; node ids must be"),
        (
            lambda d: d["nodes"][_child(d)].update(parent=len(d["nodes"]) - 1),
            r"nodes\[\d+\]\.parent is \d+; a parent must be an earlier node",
        ),
        (lambda d: d["edges"][0].update(src=-1), r"edges\[0\]\.src must be >= 0"),
        (
            lambda d: d["nodes"][0]["outputs"][0].update(shape=[3, -4]),
            r"nodes\[0\]\.outputs\[0\]\.shape\[1\] must be >= 0 .*, got -4",
        ),
        (
            lambda d: d["modules"][0].update(params="many"),
            r"modules\[0\]\.params must be an integer, got 'many'",
        ),
        (lambda d: d["meta"].update(notes="text"), r"meta\.notes must be a list, got 'text'"),
        (lambda d: d["meta"].update(runs=-2), r"meta\.runs must be >= 0"),
        (lambda d: d["nodes"][0].update(fwd_iqr=-1e-6), r"nodes\[0\]\.fwd_iqr must be >= 0"),
    ],
)
def test_known_fields_are_checked_by_their_type(
    data: dict[str, Any], edit: Any, message: str
) -> None:
    bad = copy.deepcopy(data)
    edit(bad)
    with pytest.raises(TraceFileError, match=rf"t\.json: field {message}"):
        _load(bad)


def test_memory_trace_validates_and_round_trips(tmp_path: Path) -> None:
    model, args, _ = zoo()["mlp"]
    t = labkit.memory(model, *args).trace
    assert t.memory_meta is not None and t.memory
    t.save(tmp_path / "m.json")
    assert Trace.load(tmp_path / "m.json") == t
    bad = json.loads((tmp_path / "m.json").read_text())
    bad["memory"][0]["bytes"]["activations"] = -5
    with pytest.raises(TraceFileError, match=r"field memory\[0\]\.bytes\.activations must be"):
        _load(bad)


def test_moderate_nesting_under_the_parser_limit_is_still_refused(data: dict[str, Any]) -> None:
    bad = copy.deepcopy(data)
    nested: Any = 1
    for _ in range(100):  # loads fine with json; deeper than any trace
        nested = [nested]
    bad["extra"] = nested
    with pytest.raises(TraceFileError, match=r"t\.json: the JSON nests deeper than 64 levels"):
        _load(bad)


def test_saving_a_nan_names_the_field(tmp_path: Path) -> None:
    model, args, _ = zoo()["mlp"]
    t = labkit.trace(model, *args)
    bad = t.replace(
        nodes=(
            t.nodes[0],
            t.nodes[1].__class__(**{**t.nodes[1].__dict__, "fwd_time": float("inf")}),
            *t.nodes[2:],
        )
    )
    with pytest.raises(TraceFileError, match=rf"{tmp_path / 't.json'}: nodes\[1\]\.fwd_time = inf"):
        bad.save(tmp_path / "t.json")
    assert list(tmp_path.iterdir()) == []
