"""Fault table, readers: every file labkit reads is checked as a regular file with a size
limit before it is opened (a FIFO never hangs a reader), and bad content names the file and
the field. Issue 26, item 2."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import labkit
from labkit._paths import InputFileError, OutputPathError, read_input
from labkit.memory import MemoryReport
from labkit.plan.model import Plan
from labkit.trace import Trace, TraceFileError
from labkit.train.checkpoint import CheckpointError, load_checkpoint
from labkit.train.run import Run, RunFileError
from tests.faults._lab import FIT, Counting, lab


def _no_hang(fn: Callable[[], Any], seconds: float = 10.0) -> BaseException | None:
    """Run ``fn`` in a thread; fail if it has not returned after ``seconds`` (it hung)."""
    out: list[BaseException | None] = [None]

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # the error is the result
            out[0] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():  # a daemon thread: left blocked, the test fails
        pytest.fail(f"the reader was still blocked after {seconds} s")
    return out[0]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


READERS: dict[str, tuple[Callable[[Path], Any], type[BaseException]]] = {
    "Trace.load": (Trace.load, TraceFileError),
    "MemoryReport.load": (MemoryReport.load, TraceFileError),
    "Plan.load": (Plan.load, TraceFileError),
    "Run.load": (Run.load, RunFileError),
    "load_checkpoint": (load_checkpoint, CheckpointError),
}


@pytest.mark.parametrize("reader", list(READERS))
def test_a_fifo_is_refused_by_name_without_hanging(fifo: Path, reader: str) -> None:
    fn, error = READERS[reader]
    exc = _no_hang(lambda: fn(fifo))
    assert isinstance(exc, error), exc
    assert str(fifo) in str(exc) and "FIFO" in str(exc)


@pytest.mark.parametrize("reader", list(READERS))
@pytest.mark.parametrize("target", ["/dev/zero", "folder"])
def test_a_device_or_folder_is_refused_by_name(tmp_path: Path, reader: str, target: str) -> None:
    fn, error = READERS[reader]
    path = Path(target) if target.startswith("/") else tmp_path / "f.json"
    if target == "folder":
        path.mkdir()
        (path / "run.json").mkdir()  # Run.load reads <dir>/run.json: a folder too
    exc = _no_hang(lambda: fn(path))
    assert isinstance(exc, error), exc
    assert "not a regular file" in str(exc)


def test_read_input_states_the_size_limit_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(10_000)  # sparse
    with pytest.raises(InputFileError, match=r"big\.json is 9\.77 KiB \(10000 bytes\).*1000 "):
        read_input(big, what="run record", max_bytes=1000)
    with pytest.raises(RunFileError, match=r"big\.json is 9\.77 KiB"):
        Run.load(big, max_bytes=1000)


# ---------------------------------------------------------------- run.json content
def _record(tmp_path: Path) -> dict[str, Any]:
    run = Run(logdir=str(tmp_path), config={"max_epochs": 1}, status="finished")
    run.add_event({"type": "steps", "steps": [{"step": 1, "epoch": 0, "loss": 0.5}]})
    return run.to_dict()


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.json"
    path.write_text(text)
    return path


def test_truncated_run_json_names_file_and_position(tmp_path: Path) -> None:
    text = json.dumps(_record(tmp_path))
    path = _write(tmp_path, text[: len(text) // 2])
    with pytest.raises(RunFileError, match=r"run\.json: the run record is not valid JSON \(line 1"):
        Run.load(path)
    with pytest.raises(RunFileError, match=r"run\.json: .*truncated"):
        Run.load(tmp_path)  # the run directory


def test_a_json_list_is_not_a_run_record(tmp_path: Path) -> None:
    path = _write(tmp_path, json.dumps([_record(tmp_path)]))
    with pytest.raises(RunFileError, match=r"run\.json: a run record is a JSON object, .* a list"):
        Run.load(path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"version": True}, r"field version is True"),
        ({"version": 99}, r"field version is 99"),
        ({"schema": "other"}, r"not a labkit run record \(field schema is 'other'"),
        ({"status": "exploded"}, r"field status is 'exploded'"),
        ({"steps": {"a": 1}}, r"field steps is an object"),
        ({"steps": [1, 2]}, r"field steps\[0\] is a number 1"),
        ({"steps": [{"step": "one", "loss": 1.0}]}, r"field steps\[0\]\.step is 'one'"),
        ({"error": 5}, r"field error is a number 5; .* string or null"),
    ],
)
def test_bad_fields_are_named(tmp_path: Path, edit: dict[str, Any], message: str) -> None:
    path = _write(tmp_path, json.dumps({**_record(tmp_path), **edit}))
    with pytest.raises(RunFileError, match=rf"run\.json: {message}"):
        Run.load(path)


def test_unknown_keys_are_tolerated_as_trace_files_do(tmp_path: Path) -> None:
    data = _record(tmp_path)
    path = _write(tmp_path, json.dumps({**data, "written_by_a_newer_labkit": {"x": 1}}))
    assert Run.load(path) == Run.from_dict(data)


# ---------------------------------------------------------------- trace files
@pytest.fixture(scope="module")
def trace() -> Trace:
    return labkit.trace(nn.Linear(4, 2), torch.randn(3, 4))


def test_trace_version_true_is_refused(tmp_path: Path, trace: Trace) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**trace.to_dict(), "version": True}))
    with pytest.raises(TraceFileError, match=r"t\.json: trace schema version True"):
        Trace.load(path)


def test_trace_save_to_a_300_character_name_is_an_output_path_error(
    tmp_path: Path, trace: Trace
) -> None:
    target = tmp_path / ("t" * 300 + ".json")
    with pytest.raises(OutputPathError, match=r"its name is 305 bytes long .* allows 255"):
        trace.save(target)
    folder = tmp_path / ("d" * 300) / "t.json"
    with pytest.raises(OutputPathError, match=r"the folder name 'ddd.*' is 300 bytes"):
        trace.save(folder)
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------- events and checkpoints
def test_a_fifo_events_file_is_refused_before_fit_and_never_hangs(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "events.jsonl")
    model = Counting()
    exc = _no_hang(lambda: lab(tmp_path, model).fit(max_epochs=1, **FIT), seconds=60)
    assert isinstance(exc, OutputPathError), exc
    assert "FIFO" in str(exc) and "events.jsonl" in str(exc)
    assert model.calls == 0 and not (tmp_path / "run.json").exists()


def test_read_events_refuses_a_fifo(fifo: Path) -> None:
    from labkit.train._events import read_events

    exc = _no_hang(lambda: read_events(fifo))
    assert isinstance(exc, InputFileError) and "FIFO" in str(exc)


def _chain(exc: BaseException | None) -> str:
    text = ""
    while exc is not None:
        text += f"{type(exc).__name__}: {exc}\n"
        exc = exc.__cause__ or exc.__context__
    return text


def test_random_bytes_last_ckpt_names_the_file_and_never_advises_an_unsafe_load(
    tmp_path: Path,
) -> None:
    lab(tmp_path).fit(max_epochs=1, **FIT)
    last = tmp_path / "checkpoints" / "last.ckpt"
    last.write_bytes(os.urandom(4096))
    before = last.read_bytes(), (tmp_path / "run.json").read_bytes()
    model = Counting()
    with pytest.raises(CheckpointError) as info:
        lab(tmp_path, model).fit(max_epochs=2, ckpt_path="last", **FIT)
    text = _chain(info.value)
    assert str(last) in str(info.value) and "not a file torch.save wrote" in str(info.value)
    assert "weights_only=False" not in text and "`weights_only` set to `False`" not in text
    assert model.calls == 0  # refused before a step ran, the files as they were
    assert (last.read_bytes(), (tmp_path / "run.json").read_bytes()) == before


def test_resuming_into_another_shape_names_checkpoint_parameter_and_shapes(
    tmp_path: Path,
) -> None:
    lab(tmp_path, Counting(width=1)).fit(max_epochs=1, **FIT)
    wide = Counting(width=3)
    last = tmp_path / "checkpoints" / "last.ckpt"
    with pytest.raises(CheckpointError) as info:
        lab(tmp_path, wide).fit(max_epochs=2, resume=True, **FIT)
    message = str(info.value)
    assert str(last) in message
    assert "fc.weight: checkpoint [1, 4], model [3, 4]" in message
    assert "fc.bias: checkpoint [1], model [3]" in message
    assert wide.calls == 0
