"""Follow the README on a fresh clone: its own commands, nothing else.

`make lab` opens JupyterLab and waits, and `make test` is what runs this very suite, so
the README command run here is `make demo`: the same set-up from nothing (new venv, CPU
torch, npm builds) and then the headless walkthrough.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(1500)
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to clone the repository")
def test_make_demo_from_the_readme_on_a_fresh_clone(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    commands = re.findall(r"^\s*(make [a-z]+)\b", readme, flags=re.MULTILINE)
    assert commands[:2] == ["make lab", "make test"], "the README must lead with the two commands"
    assert "make demo" in readme
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k not in ("VENV", "VIRTUAL_ENV", "PYTHONPATH")}
    proc = subprocess.run(
        ["make", "demo"], cwd=clone, env=env, capture_output=True, text=True, timeout=1400
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert (clone / ".venv" / "bin" / "labkit").exists()  # the set-up made its own venv
    report = clone / "demo-output" / "report.html"
    assert report.exists() and "report.html" in out
