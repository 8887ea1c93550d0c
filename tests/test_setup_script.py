"""scripts/setup.sh: a repeated set-up skips every step whose inputs did not change."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("python", "widgets-npm", "widgets-build", "extension-npm", "extension-build")


def test_setup_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(ROOT / "scripts" / "setup.sh")], check=True)


def test_repeated_setup_skips_every_step():
    """After `make test`'s set-up nothing is stale: every step says so (nothing re-runs)."""
    proc = subprocess.run(
        [str(ROOT / "scripts" / "setup.sh"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,  # a hang guard; how fast the check is does not decide the test
        check=False,
    )
    assert proc.returncode == 0, f"stale set-up steps:\n{proc.stdout}{proc.stderr}"
    for step in STEPS:
        assert f"[setup] {step}: up to date" in proc.stdout
