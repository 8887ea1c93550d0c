"""The README's quickstart runs as written, and every `make` target it names exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def quickstart() -> str:
    """The first ```python block under the '## Quickstart' heading."""
    section = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "README.md: no ```python block under '## Quickstart'"
    return match.group(1)


def test_quickstart_is_short() -> None:
    lines = [ln for ln in quickstart().splitlines() if ln.strip() and not ln.startswith(" ")]
    imports = [ln for ln in lines if ln.startswith(("import ", "from "))]
    assert len(lines) - len(imports) <= 10, "the quickstart should stay about ten lines"


@pytest.mark.slow
def test_quickstart_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, f"quickstart failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Linear" in done.stdout  # the per-layer table
    assert "peak" in done.stdout  # the memory summary
    assert "bf16-mixed" in done.stdout  # the comparison
    assert "status='finished'" in done.stdout  # the Run
    assert list((tmp_path / "runs" / "quickstart").rglob("events.out.tfevents.*"))


def own_loop() -> str:
    """The quickstart's ```python block that watches a loop of one's own (labkit.watch)."""
    section = README.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    blocks = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "labkit.watch(" in b]
    assert blocks, "README.md: no ```python block with labkit.watch under '## Quickstart'"
    return blocks[0]


@pytest.mark.slow
def test_own_loop_block_runs_as_written(tmp_path: Path) -> None:
    script = tmp_path / "own_loop.py"
    script.write_text(own_loop(), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, f"own loop failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "status='finished', steps=8" in done.stdout
    run = tmp_path / "runs" / "own-loop"
    assert (run / "run.json").exists() and list(run.rglob("events.out.tfevents.*"))


def test_make_targets_named_in_readme_exist() -> None:
    named = set(re.findall(r"(?:^|`)make ([a-z][\w-]*)", README, re.M))
    assert {"lab", "test", "demo", "bench"} <= named
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w-]+):", makefile, re.M))
    assert named <= targets, f"README names make targets the Makefile lacks: {named - targets}"


def test_files_and_scripts_named_in_readme_exist() -> None:
    paths = set(re.findall(r"`((?:docs|benchmarks|notebooks|scripts|tests)/[\w./-]+)`", README))
    paths |= set(re.findall(r"\]\((docs/[\w./-]+)\)", README))
    missing = [p for p in sorted(paths) if "<" not in p and not (ROOT / p).exists()]
    assert not missing, f"README names files that do not exist: {missing}"
    for name in re.findall(r"`(\d\d-[\w-]+)`", README):
        assert (ROOT / "notebooks" / f"{name}.ipynb").exists(), name
