"""Small real filesystems for the fault table: a tmpfs, tiny or read-only (needs root)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SKIP_REASON = (
    "mounting a tmpfs needs root with CAP_SYS_ADMIN; the same logic is covered without a "
    "mount by tests/test_paths.py and tests/train/test_checkpoint.py"
)


def mount_tmpfs(target: Path, size: str, *, readonly: bool = False) -> None:
    """Mount a fresh tmpfs of ``size`` (``"1m"``) at ``target``; skip the test if not allowed."""
    if os.geteuid() != 0:
        pytest.skip(SKIP_REASON)
    target.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0777" + (",ro" if readonly else "")
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode:
        pytest.skip(f"{SKIP_REASON} ({proc.stderr.strip() or proc.returncode})")


def unmount(target: Path) -> None:
    subprocess.run(["umount", "-l", str(target)], check=False, capture_output=True)


def remount_readonly(target: Path) -> None:
    """Make a mounted tmpfs read-only (after putting files in it)."""
    subprocess.run(["mount", "-o", "remount,ro", str(target)], check=True, capture_output=True)
