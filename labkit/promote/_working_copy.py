"""A working copy of a notebook's folder, where ``labkit promote --verify`` runs each side.

Verify runs the notebook and the promoted script as the user would, so they write what
they write (a ``logdir``, checkpoints, figures, a cache) relative to their folder. Each
side gets a fresh copy of the notebook's folder instead: inputs read as before, outputs
land in the copy, and every file next to the notebook stays byte for byte as it was.

Left out of the copy: version control and caches (``.git``, ``__pycache__``,
``.ipynb_checkpoints``, ``node_modules``) and virtual environments (a folder holding
``pyvenv.cfg``). Symbolic links are copied as links. A folder too big to copy is refused,
naming its largest entries.

Example:
    >>> import pathlib, tempfile
    >>> src = pathlib.Path(tempfile.mkdtemp()); (src / "data.txt").write_text("1 2 3")
    5
    >>> copy = working_copy(src, pathlib.Path(tempfile.mkdtemp()) / "notebook")
    >>> (copy / "data.txt").read_text()
    '1 2 3'
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from labkit._format import fmt_bytes

__all__ = ["COPY_LIMIT", "CopyError", "working_copy"]

COPY_LIMIT = 4 * 2**30  # bytes one copy may hold
SKIPPED = frozenset({".git", ".hg", ".svn", "__pycache__", ".ipynb_checkpoints", "node_modules"})


class CopyError(RuntimeError):
    """The notebook's folder cannot be copied (too big, or no room for it)."""


def working_copy(folder: Path, dest: Path, *, limit: int = COPY_LIMIT) -> Path:
    """Copy ``folder`` to ``dest`` (which must not exist), keeping modification times.

    Raises:
        CopyError: the folder holds more than ``limit`` bytes, or ``dest``'s filesystem
            has no room for it (nothing is copied then).
    """
    sizes = _sizes(folder)
    total = sum(sizes.values())
    if total > limit:
        biggest = sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
        named = ", ".join(f"{name} ({fmt_bytes(size)})" for name, size in biggest)
        raise CopyError(
            f"verify runs the notebook and the script in copies of {folder}, which holds "
            f"{fmt_bytes(total)} (more than {fmt_bytes(limit)}): largest {named}; move data "
            "out of the notebook's folder and read it from there"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(dest.parent).free
    if total > free:
        raise CopyError(
            f"verify needs {fmt_bytes(total)} in {dest.parent} to copy {folder}; "
            f"{fmt_bytes(free)} is free (set TMPDIR to a roomier folder)"
        )
    shutil.copytree(folder, dest, symlinks=True, ignore=_ignored)
    return dest


def _ignored(where: str, names: list[str]) -> set[str]:
    return {n for n in names if n in SKIPPED or (Path(where, n, "pyvenv.cfg")).is_file()}


def _sizes(folder: Path) -> dict[str, int]:
    """Bytes under each top-level entry of ``folder`` that the copy would hold."""
    out: dict[str, int] = {}
    for entry in os.scandir(folder):
        if entry.name in SKIPPED or _ignored(str(folder), [entry.name]):
            continue
        out[entry.name] = _size(Path(entry.path))
    return out


def _size(path: Path) -> int:
    if path.is_symlink() or not path.is_dir():
        try:
            return path.lstat().st_size
        except OSError:
            return 0
    total = 0
    for where, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if d not in _ignored(where, dirs)]
        for name in files:
            try:
                total += Path(where, name).lstat().st_size
            except OSError:
                continue
    return total
