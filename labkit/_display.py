"""What a lower layer uses of a higher one, looked up by kind instead of imported.

Displays: the data classes' ``show()``, ``plot()`` and ``_repr_html_`` (a Trace, a
MemoryReport, a Plan, Runs) look their display up here by kind (``"trace.show"``,
``"trace.plot"``, ``"trace.html"``, ``"memory.show"``, ``"plan.show"``, ``"runs.show"``),
and ``Lab.fit`` its live dashboard (``"train.dashboard"``). The views register themselves
when :mod:`labkit.views` is imported.

Parts: a full recording (``labkit.trace``, layer 1) keeps its memory timeline with the
memory observer registered as ``"trace.memory"`` by :mod:`labkit.memory.tracker` (layer 2).

``labkit/__init__`` names the module that provides each kind (:func:`add_provider`); it is
imported the first time one of its kinds is asked for, so ``trace.show()`` works without
importing the views yourself. Nothing in the lower layers names a higher one.

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
_PROVIDERS: list[tuple[str, tuple[str, ...] | None]] = []  # (module, its kinds; None: any)


def register(kind: str, fn: Callable[..., Any]) -> None:
    """Show data of ``kind`` with ``fn(obj, *args, **kwargs)`` (a later call replaces it)."""
    _VIEWS[kind] = fn


def add_provider(module: str, kinds: tuple[str, ...] | None = None) -> None:
    """Import ``module`` (which calls :func:`register`) the first time one of ``kinds`` is
    missing (``None``: any kind no other provider names)."""
    if all(m != module for m, _ in _PROVIDERS):
        _PROVIDERS.append((module, kinds))


def view(kind: str) -> Callable[..., Any]:
    """The function registered for ``kind``, importing its provider once if it is missing.

    The providers that name ``kind`` are imported first; only if it is still missing, the
    providers of any kind.

    Raises:
        LookupError: Nothing registers ``kind`` (the views' package is not installed).
    """
    named = [m for m, kinds in _PROVIDERS if kinds is not None and kind in kinds]
    if kind not in _VIEWS:
        for module in named or [m for m, kinds in _PROVIDERS if kinds is None]:
            importlib.import_module(module)
    fn = _VIEWS.get(kind)
    if fn is None and named:
        raise LookupError(
            f"nothing is registered for {kind!r}: importing {', '.join(named)} should register "
            f"it; pass your own with labkit._display.register({kind!r}, fn)"
        )
    if fn is None:
        raise LookupError(
            f"no display is registered for {kind!r}: import labkit.views (it needs anywidget "
            "and matplotlib: `make setup` installs them), or pass your own with "
            f"labkit._display.register({kind!r}, fn)"
        )
    return fn


def display(kind: str, obj: Any, *args: Any, **kwargs: Any) -> Any:
    """Show ``obj`` with the function registered for ``kind``."""
    return view(kind)(obj, *args, **kwargs)
