"""How plain data (a Trace, a MemoryReport, a Plan) is shown without importing its views.

The data classes' ``show()``, ``plot()`` and ``_repr_html_`` look their display up here by
kind (``"trace.show"``, ``"trace.plot"``, ``"trace.html"``, ``"memory.show"``,
``"plan.show"``). The views register themselves when :mod:`labkit.widgets` is imported;
``labkit/__init__`` names that package as the provider to import the first time a display
is asked for, so ``trace.show()`` works without importing the views yourself. Nothing in
the data layers names a view.

Example:
    >>> from labkit import _display
    >>> _display.register("example.twice", lambda x: 2 * x)
    >>> _display.display("example.twice", 21)
    42
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

_VIEWS: dict[str, Callable[..., Any]] = {}
_PROVIDERS: list[str] = []


def register(kind: str, fn: Callable[..., Any]) -> None:
    """Show data of ``kind`` with ``fn(obj, *args, **kwargs)`` (a later call replaces it)."""
    _VIEWS[kind] = fn


def add_provider(module: str) -> None:
    """Import ``module`` (which calls :func:`register`) the first time a kind is missing."""
    if module not in _PROVIDERS:
        _PROVIDERS.append(module)


def view(kind: str) -> Callable[..., Any]:
    """The function registered for ``kind``, importing the providers once if it is missing.

    Raises:
        LookupError: Nothing registers ``kind`` (the views' package is not installed).
    """
    if kind not in _VIEWS:
        for module in _PROVIDERS:
            importlib.import_module(module)
    fn = _VIEWS.get(kind)
    if fn is None:
        raise LookupError(
            f"no display is registered for {kind!r}: import labkit.widgets (it needs anywidget "
            "and matplotlib: `make setup` installs them), or pass your own with "
            f"labkit._display.register({kind!r}, fn)"
        )
    return fn


def display(kind: str, obj: Any, *args: Any, **kwargs: Any) -> Any:
    """Show ``obj`` with the function registered for ``kind``."""
    return view(kind)(obj, *args, **kwargs)
