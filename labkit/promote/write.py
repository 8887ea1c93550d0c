"""Write a file atomically, and never over an existing one unless asked.

The text goes to a temporary file in the target's folder, is flushed and fsynced, then
takes the target's name in one step: ``os.link`` when overwriting is not allowed (it
fails if the name exists, so a file created meanwhile is not clobbered either) or
``os.replace`` with ``force``. A reader never sees half a script, and a failure leaves
the old file (or no file) in place.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["TargetExistsError", "install", "temporary_sibling", "write_atomic"]


class TargetExistsError(FileExistsError):
    """The output file exists and ``force`` was not given; the message names it."""


@contextlib.contextmanager
def temporary_sibling(
    path: str | os.PathLike[str], text: str, *, mode: int = 0o644
) -> Iterator[Path]:
    """A fully written temporary file next to ``path``, removed on exit unless renamed.

    Args:
        path: The final target (the temporary file is created in its folder).
        text: The content.
        mode: File permissions.

    Yields:
        The temporary file's path.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.stem}.", suffix=f"{path.suffix}.tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        yield Path(tmp)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def write_atomic(
    path: str | os.PathLike[str], text: str, *, force: bool = False, mode: int = 0o644
) -> Path:
    """Write ``text`` to ``path`` atomically.

    Args:
        path: Target file; its folder must exist.
        text: The content (UTF-8).
        force: Replace an existing file. Without it an existing file is an error.
        mode: File permissions of the new file.

    Returns:
        The path written.

    Raises:
        TargetExistsError: ``path`` exists and ``force`` is false (nothing is written).
        FileNotFoundError: the folder does not exist.

    Example:
        >>> write_atomic("train.py", "print('hi')\\n")            # doctest: +SKIP
        PosixPath('train.py')
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"{path}: folder {path.parent} does not exist")
    if path.exists() and not force:
        raise TargetExistsError(f"{path} exists; pass --force (force=True) to overwrite it")
    with temporary_sibling(path, text, mode=mode) as tmp:
        install(tmp, path, force=force)
    return path


def install(tmp: Path, path: Path, *, force: bool) -> None:
    """Give the finished temporary file ``tmp`` the name ``path`` in one step."""
    if force:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # fails if path exists: no clobbering, even in a race
    except FileExistsError:
        raise TargetExistsError(
            f"{path} exists; pass --force (force=True) to overwrite it"
        ) from None
    except OSError:  # filesystems without hard links
        if path.exists():
            raise TargetExistsError(
                f"{path} exists; pass --force (force=True) to overwrite it"
            ) from None
        os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
