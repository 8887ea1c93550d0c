"""Module ``__getattr__``/``__dir__`` that import each public name on first use.

Keeps ``import labkit`` (and its subpackages) fast: torch, Lightning, PyG and the
widget stack load only when a name that needs them is touched.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(
    module_name: str, table: dict[str, str], *, modules: tuple[str, ...] = ()
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Build the ``__getattr__`` and ``__dir__`` of a package with lazy public names.

    Args:
        module_name: The package's ``__name__``.
        table: Public name -> module that defines it.
        modules: Names that are the module itself rather than one of its attributes
            (callable packages such as ``labkit.trace``).

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level.

    Example:
        >>> table = {"Lab": "labkit.train.lab"}
        >>> __getattr__, __dir__ = lazy_exports(__name__, table)  # doctest: +SKIP
    """

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        module = importlib.import_module(target)
        value = module if name in modules else getattr(module, name)
        setattr(sys.modules[module_name], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module_name])) | set(table))

    return __getattr__, __dir__
