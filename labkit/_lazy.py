"""Module ``__getattr__``/``__dir__`` that import each public name on first use.

Keeps ``import labkit`` (and its subpackages) fast: torch, Lightning, PyG and the
widget stack load only when a name that needs them is touched.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable, Sequence
from typing import Any


def lazy_exports(
    module_name: str,
    table: dict[str, str],
    *,
    modules: tuple[str, ...] = (),
    moved: dict[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build the ``__getattr__`` and ``__dir__`` of a package with lazy public names.

    Args:
        module_name: The package's ``__name__``.
        table: Public name -> module that defines it.
        modules: Names that are the module itself rather than one of its attributes
            (callable packages such as ``labkit.trace``).
        moved: Old name -> the package it moved to: still resolved on first use (old
            imports keep working) but not listed by ``__dir__``; the layer test does not
            count these as imports, as they point up to where a name went.

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level.

    Example:
        >>> table = {"Lab": "labkit.train.lab"}
        >>> __getattr__, __dir__ = lazy_exports(__name__, table)  # doctest: +SKIP
    """

    def __getattr__(name: str) -> Any:
        target = table.get(name) or (moved or {}).get(name)
        if target is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        module = importlib.import_module(target)
        value = module if name in modules else getattr(module, name)
        setattr(sys.modules[module_name], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module_name])) | set(table))

    return __getattr__, __dir__


def callable_package(package: types.ModuleType, func: Callable[..., Any]) -> None:
    """Give a callable package (``labkit.trace``) its function's signature and docstring.

    ``inspect.signature`` (a notebook's Shift+Tab) then reads ``func``'s parameters, and
    ``help()`` shows the call with ``func``'s Args and Returns under the package's own text
    (its examples stay on ``func``, so doctests run once).

    Args:
        package: The package whose module object is called.
        func: The function a call runs.

    Example:
        >>> import inspect, labkit
        >>> str(inspect.signature(labkit.plan)).startswith("(model")
        True
    """
    import inspect  # here, not at the top: ``import labkit`` stays fast
    import re

    sig = inspect.signature(func)
    package.__signature__ = sig  # type: ignore[attr-defined]  # what inspect.signature reads
    if getattr(package, "_labkit_called", None) is func:
        return
    own = inspect.cleandoc(package.__doc__ or "")
    doc = re.split(r"\n\s*Example[s]?:\s*\n", inspect.cleandoc(func.__doc__ or ""))[0]
    name = package.__name__
    package.__doc__ = (
        f"{own}\n\nCalling it: {name}{sig}\n\n{doc}\n\nExample: see help({name}.{func.__name__})."
    )
    package._labkit_called = func  # type: ignore[attr-defined]  # patched once


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a moved module's old name as the module at its new name (the same object)."""

    def __init__(self) -> None:
        self.table: dict[str, str] = {}
        self.packages: dict[str, str] = {}  # old package -> new: every submodule moved too
        self._own_specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def target(self, fullname: str) -> str | None:
        if fullname in self.table:
            return self.table[fullname]
        for old, new in self.packages.items():
            if fullname.startswith(old + "."):
                return new + fullname[len(old) :]
        return None

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if self.target(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.target(spec.name) or spec.name)
        # the import machinery writes the old name's spec over the module's own: keep it
        self._own_specs[spec.name] = module.__spec__
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing to run (imported under its own name); give the module its own spec back."""
        old = module.__spec__.name if module.__spec__ else ""
        module.__spec__ = self._own_specs.pop(old, module.__spec__)


_MOVED = _MovedModules()


def moved_modules(table: dict[str, str], *, packages: dict[str, str] | None = None) -> None:
    """Keep old module paths importable as the modules they moved to (the same objects).

    ``import old`` gives the module ``new`` itself, so classes and registrations stay
    single. The package that keeps the old names imports nothing from the new place: the
    table holds names only, resolved when an old name is imported.

    Args:
        table: Old full module name -> new full module name.
        packages: Old package name -> new package name, for every submodule of it
            (``labkit.widgets.graph`` is ``labkit.views.graph``).

    Example:
        >>> moved_modules({"labkit.views.optimize_panel": "labkit.panels.optimize_panel"})
        >>> import labkit.views.optimize_panel, labkit.panels.optimize_panel
        >>> labkit.views.optimize_panel is labkit.panels.optimize_panel
        True
    """
    _MOVED.table.update(table)
    _MOVED.packages.update(packages or {})
    if _MOVED not in sys.meta_path:
        sys.meta_path.insert(0, _MOVED)
