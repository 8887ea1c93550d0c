"""Names a statement defines and uses, from Python's own scoping rules (``symtable``)."""

from __future__ import annotations

import ast
import builtins
import symtable
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["BUILTIN_NAMES", "IPYTHON_NAMES", "StatementNames", "statement_names"]

BUILTIN_NAMES = frozenset(dir(builtins)) | {"__name__", "__file__", "__doc__", "__builtins__"}
# names an IPython kernel provides that a plain ``python script.py`` does not
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
IPYTHON_NAMES = frozenset({"display", "get_ipython", "In", "Out", "_", "__", "___", "_ih", "_oh"})


@dataclass(frozen=True)
class StatementNames:
    """What one top-level statement does to the module namespace.

    Args:
        defines: Names bound at module level (assignments, imports, def, class, for targets).
        uses: Module-level names read when the statement runs.
        deferred: Module-level names read later, when a function or lambda it defines is called.
        star_import: True for ``from x import *`` (its names are unknown statically).
    """

    defines: frozenset[str]
    uses: frozenset[str]
    deferred: frozenset[str]
    star_import: bool = False


def statement_names(stmt: ast.stmt, source: str | None = None) -> StatementNames:
    """The names ``stmt`` (a top-level statement of a cell) defines, uses and uses later.

    Args:
        stmt: A statement parsed with :func:`ast.parse`.
        source: Its exact text (a statement that parses on its own); without it the text
            is rebuilt with :func:`ast.unparse`, which recurses once per nesting level.

    Returns:
        A :class:`StatementNames`.
    """
    if source is None:
        source = ast.unparse(ast.Module(body=[stmt], type_ignores=[]))
    table = symtable.symtable(source, "<cell>", "exec")
    defines: set[str] = set()
    uses: set[str] = set()
    deferred: set[str] = set()
    star = isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names)
    for sym in table.get_symbols():
        name = sym.get_name()
        if sym.is_assigned() or sym.is_imported() or sym.is_namespace():
            defines.add(name)
        if sym.is_referenced():
            uses.add(name)
    for child in table.get_children():
        _child(child, uses, deferred, defines, deferred_scope=False)
    # ``n += 1`` reads n first; symtable records only the store
    for node in _walk_module_level(stmt):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            uses.add(node.target.id)
    if star:
        defines.discard("*")
    return StatementNames(
        defines=frozenset(defines),
        uses=frozenset(uses),
        deferred=frozenset(deferred - uses),
        star_import=star,
    )


def _child(
    table: symtable.SymbolTable,
    uses: set[str],
    deferred: set[str],
    defines: set[str],
    *,
    deferred_scope: bool,
) -> None:
    # a function body (and everything inside it) runs when called; class bodies and
    # comprehensions run where they stand, unless they sit inside a function
    is_function = table.get_type() == "function" and not table.get_name().endswith("comp")
    later = deferred_scope or is_function
    for sym in table.get_symbols():
        if sym.is_global() and sym.is_referenced():
            (deferred if later else uses).add(sym.get_name())
        if sym.is_declared_global() and sym.is_assigned():
            defines.add(sym.get_name())
    for child in table.get_children():
        _child(child, uses, deferred, defines, deferred_scope=later)


def _walk_module_level(node: ast.AST) -> Iterator[ast.AST]:
    """Like :func:`ast.walk`, without entering function, lambda or class bodies."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        for child in ast.iter_child_nodes(current):
            if not isinstance(child, _SCOPES):
                todo.append(child)
