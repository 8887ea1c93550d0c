"""Names a notebook binds only to data (tensors, arrays, numbers), never to a module.

``w.float()`` on such a name changes nothing; on any other name it may move or convert a
module in place (:data:`labkit.promote._effects.MODULE_METHODS`). A name counts as data when
every binding of it in the notebook (an assignment, a loop or ``with`` target, an import, a
``def``) is a plain assignment of an expression :func:`~labkit.promote._effects.is_data`
calls data, given the names already known; the smallest such set is taken (``a = b * 2``
and ``b = torch.ones(2)`` make both data, ``a = model`` anywhere makes ``a`` unknown).
Function and class bodies are not read: their names are their own.

Example:
    >>> import ast
    >>> body = ast.parse("w = torch.ones(2)\\nv = w.float()\\nm = nn.Linear(2, 2)\\n"
    ...                  "for x in loader:\\n    y = x.double()").body
    >>> sorted(tensor_names(body, {"torch": "torch", "nn": "torch.nn"}))
    ['v', 'w']
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from labkit.promote._effects import is_data

__all__ = ["tensor_names"]


def tensor_names(statements: Iterable[ast.stmt], aliases: dict[str, str]) -> frozenset[str]:
    """The names every binding of which is data (see the module docstring)."""
    values: dict[str, list[ast.expr | None]] = {}
    for stmt in statements:
        _bindings(stmt, values)
    known: set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, bound in values.items():
            if name not in known and all(
                v is not None and is_data(v, aliases, known) for v in bound
            ):
                known.add(name)
                changed = True
    return frozenset(known)


def _bindings(node: ast.AST, values: dict[str, list[ast.expr | None]]) -> None:
    """Record every binding in ``node`` (``None`` for one that is not a plain value)."""
    todo = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            values.setdefault(current.name, []).append(None)
            todo += current.decorator_list
            continue
        if isinstance(
            current, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp
        ):
            continue  # their names are their own
        if isinstance(current, ast.Assign):
            for target in current.targets:
                _bind(target, current.value, values)
        elif isinstance(current, ast.AnnAssign | ast.NamedExpr):
            _bind(current.target, current.value, values)
        elif isinstance(current, ast.For | ast.AsyncFor):
            _bind(current.target, None, values)
        elif isinstance(current, ast.withitem) and current.optional_vars is not None:
            _bind(current.optional_vars, None, values)
        elif isinstance(current, ast.ExceptHandler) and current.name:
            values.setdefault(current.name, []).append(None)
        elif isinstance(current, ast.Import | ast.ImportFrom):
            for alias in current.names:
                name = alias.asname or alias.name.split(".")[0]
                values.setdefault(name, []).append(None)
        todo += ast.iter_child_nodes(current)


def _bind(
    target: ast.expr, value: ast.expr | None, values: dict[str, list[ast.expr | None]]
) -> None:
    if isinstance(target, ast.Name):
        values.setdefault(target.id, []).append(value)
    elif isinstance(target, ast.Tuple | ast.List):
        for element in target.elts:
            _bind(element, None, values)
    elif isinstance(target, ast.Starred):
        _bind(target.value, None, values)
