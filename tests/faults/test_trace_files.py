"""Fault table, trace files: each hostile or careless input gets a TraceFileError that names
the field and the value (or the limit), never a bad figure in a view or a deep traceback."""

from __future__ import annotations

import gc
import json
import os
import stat
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import labkit
from benchmarks.trace_io import synthetic_trace
from labkit._gc import no_gc
from labkit._paths import OutputPathError
from labkit.trace import Trace, TraceFileError
from labkit.trace._validate import MAX_DEPTH, MAX_FILE_BYTES
from tests.faults._fs import remount_readonly
from tests.trace._models import zoo


@pytest.fixture(scope="module")
def trace() -> Trace:
    model, args, _ = zoo()["mlp"]
    return labkit.trace(model, *args)


def _edited(tmp_path: Path, trace: Trace, edit: Callable[[dict[str, Any]], None]) -> Path:
    data = trace.to_dict()
    edit(data)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data))  # json.dumps writes NaN as NaN, as a careless tool would
    return path


def _module_index(data: dict[str, Any]) -> int:
    return next(i for i, n in enumerate(data["nodes"]) if n["kind"] == "module")


@pytest.mark.parametrize(
    ("edit", "field", "value"),
    [
        (lambda d: d["meta"].update(forward_time=-1.0), "meta.forward_time", "-1.0"),
        (lambda d: d["meta"].update(backward_time=float("nan")), "meta.backward_time", "nan"),
        (
            lambda d: d["nodes"][_module_index(d)].update(fwd_time="fast"),
            r"nodes\[\d+\]\.fwd_time",
            "'fast'",
        ),
        (
            lambda d: d["nodes"][_module_index(d)].update(fwd_time=-0.5),
            r"nodes\[\d+\]\.fwd_time",
            "-0.5",
        ),
        (
            lambda d: d["nodes"][_module_index(d)].update(flops_fwd=float("inf")),
            r"nodes\[\d+\]\.flops_fwd",
            "inf",
        ),
        (lambda d: d["edges"][0].update(dst=9999), r"edges\[0\]\.dst", "9999"),
        (lambda d: d["meta"].pop("forward_time"), "meta.forward_time", "is missing"),
    ],
    ids=[
        "negative-time",
        "nan-time",
        "string-time",
        "negative-node-time",
        "inf-flops",
        "edge-to-9999",
        "forward_time-missing",
    ],
)
def test_bad_values_name_field_and_value(
    tmp_path: Path, trace: Trace, edit: Callable[[dict[str, Any]], None], field: str, value: str
) -> None:
    path = _edited(tmp_path, trace, edit)
    with pytest.raises(TraceFileError, match=rf"t\.json: field {field} .*{value}") as info:
        Trace.load(path)
    assert not isinstance(info.value.__cause__, IndexError | TypeError | RecursionError)


def test_200000_deep_json_states_the_depth_limit(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text(
        '{"schema": "labkit.trace", "version": 1, "meta": ' + "[" * 200_000 + "]" * 200_000 + "}"
    )
    with pytest.raises(
        TraceFileError, match=rf"deep\.json: the JSON nests deeper than {MAX_DEPTH}"
    ):
        Trace.load(path)


def test_1_gib_file_states_the_size_limit_without_reading_it(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with open(path, "wb") as f:  # sparse: takes no disk space
        f.truncate(1 << 30)
    limit = f"{MAX_FILE_BYTES} bytes"
    with pytest.raises(TraceFileError, match=rf"huge\.json: the file is 1\.00 GiB .*{limit}"):
        Trace.load(path)


def test_a_big_file_loads_equal_in_a_small_multiple_of_its_size_and_parse_time(
    tmp_path: Path,
) -> None:
    """Issue 35: a 203 MiB, 370,009-node file loaded in 150 s with +1.8 GiB of RSS. Here a
    10,000-node file (~6 MiB, the same records): Python's allocations while loading peak
    under 3x the file, and loading takes under 5x the CPU time of parsing its JSON alone
    (~2x here; the reader before took ~6x and ~8x the file). Scale: tests/trace/test_io_scale.py,
    figures: benchmarks/trace_io.py."""
    trace = synthetic_trace(10_000)
    path = tmp_path / "big.json"
    trace.save(path)
    size = path.stat().st_size
    gc.collect()
    tracemalloc.start()
    try:
        back = Trace.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert back == trace
    assert peak <= 3 * size, f"loading peaked at {peak / size:.2f}x the file"
    del back

    def cpu(read: Callable[[], object]) -> float:
        best = float("inf")
        for _ in range(2):
            gc.collect()
            start = time.process_time()
            read()
            best = min(best, time.process_time() - start)
        return best

    def parse() -> object:
        with no_gc():
            return json.loads(path.read_text())

    floor, load = cpu(parse), cpu(lambda: Trace.load(path))
    assert load < 5 * floor, f"Trace.load {load:.2f} s CPU, json.loads {floor:.2f} s"


def test_save_to_a_missing_folder_names_the_target(tmp_path: Path, trace: Trace) -> None:
    target = tmp_path / "missing" / "t.json"
    with pytest.raises(OutputPathError, match=rf"{target}: its folder .*missing does not exist"):
        trace.save(target)


def test_save_on_a_read_only_filesystem_names_the_target(
    tmpfs: Callable[..., Path], trace: Trace
) -> None:
    folder = tmpfs("1m")
    trace.save(folder / "t.json")
    before = (folder / "t.json").read_bytes()
    remount_readonly(folder)
    with pytest.raises(OutputPathError, match=rf"trace file {folder / 't.json'}: .*[Rr]ead-only"):
        trace.save(folder / "t.json")
    assert (folder / "t.json").read_bytes() == before
    assert ".tmp" not in str(os.listdir(folder))


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_trace_file_mode_follows_the_umask(tmp_path: Path, trace: Trace, umask: int) -> None:
    old = os.umask(umask)
    try:
        trace.save(tmp_path / "t.json")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "t.json").stat().st_mode) == 0o666 & ~umask
