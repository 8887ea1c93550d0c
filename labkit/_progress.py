"""Progress of one long call: a bar in a notebook, one ``\\r``-updated line on a terminal.

``labkit.trace``, ``memory``, ``plan``, ``compare``, ``tune`` and ``plan.max_batch_size``
run inside :func:`progress`: quick calls print nothing (the first line appears only after
:data:`DELAY` seconds), a long one names its pass and the share done
(``labkit.trace: timing pass 3 of 5 [52%]``), and a Ctrl-C says what was done before the
``KeyboardInterrupt`` goes on. A call made inside another's progress (the plans
``max_batch_size`` makes) shows nothing of its own. In a notebook the bar is tqdm's
notebook bar when tqdm and ipywidgets import, else the same plain line; nothing here is
imported before a line is due, so ``import labkit`` needs neither.

Example:
    >>> import io
    >>> now = [0.0]
    >>> out = io.StringIO()
    >>> with Progress("labkit.trace", clock=lambda: now[0], stream=out, notebook=False) as p:
    ...     p(0.2, "recording the step")  # before the delay: nothing shown
    ...     now[0] = 3.0
    ...     p(0.6, "timing pass 3 of 5")
    >>> out.getvalue().split("\\r")[1].strip()
    'labkit.trace: timing pass 3 of 5 [60%]'
"""

from __future__ import annotations

import contextvars
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import IO, Any, cast

__all__ = ["DELAY", "Progress", "ProgressOption", "progress"]

DELAY = 2.0  # seconds before anything is shown: a quick call prints nothing
INTERVAL = 0.2  # seconds between two redraws at most (Jupyter drops floods of output)
_WIDTH = 100  # characters of the terminal line (padded, so a shorter one overwrites)

ProgressOption = bool | Callable[[float, str], None] | None
_CURRENT: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "labkit_progress", default=None
)


class Progress:
    """The progress of one call; a context manager, and a ``(share, message)`` callback.

    Args:
        what: The call, first on the line (``"labkit.trace"``).
        enabled: ``False`` shows nothing (``progress=False``).
        callback: Send ``(share, message)`` here instead of showing anything (a
            ``progress=`` function of ``compare`` or ``tune``).
        delay: Seconds before the first line (or bar) is shown (default :data:`DELAY`).
        clock: Seconds, monotonic (tests give a fake one).
        stream: Where the terminal line goes; default ``sys.stderr`` at the time of writing.
        notebook: Draw tqdm's notebook bar (``None``: when running in a Jupyter kernel and
            tqdm and ipywidgets import).
        after: What a Ctrl-C leaves (``"the model and inputs are as before the call"``),
            said after what was done.

    Example:
        >>> Progress("labkit.plan", enabled=False)
        Progress('labkit.plan', off)
    """

    def __init__(
        self,
        what: str,
        *,
        enabled: bool = True,
        callback: Callable[[float, str], None] | None = None,
        delay: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        stream: IO[str] | None = None,
        notebook: bool | None = None,
        after: str = "",
    ) -> None:
        self.what, self.enabled, self.callback, self.after = what, enabled, callback, after
        self.delay = DELAY if delay is None else delay
        self.clock, self.stream, self.notebook = clock, stream, notebook
        self.share, self.message = 0.0, "starting"
        self.shown = False  # a line or a bar was drawn
        self._start = 0.0
        self._last = -INTERVAL
        self._bar: Any = None
        self._token: contextvars.Token[Progress | None] | None = None
        self._inner = False  # inside another call's progress: silent

    def __repr__(self) -> str:
        state = "off" if not self.enabled else f"{self.share:.0%} {self.message!r}"
        return f"Progress({self.what!r}, {state})"

    # ------------------------------------------------------------------ lifetime
    def __enter__(self) -> Progress:
        self._inner = _CURRENT.get() is not None
        self._token = _CURRENT.set(self)
        self._start = self.clock()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None
        if isinstance(exc, KeyboardInterrupt) and self._active():
            self.stopped(exc, after=self.after)
        else:
            self._close()

    @property
    def quiet(self) -> bool:
        """Nothing is shown (turned off, or inside another call's progress)."""
        return not self._active()

    def _active(self) -> bool:
        return self.enabled and not self._inner

    # ------------------------------------------------------------------ updates
    def __call__(self, share: float, message: str) -> None:
        """The call is ``share`` (0..1) done and now at ``message`` (``"batch 64"``)."""
        if not self._active():
            return
        self.share, self.message = min(1.0, max(0.0, float(share))), message
        if self.callback is not None:
            self.callback(self.share, message)
            return
        now = self.clock()
        if now - self._start < self.delay or now - self._last < INTERVAL:
            return
        self._last = now
        self._draw()

    def stopped(self, exc: BaseException | None = None, *, after: str = "") -> str:
        """Say what was done when the call was stopped by Ctrl-C (on the stream, and as a
        note of ``exc``); ``after``: what the call kept or put back. Returns the sentence."""
        text = (
            f"{self.what}: stopped by Ctrl-C during {self.message} ({self.share:.0%} done"
            f" in {self.clock() - self._start:.1f} s)" + (f"; {after}" if after else "")
        )
        self._close(final=text)
        add_note = getattr(exc, "add_note", None)  # Python 3.11+
        if add_note is not None:
            add_note(text)
        return text

    # ------------------------------------------------------------------ drawing
    def _line(self) -> str:
        return f"{self.what}: {self.message} [{self.share:.0%}]"

    def _draw(self) -> None:
        if self._bar is None and self._wants_notebook():
            self._bar = _notebook_bar(self.what)
        if self._bar is not None:
            self._bar.n = round(self.share * 100)
            self._bar.set_description_str(f"{self.what}: {self.message}", refresh=False)
            self._bar.refresh()
        else:
            out = self.stream or sys.stderr
            out.write("\r" + self._line()[:_WIDTH].ljust(_WIDTH))
            out.flush()
        self.shown = True

    def _close(self, final: str = "") -> None:
        if self._bar is not None:
            if final:
                self._bar.set_description_str(final, refresh=False)
            self._bar.close()
            self._bar = None
        elif self.shown and not final:
            out = self.stream or sys.stderr
            out.write("\r" + " " * _WIDTH + "\r")  # the line goes: the result follows
            out.flush()
        if final:
            out = self.stream or sys.stderr
            out.write(
                ("\r" if self.shown else "") + final.ljust(_WIDTH if self.shown else 0) + "\n"
            )
            out.flush()
        self.shown = False

    def _wants_notebook(self) -> bool:
        if self.notebook is None:
            self.notebook = _in_kernel()
        return bool(self.notebook)


def progress(what: str, option: object = True, **settings: Any) -> Progress:
    """The :class:`Progress` of a call given its ``progress=`` option: ``True`` (or
    ``None``) shows it, ``False`` shows nothing, a function ``(share, message)`` receives it.

    Example:
        >>> progress("labkit.memory", False).enabled
        False
    """
    if callable(option):
        return Progress(what, callback=cast(Callable[[float, str], None], option), **settings)
    if option is not None and not isinstance(option, bool):
        raise TypeError(
            f"{what}(progress=...) takes True, False or a function (share, message), got "
            f"{type(option).__name__}"
        )
    return Progress(what, enabled=option is not False, **settings)


def _in_kernel() -> bool:
    """Running in a Jupyter kernel (IPython's ZMQ shell), where a widget bar can show."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    shell = ipython.get_ipython()
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _notebook_bar(what: str) -> Any:
    """tqdm's notebook bar (0..100), or ``None`` when tqdm or ipywidgets is missing."""
    try:
        import ipywidgets  # noqa: F401  # tqdm.notebook draws with it
        from tqdm.notebook import tqdm as notebook_tqdm  # type: ignore[import-untyped]
    except ImportError:
        return None
    return notebook_tqdm(total=100, desc=what, leave=False, bar_format="{l_bar}{bar}")
