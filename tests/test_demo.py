from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import labkit


def test_demo_writes_trace_summary_html_report_and_tensorboard(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "labkit.demo", "--out", str(out), "--epochs", "3"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["val_accuracy"] > 0.85  # digits are easy: a 3-epoch MLP gets >0.9
    trace = labkit.Trace.load(out / "trace.json")
    assert trace.total_params == report["params"] == 64 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10
    assert "Linear" in (out / "summary.txt").read_text()
    # fp32 baseline plus the three recipes, each measured (no error rows)
    assert list(report["recipes"]) == ["fp32", "bf16-mixed", "checkpoint", "bf16 + checkpoint"]
    assert all(r["error"] is None and r["speedup"] > 0 for r in report["recipes"].values())

    page = (out / "report.html").read_text()
    for section in ("graph", "layers", "memory", "recipes", "training"):
        assert f"<h2 id='{section}'>" in page, section
    # self-contained: graph, profile bars, memory timeline, training curves inline; no links out
    assert len(re.findall(r'src="data:image/png;base64,', page)) >= 4
    assert "http://" not in page and "https://" not in page
    assert "bf16 + checkpoint" in page

    events = list(Path(report["tensorboard"]).rglob("events.out.tfevents.*"))
    assert events, "no TensorBoard event file"
    for path in (out / "report.json", out / "report.html", Path(report["tensorboard"])):
        assert str(path) in proc.stdout
