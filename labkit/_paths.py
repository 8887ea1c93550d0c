"""Output paths checked once, up front, and files written atomically with the umask's mode.

Every place labkit writes a file the user keeps (a Lab's logdir, checkpoints, trace and
memory files, ``labkit run -o``, ``labkit promote -o``) checks its target here *before*
the work that produces it starts, so a wrong path costs nothing:

- :func:`check_folder`: the folder exists (or is created) and a file can be made in it;
- :func:`check_output_file`: the path is not a folder, its folder exists and is writable,
  and an existing file is replaced only with ``force``;
- :func:`check_free_space`: the filesystem has room for the bytes about to be written;
- :func:`atomic_writer`: write to a temporary sibling, fsync, give it the mode a plain
  ``open()`` would (``0o666`` less the umask; ``mkstemp`` alone makes ``0600``), then
  rename over the target. A failure leaves the old file in place and names the *target*.

Errors are :class:`OutputPathError` (an ``OSError``) naming the path and what to do;
:class:`DiskFullError` adds the bytes needed and free.

Example:
    >>> check_output_file("runs/out.ipynb", force=False)               # doctest: +SKIP
    >>> with atomic_writer("runs/trace.json", "w") as f:               # doctest: +SKIP
    ...     f.write("{}")
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from labkit._format import fmt_bytes

__all__ = [
    "DiskFullError",
    "OutputPathError",
    "atomic_writer",
    "check_folder",
    "check_free_space",
    "check_output_file",
    "file_mode",
]

_umask_lock = threading.Lock()


class OutputPathError(OSError):
    """An output path cannot be written; the message names the path and the fix."""

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)

    def __str__(self) -> str:
        return str(self.args[0])


class DiskFullError(OutputPathError):
    """Not enough free space for a file; ``needed`` and ``free`` are bytes.

    Args:
        message: The full report (names the path, the bytes needed and free).
        path: The file that could not be written.
        needed: Bytes the file needs.
        free: Bytes free on its filesystem.
    """

    def __init__(self, message: str, path: str | os.PathLike[str], needed: int, free: int) -> None:
        super().__init__(message, path)
        self.needed = needed
        self.free = free


def file_mode() -> int:
    """The mode ``open(path, "w")`` would give a new file: ``0o666`` less the umask."""
    try:  # Linux: read it without changing it (os.umask is process-wide, not thread-safe)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_folder(folder: str | os.PathLike[str], *, what: str = "folder",
                 create: bool = True) -> Path:  # fmt: skip
    """Make sure ``folder`` exists (created with its parents when ``create``) and is writable.

    Writability is probed by creating and removing a file, which also catches a read-only
    filesystem and permissions that ``os.access`` gets wrong.

    Args:
        folder: The folder.
        what: What it is, for the message (``"logdir"``, ``"output folder"``).
        create: Create it when missing; else a missing folder is an error.

    Returns:
        The folder as a ``Path``.

    Raises:
        OutputPathError: naming the folder: it is a file, missing, or not writable.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise OutputPathError(f"the {what} {folder} is a file, not a folder; "
                              "choose another path or move the file", folder)  # fmt: skip
    if not folder.exists():
        if not create:
            raise OutputPathError(f"the {what} {folder} does not exist; create it first "
                                  "(mkdir -p) or choose another path", folder)  # fmt: skip
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            above = _existing_ancestor(folder)
            reason = f"{above} is a file" if not above.is_dir() else _reason(exc)
            raise OutputPathError(f"cannot create the {what} {folder}: {reason}; "
                                  "choose a writable path", folder) from exc  # fmt: skip
    try:
        fd, probe = tempfile.mkstemp(prefix=".labkit-write-check.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputPathError(f"the {what} {folder} is not writable: {_reason(exc)}; "
                              "choose a writable path", folder) from exc  # fmt: skip
    return folder


def check_output_file(path: str | os.PathLike[str], *, force: bool = False,
                      what: str = "output", create_folder: bool = False,
                      force_hint: str = "pass --force (force=True)",
                      file_name: str = "name") -> Path:  # fmt: skip
    """Check that ``path`` can be written as a file: before any work that produces it.

    Args:
        path: The file to write.
        force: Allow replacing an existing file.
        what: What it is, for the message.
        create_folder: Create a missing folder (else it is an error).
        force_hint: How the user allows overwriting, for the message.
        file_name: A file name to suggest when ``path`` is a folder.

    Returns:
        The path.

    Raises:
        OutputPathError: the path is a folder, exists without ``force``, or its folder is
            missing or not writable.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"the {what} {path} is a folder; give a file name "
                              f"(e.g. {path / file_name})", path)  # fmt: skip
    if path.exists() and not force:
        raise OutputPathError(f"the {what} {path} exists; {force_hint} to overwrite it", path)
    check_folder(path.parent, what=f"folder of the {what}", create=create_folder)
    return path


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes free for this user on the filesystem that holds (or would hold) ``path``."""
    return shutil.disk_usage(_existing_ancestor(Path(path))).free


def check_free_space(path: str | os.PathLike[str], needed: int, *, what: str = "file") -> None:
    """Raise :class:`DiskFullError` when ``path``'s filesystem has less than ``needed`` bytes free.

    Args:
        path: The file about to be written (or its folder).
        needed: Bytes it will take.
        what: What it is, for the message.
    """
    free = free_bytes(path)
    if needed > free:
        raise _disk_full(Path(path), needed, free, what)


def _disk_full(path: Path, needed: int | None, free: int, what: str) -> DiskFullError:
    need = f"needs {fmt_bytes(needed)} ({needed} bytes)" if needed else "could not be written"
    return DiskFullError(
        f"no space left for the {what} {path}: it {need}, {fmt_bytes(free)} ({free} bytes) "
        "free on that filesystem; free some space or choose another path",
        path, needed or 0, free,
    )  # fmt: skip


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "w", *, what: str = "file",
                  needed: int | None = None, fsync: bool = True) -> Iterator[IO[Any]]:  # fmt: skip
    """Open a temporary sibling of ``path`` for writing; on success it replaces ``path``.

    The new file gets :func:`file_mode` permissions. On any error the temporary file is
    removed and the previous ``path`` (if any) is left as it was; an ``OSError`` (or
    torch's out-of-space ``RuntimeError``) is re-raised as :class:`OutputPathError` /
    :class:`DiskFullError` naming ``path``.

    Args:
        path: The target file; its folder must exist.
        mode: ``"w"`` (text, UTF-8) or ``"wb"``.
        what: What it is, for messages.
        needed: Bytes about to be written, when known: checked against free space first.
        fsync: Flush the data to disk before the rename.

    Yields:
        The open temporary file.
    """
    path = Path(path)
    if path.is_dir():
        raise OutputPathError(f"the {what} {path} is a folder; remove it or choose "
                              "another path", path)  # fmt: skip
    if needed is not None:
        check_free_space(path, needed, what=what)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _translate(exc, path, what, needed) from exc
    try:
        kwargs: dict[str, Any] = {"encoding": "utf-8"} if "b" not in mode else {}
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.chmod(tmp, file_mode())
        os.replace(tmp, path)
    except BaseException as exc:
        error = _write_error(exc, path, Path(tmp), what, needed)
        Path(tmp).unlink(missing_ok=True)
        if error is None:
            raise
        raise error from exc


def _write_error(exc: BaseException, path: Path, tmp: Path, what: str,
                 needed: int | None) -> OutputPathError | None:  # fmt: skip
    """The error to raise for a failed write (``None``: re-raise ``exc`` as it is)."""
    if isinstance(exc, OutputPathError):
        return None
    short_write = isinstance(exc, RuntimeError) and _is_short_write(exc)
    if not isinstance(exc, OSError) and not short_write:
        return None
    written = tmp.stat().st_size if tmp.exists() else 0
    free = free_bytes(path)  # the temporary file still takes `written` of it
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _disk_full(path, needed, free + written, what)
    if isinstance(exc, OSError):
        return _translate(exc, path, what, needed)
    # torch.save's zip writer: no errno; the disk is full when hardly anything is left
    if free < (1 << 20):
        return _disk_full(path, needed, free + written, what)
    return OutputPathError(
        f"cannot write the {what} {path}: the write stopped after {written} bytes "
        f"({str(exc).strip().splitlines()[-1]}); a file size limit or a full quota?",
        path,
    )


def _is_short_write(exc: BaseException) -> bool:
    # torch.save's zip writer reports a short write (disk full) as "unexpected pos" or
    # "file write failed", with no errno
    text = str(exc)
    return "unexpected pos" in text or "write failed" in text


def _translate(exc: OSError, path: Path, what: str, needed: int | None) -> OutputPathError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return _disk_full(path, needed, free_bytes(path), what)
    if not path.parent.is_dir():
        return OutputPathError(f"cannot write the {what} {path}: its folder {path.parent} "
                               "does not exist; create it first", path)  # fmt: skip
    return OutputPathError(f"cannot write the {what} {path}: {_reason(exc)}", path)
