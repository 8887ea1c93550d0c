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

import importlib
from typing import Any

_LAZY = {
    "GraphView": "labkit.widgets.graph",
    "ProfileView": "labkit.widgets.profile",
    "MemoryTimeline": "labkit.widgets.memory",
    "TraceView": "labkit.widgets.show",
    "Dashboard": "labkit.widgets.dashboard",
    "AttentionView": "labkit.widgets.attention",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'labkit.widgets' has no attribute {name!r}")
    value = getattr(importlib.import_module(target), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
