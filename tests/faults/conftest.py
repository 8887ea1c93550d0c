"""Fixtures for the fault table (tests/faults): small real filesystems.

Where mounting is not allowed (not root, or no CAP_SYS_ADMIN), the tests that need a
really full or read-only filesystem are skipped with the reason; the same logic (free
space checked against ``shutil.disk_usage`` before writing, the old file left in place
by a failed write) is covered without a mount in tests/test_paths.py and
tests/train/test_checkpoint.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults._fs import mount_tmpfs, unmount


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Callable[..., Path]]:
    """``tmpfs("1m", readonly=False)`` mounts a fresh tmpfs under tmp_path, returns its folder."""
    mounted: list[Path] = []

    def make(size: str = "1m", *, readonly: bool = False) -> Path:
        target = tmp_path / f"fs{len(mounted)}"
        mount_tmpfs(target, size, readonly=readonly)
        mounted.append(target)
        return target

    yield make
    for target in reversed(mounted):
        unmount(target)
