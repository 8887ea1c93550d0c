"""Which :class:`~labkit.train.Lab` methods are exploration, read from ``lab.py``'s source.

Lab marks them with :func:`labkit.train._exploration.exploration`; promote reads the marks
with :mod:`ast` (no import of torch or Lightning), so the list is Lab's own and cannot drift.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from pathlib import Path

__all__ = ["lab_exploration_methods"]


@functools.cache
def lab_exploration_methods() -> dict[str, str | None]:
    """``{method name: keyword that makes a call count as code, or None}`` for Lab.

    Returns:
        The methods of ``class Lab`` decorated with ``@exploration``.

    Example:
        >>> lab_exploration_methods()["lr_find"]
        'apply'
    """
    spec = importlib.util.find_spec("labkit.train.lab")
    if spec is None or spec.origin is None:  # pragma: no cover - labkit is installed
        raise RuntimeError("labkit.train.lab not found: reinstall labkit")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    lab = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Lab")
    methods: dict[str, str | None] = {}
    for node in lab.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            target = call.func if call else deco
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if name != "exploration":
                continue
            unless = None
            for kw in call.keywords if call else ():
                if (
                    kw.arg == "unless"
                    and isinstance(kw.value, ast.Constant)
                    and isinstance(kw.value.value, str)
                ):
                    unless = kw.value.value
            methods[node.name] = unless
    return methods
