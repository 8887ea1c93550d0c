"""What a labkit widget leaves in a notebook: the live view and its final-state picture.

Every labkit widget output carries, next to the widget view, a static picture as
images (``image/png``, plus ``image/svg+xml`` where it is small), its figures as
``text/plain``, and the marker :data:`LABKIT_MIME`. Where no widget runs (nbconvert's HTML,
nbviewer, GitHub) the picture shows; in JupyterLab, labkit's extension shows the live view
when the widget's model exists and the picture when it is gone (a reopened notebook, a new
kernel). No ``text/html`` goes into the bundle unless it survives sanitizing (nbconvert's
``sanitize_html``, JupyterLab's "Sanitize HTML output"): a sanitizer escapes ``<img>``,
``<div>``, ``<pre>`` and ``<table>`` into visible text, and a viewer picks ``text/html``
before the image, so such HTML would hide the picture behind its own source
(:func:`sanitizer_safe`). Views that change after they are shown (the dashboard when a fit ends, the
optimize panel when a measurement ends) call :meth:`KeepsPicture.refresh_output`,
which re-sends the output under its display id so the saved notebook holds the final
state, not the first one.
"""

from __future__ import annotations

import base64
import html
import re
import uuid
from typing import Any

LABKIT_MIME = "application/vnd.labkit.view+json"
MONO = "font-family: var(--jp-code-font-family, ui-monospace, 'DejaVu Sans Mono', monospace)"
#: An SVG longer than this (characters) stays out of the bundle; the PNG is always there.
SVG_MAX = 150_000
#: The tags and attributes a sanitizer keeps (bleach's defaults, which nbconvert uses).
_SAFE_TAGS = frozenset(
    {"a", "abbr", "acronym", "b", "blockquote", "code", "em", "i", "li", "ol", "strong", "ul"}
)
_TAG = re.compile(r"<\s*/?\s*([a-zA-Z][\w-]*)([^>]*)>")


class KeepsPicture:
    """Mixin for a widget class: adds the picture to its mimebundle and keeps it current.

    Subclasses implement :meth:`_picture`: ``image/png`` (see :func:`picture_bundle`),
    optionally ``image/svg+xml``, ``text/plain`` and ``text/html`` (kept for ``to_html()``;
    it enters the bundle only when :func:`sanitizer_safe`). Without a ``text/plain`` of
    its own the bundle's is the HTML's text, else the widget's repr.
    """

    _display_id: str | None = None
    #: Pixels per CSS pixel of the picture's PNG (2: drawn at 2x, shown at half its width).
    _picture_scale: int = 1

    def _picture(self) -> dict[str, str]:
        """The static mimetypes for this view now."""
        raise NotImplementedError

    def _labkit_meta(self) -> dict[str, Any]:
        """Extra fields of the :data:`LABKIT_MIME` entry for labkit's extension (none here)."""
        return {}

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        bundle = super()._repr_mimebundle_(**kwargs)  # type: ignore[misc]  # ipywidgets: untyped
        if bundle is None:
            return None
        data, meta = bundle if isinstance(bundle, tuple) else (bundle, {})
        data, meta = dict(data), dict(meta)
        try:
            picture = dict(self._picture())
            if self._picture_scale != 1 and "image/png" in picture:
                width = png_width(base64.b64decode(picture["image/png"]))
                meta["image/png"] = {"width": width // self._picture_scale}
        except Exception as exc:  # a failed picture must not hide the live view
            picture = {"text/plain": f"{type(self).__name__}: no static picture ({exc})"}
        page = picture.pop("text/html", None)
        if page is not None and not sanitizer_safe(page):
            if "text/plain" not in picture:  # the repr, then what the HTML said
                shown = [data.get("text/plain", ""), html_text(page)]
                picture["text/plain"] = "\n\n".join(t for t in shown if t)
        elif page is not None:
            picture["text/html"] = page
        data.update(picture)
        data[LABKIT_MIME] = {"version": 1, "view": type(self).__name__, **self._labkit_meta()}
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


def picture_bundle(png: bytes, text: str, *, svg: str | None = None) -> dict[str, str]:
    """A view's static picture as mimetypes: ``image/png``, ``text/plain`` and, when it is
    at most :data:`SVG_MAX` characters, ``image/svg+xml``.

    Args:
        png: The picture.
        text: Its figures as plain text (a table, a status line): what a viewer without
            images shows.
        svg: The same picture as SVG, if drawn.

    Returns:
        ``{mimetype: data}`` for a mimebundle.

    Example:
        >>> sorted(picture_bundle(b"\\x89PNG", "loss 0.1", svg="<svg/>"))
        ['image/png', 'image/svg+xml', 'text/plain']
    """
    out = {"image/png": png_b64(png), "text/plain": text}
    if svg is not None and len(svg) <= SVG_MAX:
        out["image/svg+xml"] = svg
    return out


def png_width(png: bytes) -> int:
    """A PNG's width in pixels (its IHDR header)."""
    return int.from_bytes(png[16:20], "big")


def sanitizer_safe(page: str) -> bool:
    """Whether ``page`` shows the same after an HTML sanitizer: only the tags and
    attributes bleach keeps by default, and no ``data:`` URI (a sanitizer escapes the
    rest into visible text).

    Example:
        >>> sanitizer_safe("<b>3 runs</b>"), sanitizer_safe('<img src="data:image/png;base64,">')
        (True, False)
    """
    if "data:" in page:
        return False
    for tag, attrs in _TAG.findall(page):
        if tag.lower() not in _SAFE_TAGS:
            return False
        names = {a.lower() for a in re.findall(r"([a-zA-Z-]+)\s*=", attrs)}
        if names - {"href", "title"}:
            return False
    return True


def html_text(page: str) -> str:
    """The text a static HTML picture holds (its ``<pre>`` tables), tags removed."""
    text = re.sub(r"<br\s*/?>|</pre>|</p>|</tr>", "\n", page)
    return html.unescape(re.sub(r"<[^>]+>", "", text)).strip()
