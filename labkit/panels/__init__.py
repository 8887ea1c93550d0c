"""Panels: widgets that measure or act, apart from the views.

A view (:mod:`labkit.views`) is a pure function of a Trace; a panel runs something when
asked: :class:`OptimizePanel` measures recipes with :func:`labkit.compare` and applies or
exports one, :class:`AttentionView` runs a GAT to read its attention. Panels call labkit's
public APIs and reuse the views' plumbing (bundles, kept pictures) from :mod:`labkit.views`.
Their front ends stay in ``widgets/src/`` beside the views'.

The panels load lazily: ``import labkit.panels`` does not import anywidget.

Example:
    >>> from labkit.panels import OptimizePanel  # doctest: +SKIP
    >>> OptimizePanel(model, x)                   # doctest: +SKIP
"""

from __future__ import annotations

from labkit._lazy import lazy_exports

_LAZY = {
    "OptimizePanel": "labkit.panels.optimize_panel",
    "AttentionView": "labkit.panels.attention",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
