"""``labkit.widgets``: the former name of :mod:`labkit.views`, kept so that notebooks and
scripts written against it still run.

``labkit.widgets`` *is* ``labkit.views`` and ``labkit.widgets.graph`` *is*
``labkit.views.graph`` (the same module objects, so one set of classes and one display
registration), whichever name is imported first. New code imports :mod:`labkit.views`.

Example:
    >>> from labkit.widgets import graph
    >>> import labkit.views.graph
    >>> graph is labkit.views.graph
    True
"""

from __future__ import annotations

import importlib
import sys

from labkit._lazy import moved_modules

_OLD, _NEW = "labkit.widgets", "labkit.views"

moved_modules({}, packages={_OLD: _NEW})
_views = importlib.import_module(_NEW)
sys.modules[_OLD] = _views
setattr(sys.modules["labkit"], "widgets", _views)  # noqa: B010 - ``labkit.widgets`` after any import


def __getattr__(name: str) -> object:
    """Names read from this module object itself (an importer that kept it) are the views'."""
    return getattr(_views, name)
