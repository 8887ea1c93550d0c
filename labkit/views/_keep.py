"""What a labkit widget leaves in a notebook: the live view and its final-state picture.

Every labkit widget output carries, next to the widget view, a static picture
(``text/html`` with monospace tables and an inline PNG, plus ``image/png``) and the
marker :data:`LABKIT_MIME`. Where no widget runs (nbconvert's HTML, nbviewer, GitHub)
the picture shows; in JupyterLab, labkit's extension shows the live view when the
widget's model exists and the picture when it is gone (a reopened notebook, a new
kernel). Views that change after they are shown (the dashboard when a fit ends, the
optimize panel when a measurement ends) call :meth:`KeepsPicture.refresh_output`,
which re-sends the output under its display id so the saved notebook holds the final
state, not the first one.
"""

from __future__ import annotations

import base64
import html
import uuid
from typing import Any

LABKIT_MIME = "application/vnd.labkit.view+json"
MONO = "font-family: var(--jp-code-font-family, ui-monospace, 'DejaVu Sans Mono', monospace)"


class KeepsPicture:
    """Mixin for a widget class: adds the picture to its mimebundle and keeps it current.

    Subclasses implement :meth:`_picture` (``text/html`` and optionally ``image/png``).
    """

    _display_id: str | None = None

    def _picture(self) -> dict[str, str]:
        """The static mimetypes for this view now."""
        raise NotImplementedError

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        bundle = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]  # ipywidgets: untyped
        if bundle is None:
            return None
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        data = dict(data)
        try:
            data.update(self._picture())
        except Exception as exc:  # a failed picture must not hide the live view
            data["text/html"] = pre(f"{type(self).__name__}: no static picture ({exc})")
        data[LABKIT_MIME] = {"version": 1, "view": type(self).__name__}
        return data, meta

    def _ipython_display_(self) -> None:
        """Shown under a display id, so :meth:`refresh_output` can replace the picture."""
        from IPython.display import display

        bundle = self._repr_mimebundle_()
        if bundle is None:
            return
        if self._display_id is None:
            self._display_id = uuid.uuid4().hex
        data, meta = bundle
        display(data, metadata=meta, raw=True, display_id=self._display_id)

    def refresh_output(self) -> None:
        """Re-send the shown output with the picture of the current state (any thread)."""
        if self._display_id is None:
            return
        from IPython.display import update_display

        bundle = self._repr_mimebundle_()
        if bundle is not None:
            data, meta = bundle
            update_display(data, metadata=meta, raw=True, display_id=self._display_id)


def pre(text: str) -> str:
    """Text (a table, a status line) as monospace HTML."""
    return f'<pre style="{MONO}; white-space: pre; margin: 4px 0">{html.escape(text)}</pre>'


def png_b64(png: bytes) -> str:
    """PNG bytes as the base64 text a mimebundle carries."""
    return base64.b64encode(png).decode("ascii")
