"""Stop requests that reach a fit while its cell runs.

A running cell keeps the kernel from reading widget messages, so the dashboard's Stop
button cannot rely on them. Instead the kernel side registers the fit's stop file (the
file :class:`~labkit.train._callback.LabCallback` polls on every rank) under a random
token in Jupyter's runtime directory, the button posts the token to the server extension
(``POST /labkit/api/stop``), and the server creates the stop file. The trainer sees it
within ``FILE_CHECK_S`` and stops every rank after the current step, keeping a checkpoint.

The browser never names a path: only fits registered by a kernel can be stopped, and
only their stop file is written. Both sides use this module (the dashboard registers, the
server extension requests), so it sits at the package root, below both; the old path
``labkit.server.stops`` still imports it.

Example:
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> token = register(d / "STOP", root=d / "registry")
    >>> request(token, root=d / "registry") == d / "STOP", (d / "STOP").exists()
    (True, True)
    >>> unregister(token, root=d / "registry")
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path

__all__ = [
    "StopRequestError",
    "UnknownStopToken",
    "register",
    "registry_dir",
    "request",
    "unregister",
]

_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
STOP_NAME = "STOP"  # labkit.train._events.STOP_FILE (not imported: the server stays light)


class StopRequestError(LookupError):
    """A stop request that cannot be carried out; the message says why."""


class UnknownStopToken(StopRequestError):
    """No running fit is registered under the token."""


def registry_dir() -> Path:
    """Where kernels register their fits: ``<jupyter runtime dir>/labkit-stop``.

    A kernel inherits the server's environment, so both sides find the same folder.
    """
    from jupyter_core.paths import jupyter_runtime_dir

    return Path(jupyter_runtime_dir()) / "labkit-stop"


def register(stop_file: str | os.PathLike[str], *, root: Path | None = None) -> str:
    """Register ``stop_file`` (a fit's stop file); returns the token that stops it."""
    root = root or registry_dir()
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(18)
    entry = root / token
    tmp = entry.with_suffix(".tmp")
    tmp.write_text(str(Path(stop_file).resolve()))
    tmp.replace(entry)
    return token


def unregister(token: str, *, root: Path | None = None) -> None:
    """Forget a token (the fit ended); unknown tokens are ignored."""
    if _TOKEN.match(token or ""):
        (root or registry_dir()).joinpath(token).unlink(missing_ok=True)


def request(token: str, *, root: Path | None = None) -> Path:
    """Create the stop file registered under ``token``; returns its path.

    Raises:
        StopRequestError: the token is malformed, unknown (the fit ended or was never
            registered here), or its run folder is gone.
    """
    if not isinstance(token, str) or not _TOKEN.match(token):
        raise StopRequestError("send the dashboard's stop token (letters, digits, - and _)")
    entry = (root or registry_dir()) / token
    try:
        target = Path(entry.read_text().strip())
    except FileNotFoundError:
        raise UnknownStopToken(
            "no running fit has this stop token (it ended, or its kernel uses another "
            "Jupyter runtime directory)"
        ) from None
    if target.name != STOP_NAME or not target.is_absolute():
        raise StopRequestError(f"registry entry {entry} does not name a labkit stop file")
    if not target.parent.is_dir():
        raise StopRequestError(f"the run folder {target.parent} no longer exists")
    target.touch()
    return target
