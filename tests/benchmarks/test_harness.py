"""Structure checks for benchmarks/_harness.py (never timing values)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks._harness import Bench, BenchResult, report


def _fake_clock():
    """A clock that advances 1 s per reading: every sample is exactly 1 s."""
    t = [0.0]

    def now() -> float:
        t[0] += 1.0
        return t[0]

    return now


def test_runs_interleaved_after_warmup():
    order: list[str] = []
    bench = Bench("order", warmup=2, rounds=3)
    bench.add("a", lambda: order.append("a")).add("b", lambda: order.append("b"))
    bench.run()
    assert order == ["a", "b"] * 5


def test_number_calls_per_sample():
    calls: list[int] = []
    Bench("n", warmup=0, rounds=2, number=4).add("a", lambda: calls.append(1)).run()
    assert len(calls) == 8


def test_rows_ratios_and_anchor():
    bench = Bench("r", baseline="b", warmup=1, rounds=5, timer=_fake_clock())
    bench.add("a", lambda: None, anchor="target 1.5x").add("b", lambda: None, anchor="1.00x")
    result = bench.run()
    assert isinstance(result, BenchResult)
    assert [r.name for r in result.rows] == ["a", "b"]
    assert result.baseline == "b"
    assert result.row("b").ratio == 1.0
    assert result.row("a").ratio == 1.0  # fake clock: every sample is 1 s
    assert result.row("a").anchor == "target 1.5x"
    assert result.row("a").samples == 5
    assert result.row("a").median_s == 1.0


def test_baseline_defaults_to_first():
    result = Bench("d", warmup=0, rounds=1).add("x", lambda: None).add("y", lambda: None).run()
    assert result.baseline == "x"


def test_markdown_table():
    bench = Bench("md", warmup=0, rounds=2, timer=_fake_clock())
    bench.add("plain", lambda: None, anchor="1.00x").add("hooked", lambda: None, anchor="<=1.05x")
    lines = bench.run().to_markdown().splitlines()
    assert lines[0] == "### md (baseline: plain)"
    assert lines[2] == "| variant | median | ratio | anchor |"
    assert lines[4] == "| plain | 1.000 s | 1.00x | 1.00x |"
    assert lines[5] == "| hooked | 1.000 s | 1.00x | <=1.05x |"


def test_save_writes_json_atomically(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    result = Bench("js", warmup=0, rounds=2).add("a", lambda: None, anchor="x").run()
    path = report(result, tmp_path)
    assert path == tmp_path / "js.json"
    data = json.loads(path.read_text())
    assert data["name"] == "js"
    assert data["baseline"] == "a"
    assert data["rows"][0]["name"] == "a"
    assert data["rows"][0]["anchor"] == "x"
    assert {"median_s", "min_s", "max_s", "ratio", "samples"} <= set(data["rows"][0])
    assert data["meta"]["rounds"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["js.json"]  # no temp left over
    out = capsys.readouterr().out
    assert "| a |" in out
    assert str(path) in out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rounds": 0}, "rounds >= 1"),
        ({"number": 0}, "number >= 1"),
        ({"warmup": -1}, "warmup >= 0"),
    ],
)
def test_bad_settings_name_the_setting(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Bench("bad", **kwargs)


def test_errors_name_the_variant():
    with pytest.raises(ValueError, match="add at least one variant"):
        Bench("empty").run()
    bench = Bench("dup").add("a", lambda: None)
    with pytest.raises(ValueError, match="'a' added twice"):
        bench.add("a", lambda: None)
    with pytest.raises(ValueError, match="baseline 'zz'"):
        Bench("b", baseline="zz").add("a", lambda: None).run()
    with pytest.raises(KeyError, match="no variant named 'q'"):
        Bench("k", warmup=0, rounds=1).add("a", lambda: None).run().row("q")


def test_repr():
    bench = Bench("rep", baseline="a", warmup=1, rounds=2, number=3).add("a", lambda: None)
    assert repr(bench) == (
        "Bench(name='rep', baseline='a', warmup=1, rounds=2, number=3, variants=['a'])"
    )
    assert repr(bench.variants[0]) == "Variant(name='a', anchor='')"
