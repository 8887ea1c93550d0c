"""Re-attach requests: a reloaded page gets a running fit's live dashboard back.

A page reloaded while a fit's cell runs has lost the dashboard's widget model, and the
kernel, busy in the cell, answers none of ipywidgets' restore messages (they wait on the
kernel's main thread until the cell ends). So the page asks the way Stop does: it posts
the dashboard's token (:mod:`labkit._stops`) to the server extension
(``POST /labkit/api/reattach``), the server leaves a marker file beside the token's
registry entry, and the dashboard's own thread in the kernel, which polls for it, sends
the widget's state again as a new ``comm_open``: the page's widget manager makes the
model from it and the live view is drawn, while the cell keeps running.

Example:
    >>> import tempfile, pathlib
    >>> from labkit._stops import register
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> token = register(d / "STOP", root=d / "registry")
    >>> take(token, root=d / "registry")
    False
    >>> request(token, root=d / "registry")
    >>> take(token, root=d / "registry"), take(token, root=d / "registry")
    (True, False)
"""

from __future__ import annotations

import re
from pathlib import Path

from labkit._stops import StopRequestError, UnknownStopToken, registry_dir

__all__ = ["POLL_S", "request", "take"]

#: How often the kernel side looks for a request (seconds).
POLL_S = 0.2
_SUFFIX = ".reattach"
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,64}$")  # as labkit._stops writes them: never a path


def request(token: str, *, root: Path | None = None) -> None:
    """Ask the kernel holding the fit registered under ``token`` to send its dashboard again.

    Raises:
        StopRequestError: the token is malformed, or no running fit has it
            (:class:`~labkit._stops.UnknownStopToken`: the fit ended, so its kernel is
            free and ipywidgets restores the widget itself).
    """
    if not isinstance(token, str) or not _TOKEN.match(token):
        raise StopRequestError("send the dashboard's token (letters, digits, - and _)")
    root = root or registry_dir()
    if not (root / token).is_file():
        raise UnknownStopToken(
            "no running fit has this token (it ended: its kernel restores the widget "
            "itself, or its kernel uses another Jupyter runtime directory)"
        )
    (root / f"{token}{_SUFFIX}").touch()


def take(token: str, *, root: Path | None = None) -> bool:
    """Whether a re-attach was requested for ``token`` since the last call (clears it)."""
    if not token or not _TOKEN.match(token):
        return False
    marker = (root or registry_dir()) / f"{token}{_SUFFIX}"
    try:
        marker.unlink()
    except FileNotFoundError:
        return False
    return True
