"""Fault table, verify: what a side starts, reads or waits for (issue 35, item 1).

A notebook reading ``sys.stdin.readline()`` ended after the limit with a traceback
(``subprocess.TimeoutExpired``); one starting ``subprocess.Popen(['sleep', '1000'])`` made
verify wait the whole ``--timeout`` and left the child running. Now each side reads
``/dev/null``, runs in a process group of its own that is killed when it ends, and a
timeout is one line naming the side, the limit and ``--timeout``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from labkit.cli import main
from tests.promote._notebooks import numbered, write_notebook


def _verify(capsys: pytest.CaptureFixture[str], nb: Path, *args: str) -> tuple[int, str, str]:
    status = main(["promote", str(nb), "--verify", "-q", "--force", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def _running(token: str) -> list[int]:
    """Pids whose command line holds ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if token.encode() in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def test_a_notebook_reading_stdin_reads_eof_on_both_sides(tmp_path: Path) -> None:
    """Run as from a terminal: verify's own stdin is open and nobody writes to it."""
    nb = write_notebook(
        tmp_path / "stdin.ipynb",
        numbered("import sys", "line = sys.stdin.readline()\nprint('read', repr(line))"),
    )
    cmd = [
        sys.executable,
        "-m",
        "labkit.cli",
        "promote",
        str(nb),
        "--verify",
        "-q",
        "--timeout",
        "60",
    ]
    logs = [tmp_path / "out.txt", tmp_path / "err.txt"]
    with logs[0].open("w") as fo, logs[1].open("w") as fe:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=fo, stderr=fe)
        try:
            proc.wait(timeout=300)  # stdin stays open all along (communicate would close it)
        finally:
            proc.kill()
            assert proc.stdin is not None
            proc.stdin.close()
    out, err = (log.read_text() for log in logs)
    assert proc.returncode == 0, err[-2000:]
    assert "verify: identical (1 lines)" in out
    assert "Traceback" not in out + err


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc to find the child")
def test_a_child_the_notebook_starts_neither_holds_verify_nor_outlives_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = f"1000.{os.getpid()}{time.monotonic_ns() % 10**6}"  # sleep's argument, unique
    nb = write_notebook(
        tmp_path / "child.ipynb",
        numbered(
            "import subprocess",
            f"child = subprocess.Popen(['sleep', '{token}'])\nprint('started')",
        ),
    )
    limit = 120
    began = time.monotonic()
    status, out, err = _verify(capsys, nb, "--timeout", str(limit))
    took = time.monotonic() - began
    assert status == 0, err
    assert "verify: identical (1 lines)" in out
    assert took < limit * 0.75, f"verify took {took:.0f} s of a {limit} s limit"
    deadline = time.monotonic() + 5  # SIGKILL is asynchronous: give the kernel a moment
    while _running(token) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running(token) == []


@pytest.mark.parametrize("side", ["notebook", "script"])
def test_a_timeout_is_one_line_naming_the_side_the_limit_and_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], side: str
) -> None:
    # only the chosen side sleeps: a kernel has ipykernel imported, the script has not
    where = "in" if side == "notebook" else "not in"
    nb = write_notebook(
        tmp_path / "slow.ipynb",
        numbered(
            "import sys\nimport time",
            f"if 'ipykernel' {where} sys.modules:\n    time.sleep(1000)\nprint('done')",
        ),
    )
    status, out, err = _verify(capsys, nb, "--timeout", "8")
    assert status == 1
    lines = [line for line in err.splitlines() if "verify" in line]
    assert len(lines) == 1, err
    assert "Traceback" not in out + err
    line = lines[0]
    assert f"the {side}" in line and "8 s" in line and "--timeout" in line, line
