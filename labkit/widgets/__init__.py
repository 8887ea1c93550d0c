"""Python side of labkit's widgets (traits only).

The front-end code lives in ``widgets/src/`` of the checkout and is bundled by
esbuild into ``labkit/widgets/static/`` (built, not committed). See
:mod:`labkit.widgets._assets` for how the built bundles are found and checked.

The views load lazily: ``import labkit.widgets`` does not import anywidget.

Example:
    >>> from labkit.widgets import GraphView  # doctest: +SKIP
    >>> GraphView(labkit.trace(model, x))     # doctest: +SKIP
"""

from __future__ import annotations

from labkit._lazy import lazy_exports

_LAZY = {
    "GraphView": "labkit.widgets.graph",
    "ProfileView": "labkit.widgets.profile",
    "MemoryTimeline": "labkit.widgets.memory",
    "TraceView": "labkit.widgets.show",
    "Dashboard": "labkit.widgets.dashboard",
    "AttentionView": "labkit.widgets.attention",
}

__all__ = list(_LAZY)


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
