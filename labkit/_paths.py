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

Every file labkit *reads* (traces, memory reports, plans, run records, the events
stream, checkpoints) is opened by :func:`open_input` / :func:`read_input`: a regular file
(a FIFO, device, socket or folder is refused by name, and opening never blocks), at most
``max_bytes`` long (checked before a byte is read). Errors are :class:`InputFileError`.

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
import stat
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from labkit._format import fmt_bytes

__all__ = [
    "MAX_INPUT_BYTES",
    "DiskFullError",
    "InputFileError",
    "OutputPathError",
    "atomic_writer",
    "check_folder",
    "check_free_space",
    "check_name",
    "check_output_file",
    "file_mode",
    "open_input",
    "read_input",
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


MAX_INPUT_BYTES = 256 << 20
"""Largest file a labkit reader opens unless told otherwise (``max_bytes=``)."""


class InputFileError(OSError):
    """A file labkit reads is missing, not a regular file, too large or unreadable.

    Args:
        message: The full report, naming the file and what to do.
        path: The file.
    """

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)

    def __str__(self) -> str:
        return str(self.args[0])


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words (``None`` for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    kinds = (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    )
    return next((word for test, word in kinds if test(mode)), "not a regular file")


def _check_kind_and_size(
    st: os.stat_result, path: Path, what: str, max_bytes: int, limit_hint: str
) -> None:
    kind = _kind(st.st_mode)
    if kind is not None:
        raise InputFileError(
            f"the {what} {path} is {kind}, not a regular file; labkit reads "
            "only regular files (reading it could hang or never end)",
            path,
        )
    if st.st_size > max_bytes:
        raise InputFileError(
            f"the {what} {path} is {fmt_bytes(st.st_size)} ({st.st_size} bytes); labkit reads "
            f"{what}s up to {fmt_bytes(max_bytes)} ({max_bytes} bytes){limit_hint}",
            path,
        )


def open_input(
    path: str | os.PathLike[str],
    *,
    what: str = "file",
    max_bytes: int = MAX_INPUT_BYTES,
    limit_hint: str = "",
) -> IO[bytes]:
    """Open ``path`` for reading (binary) once it is known to be a regular, small-enough file.

    The kind and size are checked with ``stat`` before opening, and again on the open
    descriptor (opened non-blocking, so a FIFO swapped in meanwhile cannot hang the open).

    Args:
        path: The file.
        what: What it is, for messages (``"trace file"``, ``"checkpoint"``).
        max_bytes: Largest size accepted.
        limit_hint: Appended to the size message (how to raise the limit).

    Returns:
        The open file (blocking reads), positioned at its start.

    Raises:
        InputFileError: naming the file: missing, a folder, FIFO, socket or device, larger
            than ``max_bytes``, or not readable.

    Example:
        >>> with open_input("run.json", what="run record") as fh:  # doctest: +SKIP
        ...     data = fh.read()
    """
    p = Path(path)
    try:
        _check_kind_and_size(p.stat(), p, what, max_bytes, limit_hint)
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputFileError(f"no {what} at {p}: the file does not exist", p) from None
    except InputFileError:
        raise
    except OSError as exc:
        raise InputFileError(f"cannot read the {what} {p}: {_reason(exc)}", p) from exc
    try:
        _check_kind_and_size(os.fstat(fd), p, what, max_bytes, limit_hint)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(
    path: str | os.PathLike[str],
    *,
    what: str = "file",
    max_bytes: int = MAX_INPUT_BYTES,
    limit_hint: str = "",
) -> bytes:
    """The bytes of ``path``, checked as :func:`open_input` does (a file that grows past
    ``max_bytes`` while being read is refused too).

    Args:
        path: The file.
        what: What it is, for messages.
        max_bytes: Largest size accepted.
        limit_hint: Appended to the size message.

    Returns:
        The file's contents.

    Raises:
        InputFileError: see :func:`open_input`.
    """
    p = Path(path)
    with open_input(p, what=what, max_bytes=max_bytes, limit_hint=limit_hint) as fh:
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise InputFileError(f"cannot read the {what} {p}: {_reason(exc)}", p) from exc
    if len(data) > max_bytes:
        raise InputFileError(
            f"the {what} {p} grew past {fmt_bytes(max_bytes)} while it was read{limit_hint}", p
        )
    return data


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


def _name_max(folder: Path) -> int:
    try:
        return os.pathconf(_existing_ancestor(folder), "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


def check_name(path: str | os.PathLike[str], *, what: str = "file") -> Path:
    """Refuse a path with a component longer than its filesystem allows (255 bytes).

    Args:
        path: The path about to be written.
        what: What it is, for the message.

    Returns:
        The path.

    Raises:
        OutputPathError: naming the component, its length and the limit.
    """
    path = Path(path)
    limit = _name_max(path.parent)
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > limit:
            which = "its name" if part == path.name else f"the folder name {_short(part)!r}"
            raise OutputPathError(
                f"cannot write the {what} {_short(str(path))!r}: {which} is {size} bytes long "
                f"and this filesystem allows {limit} per name; choose a shorter name",
                path,
            )
    return path


def _short(text: str) -> str:
    return text if len(text) <= 80 else f"{text[:38]}...{text[-38:]}"


def check_folder(
    folder: str | os.PathLike[str], *, what: str = "folder", create: bool = True
) -> Path:
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
    folder = check_name(folder, what=what)
    if folder.exists() and not folder.is_dir():
        raise OutputPathError(
            f"the {what} {folder} is a file, not a folder; choose another path or move the file",
            folder,
        )
    if not folder.exists():
        if not create:
            raise OutputPathError(
                f"the {what} {folder} does not exist; create it first "
                "(mkdir -p) or choose another path",
                folder,
            )
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            above = _existing_ancestor(folder)
            reason = f"{above} is a file" if not above.is_dir() else _reason(exc)
            raise OutputPathError(
                f"cannot create the {what} {folder}: {reason}; choose a writable path", folder
            ) from exc
    try:
        fd, probe = tempfile.mkstemp(prefix=".labkit-write-check.", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise OutputPathError(
            f"the {what} {folder} is not writable: {_reason(exc)}; choose a writable path", folder
        ) from exc
    return folder


def check_output_file(
    path: str | os.PathLike[str],
    *,
    force: bool = False,
    what: str = "output",
    create_folder: bool = False,
    force_hint: str = "pass --force (force=True)",
    file_name: str = "name",
) -> Path:
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
    path = check_name(path, what=what)
    if path.is_dir():
        raise OutputPathError(
            f"the {what} {path} is a folder; give a file name (e.g. {path / file_name})", path
        )
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
        path,
        needed or 0,
        free,
    )


@contextlib.contextmanager
def atomic_writer(
    path: str | os.PathLike[str],
    mode: str = "w",
    *,
    what: str = "file",
    needed: int | None = None,
    fsync: bool = True,
) -> Iterator[IO[Any]]:
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
    path = check_name(path, what=what)
    if path.is_dir():
        raise OutputPathError(
            f"the {what} {path} is a folder; remove it or choose another path", path
        )
    if needed is not None:
        check_free_space(path, needed, what=what)
    try:
        # a name near the filesystem's limit still leaves room for the temporary's suffix
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:200]}.", suffix=".tmp", dir=path.parent)
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


def _write_error(
    exc: BaseException, path: Path, tmp: Path, what: str, needed: int | None
) -> OutputPathError | None:
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
        return OutputPathError(
            f"cannot write the {what} {path}: its folder {path.parent} "
            "does not exist; create it first",
            path,
        )
    return OutputPathError(f"cannot write the {what} {path}: {_reason(exc)}", path)
