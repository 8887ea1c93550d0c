"""Module ``__getattr__``/``__dir__`` that import each public name on first use.

Keeps ``import labkit`` (and its subpackages) fast: torch, Lightning, PyG and the
widget stack load only when a name that needs them is touched.
"""

from __future__ import annotations

import importlib
import sys
import types
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
