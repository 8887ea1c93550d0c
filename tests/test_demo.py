from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import labkit


def test_demo_writes_trace_summary_and_report(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "labkit.demo", "--out", str(out), "--epochs", "3"],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["val_accuracy"] > 0.85  # digits are easy: a 3-epoch MLP gets >0.9
    trace = labkit.Trace.load(out / "trace.json")
    assert trace.total_params == report["params"] == 64 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10
    assert "Linear" in (out / "summary.txt").read_text()
    assert str(out / "report.json") in proc.stdout
