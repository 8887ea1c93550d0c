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
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence

_OLD, _NEW = "labkit.widgets", "labkit.views"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``labkit.widgets.<name>`` as the module ``labkit.views.<name>``."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_OLD + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return importlib.import_module(_NEW + spec.name[len(_OLD) :])

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run: the module was imported under its own name."""


if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
_views = importlib.import_module(_NEW)
sys.modules[_OLD] = _views
setattr(sys.modules["labkit"], "widgets", _views)  # noqa: B010 - ``labkit.widgets`` after any import


def __getattr__(name: str) -> object:
    """Names read from this module object itself (an importer that kept it) are the views'."""
    return getattr(_views, name)
