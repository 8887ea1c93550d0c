"""Shared base of labkit's trace widgets: bundle loading, throttled updates, static fallback."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any, ClassVar

import anywidget

from labkit._assets import bundle_path
from labkit.views._keep import KeepsPicture
from labkit.views._throttle import Throttle

if TYPE_CHECKING:
    from labkit.trace.model import Trace


class TraceWidget(KeepsPicture, anywidget.AnyWidget):
    """A widget showing one Trace; subclasses set ``_bundle`` and implement ``_apply``.

    The ES module is read from the built bundle ``labkit/views/static/<_bundle>.js``
    when the widget is created, so a missing build fails with the command that fixes it.
    Updates go through a :class:`Throttle`; the mimebundle carries the picture as
    ``image/png`` (SVG too where small) and its figures as ``text/plain``
    (:class:`~labkit.views._keep.KeepsPicture`) so a notebook exported to HTML (sanitized
    or not), opened without a widget manager or reopened without its widget models still
    shows it.
    """

    _bundle: ClassVar[str] = ""
    static_fallback: ClassVar[bool] = True

    @property
    def _esm(self) -> str:  # read by AnyWidget.__init__
        return bundle_path(self._bundle).read_text()

    def __init__(self, trace: Trace, *, throttle: float = 0.25, **kwargs: Any) -> None:
        self._trace = trace
        self._throttle = Throttle(self._apply_locked, interval=throttle)
        # the first state travels in the comm's open message, not as later updates
        super().__init__(**kwargs, **self._state(trace, kwargs))

    @property
    def trace(self) -> Trace:
        """The trace shown now (the last one delivered by :meth:`update`)."""
        return self._trace

    def update(self, trace: Trace) -> None:
        """Show a newer trace; throttled, never blocks, the last one is always shown.

        Args:
            trace: The new trace. When its structure matches the shown one, only the
                figures change (no new layout in the browser).
        """
        self._throttle.submit(trace)

    def flush(self) -> None:
        """Deliver a pending :meth:`update` now."""
        self._throttle.flush()

    def _apply_locked(self, trace: Trace) -> None:
        with self.hold_sync():
            self._apply(trace)

    def _state(self, trace: Trace, settings: dict[str, Any]) -> dict[str, Any]:
        """Trait values showing ``trace`` (``settings`` are the other traits being set)."""
        raise NotImplementedError

    def _apply(self, trace: Trace) -> None:
        self._trace = trace
        for name, value in self._state(trace, {}).items():
            setattr(self, name, value)

    def to_png(self) -> bytes:
        """The view as a PNG picture (matplotlib)."""
        raise NotImplementedError

    def to_html(self) -> str:
        """The view as static HTML (the PNG inline, plus a table where it helps)."""
        return png_img(self.to_png(), alt=type(self).__name__)

    def _picture(self) -> dict[str, str]:
        return self._fallback() if self.static_fallback else {}

    def _fallback(self) -> dict[str, str]:
        """The static mimetypes shown where no widget runs: the PNG and the repr."""
        from labkit.views._keep import picture_bundle

        return picture_bundle(self.to_png(), repr(self))


def png_img(png: bytes, alt: str = "") -> str:
    """An ``<img>`` tag with the PNG inline."""
    b64 = base64.b64encode(png).decode("ascii")
    return f'<img alt="{alt}" src="data:image/png;base64,{b64}" style="max-width:100%"/>'
