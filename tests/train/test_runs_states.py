"""labkit.runs lists every run folder in its state: running, crashed, or as it ended (issue 41).

Two tests read a real ``Lab.fit`` running in another process (``_runs_states_script``:
each step waits 0.25 s until a file exists; both fits start at once) while it writes its
folder: one lets it finish, one SIGKILLs it. The others build folders with labkit's own
writers (the logdir lock, the events log, ``Run.save``) in states a fit passes through.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import labkit
from labkit.train._events import EVENTS_FILE, EventLog
from labkit.train._lock import LOCK_FILE, LogdirLock
from labkit.train.run import Run
from labkit.train.run_table import RunRow, runs

ROOT = Path(__file__).resolve().parents[2]


def _start(logdir: Path, go: Path, epochs: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    logdir.mkdir(parents=True, exist_ok=True)
    with open(logdir.parent / f"{logdir.name}.log", "ab") as log:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.train._runs_states_script",
                str(logdir),
                str(go),
                str(epochs),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _log(logdir: Path) -> str:
    return (logdir.parent / f"{logdir.name}.log").read_text()[-3000:]


def _row_when(root: Path, name: str, proc: subprocess.Popen[bytes], ok, what: str) -> RunRow:  # type: ignore[no-untyped-def]
    """Poll ``labkit.runs(root)`` until the row ``name`` satisfies ``ok`` (90 s at most)."""
    deadline = time.monotonic() + 90
    seen: list[str] = []
    while time.monotonic() < deadline:
        rs = runs(root)
        assert not rs.skipped, rs.skipped  # reading never fails on a folder being written
        row = next((r for r in rs if r.name == name), None)
        if row is not None:
            seen.append(row.state)
            if ok(row):
                return row
        if proc.poll() is not None and (row is None or not ok(row)):
            break
        time.sleep(0.05)
    raise AssertionError(
        f"{what}: never seen; states seen {sorted(set(seen))}; "
        f"process rc {proc.poll()}\n{_log(root / name)}"
    )


def _finished_beside(root: Path) -> None:
    """A finished run in the same root, written as a fit writes it (Run.save)."""
    run = Run(logdir=str(root / "done"), config={"lr": 0.1, "source": "lab"})
    for ev in (
        {"type": "start", "t": 1.0},
        {"type": "steps", "steps": [{"step": 1, "epoch": 0, "loss": 0.5, "t": 2.0}]},
        {"type": "end", "status": "finished", "t": 3.0},
    ):
        run.add_event(ev)
    run.save()


@pytest.fixture(scope="module")
def fits(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Two real fits started at once (one interpreter start-up paid for both), beside a
    finished run: ``live`` (4 epochs of 6 steps, waiting 0.25 s a step until its go file
    exists) and ``killed`` (waits forever, until the test kills it)."""
    root = tmp_path_factory.mktemp("states")
    _finished_beside(root)
    go = root / "go"
    procs = {
        "live": _start(root / "live", go, epochs=4),
        "killed": _start(root / "killed", root / "never", epochs=1000),
    }
    yield root, {"go": go, **procs}
    go.touch()
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def test_a_fit_in_another_process_is_listed_running_then_finished(
    fits: tuple[Path, dict[str, Any]],
) -> None:
    tmp_path, started = fits
    go, proc = started["go"], started["live"]
    try:
        row = _row_when(
            tmp_path,
            "live",
            proc,
            lambda r: r.state == "running" and (r.last_step or 0) >= 2,
            "a running row with steps",
        )
        assert row.status == "running" and row.steps >= 2 and row.last_epoch == 0
        assert row.state_note.startswith(f"running: held by pid {proc.pid} on ")
        assert f"last step {row.last_step} (epoch 0)" in row.state_note
        rs = runs(tmp_path)
        assert len(rs.curves["live"]["loss"]["y"]) == rs["live"].steps  # the figures so far
        assert rs["done"].state == "finished" and rs["done"].state_note == ""
        assert "live: running: held by pid" in rs.summary()
        go.touch()  # the steps stop waiting: the fit ends
        assert proc.wait(timeout=120) == 0, _log(tmp_path / "live")
    finally:
        go.touch()
    row = runs(tmp_path)["live"]
    record = Run.load(tmp_path / "live")
    assert (row.state, row.status, row.state_note) == ("finished", "finished", "")
    assert row.steps == len(record.steps) == 24 and row.last_step == 24 and row.last_epoch == 3
    assert not (tmp_path / "live" / LOCK_FILE).exists()


def test_a_sigkilled_fit_is_listed_crashed_naming_its_last_step_epoch_and_time(
    fits: tuple[Path, dict[str, Any]],
) -> None:
    tmp_path, started = fits
    proc = started["killed"]
    try:
        _row_when(
            tmp_path,
            "killed",
            proc,
            lambda r: (r.last_epoch or 0) >= 1,
            "a step of the second epoch",
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    folder = tmp_path / "killed"
    assert (folder / LOCK_FILE).exists() and not (folder / "run.json").exists()
    rs = runs(tmp_path)
    assert not rs.skipped and [r.name for r in rs][:2] == ["done", "killed"]
    row = rs["killed"]
    events = [
        json.loads(line)
        for line in (folder / EVENTS_FILE).read_text().splitlines()
        if line.endswith("}")
    ]
    steps = [s for e in events if e["type"] == "steps" for s in e["steps"]]
    assert row.state == "crashed" and row.status == "crashed"
    assert (row.last_step, row.last_epoch) == (steps[-1]["step"], steps[-1]["epoch"])
    assert row.last_epoch >= 1 and row.steps == len(steps)
    assert row.last_time == max(e["t"] for e in events)
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(row.last_time))
    assert f"last step {row.last_step} (epoch {row.last_epoch}), at {when}" in row.state_note
    assert f"a fit that no longer runs (pid {proc.pid} on " in row.state_note
    assert "last.ckpt resumes it (Lab.fit(resume=True))" in row.state_note
    assert row.last["loss"] == steps[-1]["loss"]
    assert repr(rs).startswith(f"Runs({len(rs)} runs: 1 crashed, {len(rs) - 1} ")
    lines = rs.summary().splitlines()
    assert lines[3].split()[:4] == ["killed", "lab", "crashed", str(row.steps)]
    assert f"killed: {row.state_note}" in lines
    df = rs.to_pandas()
    assert list(df["state"])[:2] == ["finished", "crashed"]
    from labkit.views.runs import rows_payload

    payload = rows_payload(rs)
    assert [(p["state"], p["state_note"]) for p in payload][:2] == [
        ("finished", ""),
        ("crashed", row.state_note),
    ]


def test_torn_event_lines_are_skipped_and_counted(tmp_path: Path) -> None:
    folder = tmp_path / "torn"
    folder.mkdir()
    log = EventLog(folder / EVENTS_FILE)
    log({"type": "start", "t": 10.0})
    log(
        {
            "type": "steps",
            "steps": [
                {"step": 1, "epoch": 0, "loss": 0.9, "t": 11.0},
                {"step": 2, "epoch": 0, "loss": 0.8, "t": 12.0},
            ],
        }
    )
    log.close()
    with open(folder / EVENTS_FILE, "a") as fh:  # a kill in the middle of a write
        fh.write('{"type":"steps","steps":[{"step":3,"ep')
    with LogdirLock.acquire(folder):  # held by this (live) process: running
        row = runs(tmp_path)["torn"]
        assert (row.state, row.steps, row.last_step, row.last["loss"]) == ("running", 2, 2, 0.8)
        assert "torn" not in row.state_note  # a half-written last line is not read yet
    # no lock, no run.json: the fit is gone without its record
    row = runs(tmp_path)["torn"]
    assert row.state == "crashed" and f"no {LOCK_FILE} and no run.json" in row.state_note
    # a resumed fit appends after the torn fragment: that line is skipped and counted
    log = EventLog(folder / EVENTS_FILE)
    log({"type": "start", "t": 20.0})
    log({"type": "steps", "steps": [{"step": 3, "epoch": 1, "loss": 0.7, "t": 21.0}]})
    log.close()
    row = runs(tmp_path)["torn"]
    assert (row.state, row.steps, row.last_step, row.last_epoch) == ("crashed", 3, 3, 1)
    assert row.state_note.endswith(f"; 1 torn line(s) of {EVENTS_FILE} skipped")


def test_an_older_record_under_a_live_lock_is_running_and_a_saved_end_is_final(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "resumed"
    _finished_beside(tmp_path)
    (tmp_path / "done").rename(folder)  # a finished record, ended at t=3
    assert runs(tmp_path)["resumed"].state == "finished"
    with LogdirLock.acquire(folder):  # a fit resuming into the folder: its lock is newer
        log = EventLog(folder / EVENTS_FILE)
        log({"type": "start", "t": time.time()})
        log({"type": "steps", "steps": [{"step": 2, "epoch": 1, "loss": 0.4, "t": time.time()}]})
        row = runs(tmp_path)["resumed"]
        assert (row.state, row.last_step, row.last_epoch) == ("running", 2, 1)
        # the fit saves its record, then releases the lock: the record is final already
        log({"type": "end", "status": "stopped", "t": time.time()})
        log.close()
        run = Run.load(folder)
        run.add_event({"type": "end", "status": "stopped", "t": time.time()})
        run.save(folder / "run.json")
        row = runs(tmp_path)["resumed"]
        assert (row.state, row.state_note) == ("stopped", "")


def test_reading_while_the_record_is_replaced_never_fails(tmp_path: Path) -> None:
    folder = tmp_path / "saving"
    run = Run(logdir=str(folder), config={"source": "lab"})
    run.add_event({"type": "start", "t": 1.0})
    run.add_event({"type": "end", "status": "finished", "t": 2.0})
    run.save()
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            run.add_event({"type": "steps", "steps": [{"step": i, "epoch": 0, "loss": 1 / i}]})
            run.save()

    th = threading.Thread(target=writer)
    th.start()
    try:
        for _ in range(100):
            rs = labkit.runs(tmp_path)
            assert not rs.skipped and rs["saving"].state == "finished"
    finally:
        stop.set()
        th.join()


def test_a_lock_held_by_an_exited_process_not_yet_reaped_is_crashed(tmp_path: Path) -> None:
    folder = tmp_path / "zombie"
    folder.mkdir()
    code = (
        "import os, sys\nfrom labkit.train._lock import LogdirLock\n"
        "LogdirLock.acquire(sys.argv[1])\nos._exit(0)\n"  # exits holding the lock
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (folder / LOCK_FILE).exists():
            time.sleep(0.02)
        while time.monotonic() < deadline:  # exited, not waited for: a zombie
            stat = Path(f"/proc/{proc.pid}/stat").read_bytes()
            if stat[stat.rfind(b")") + 2 :].startswith(b"Z"):
                break
            time.sleep(0.02)
        row = runs(tmp_path)["zombie"]
        assert row.state == "crashed", row.state_note
        assert f"pid {proc.pid} on " in row.state_note and "not yet reaped" in row.state_note
    finally:
        proc.wait()
    row = runs(tmp_path)["zombie"]  # reaped: gone
    assert row.state == "crashed" and "a fit that no longer runs" in row.state_note
