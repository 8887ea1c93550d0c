"""Follow the README on a fresh clone: its own commands, nothing else.

`make lab` opens JupyterLab and waits, and `make test` is what runs this very suite, so
the README command run here is `make demo`: the same set-up from nothing (new venv, CPU
torch, npm builds) and then the headless walkthrough.

The clone-and-set-up test is `make test-fresh-clone`, not part of `make test`: CI already runs
`make test` on a fresh clone in a fresh environment (the same set-up from nothing), and
doing it a second time inside the suite cost 2-3.5 minutes of a 20-minute budget. What the
README must say is checked here in every run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    return re.findall(r"^\s*(make [a-z-]+)\b", readme, flags=re.MULTILINE)


def test_readme_leads_with_the_two_commands_and_names_the_others() -> None:
    commands = _readme_commands()
    assert commands[:2] == ["make lab", "make test"], "the README must lead with the two commands"
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for name in ("make demo", "make test-fast", "make test-fresh-clone"):
        assert name in readme, f"README.md does not mention {name}"
        assert f"\n{name.split()[1]}:" in makefile, f"the Makefile has no target for {name}"


@pytest.mark.slow
@pytest.mark.fresh_clone
@pytest.mark.timeout(1500)
@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to clone the repository")
def test_make_demo_from_the_readme_on_a_fresh_clone(tmp_path: Path) -> None:
    assert _readme_commands()[:2] == ["make lab", "make test"]
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
