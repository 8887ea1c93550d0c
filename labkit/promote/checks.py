"""Static checks of an :class:`~labkit.promote.analysis.Analysis` before anything is written.

Every name kept code reads must be defined by kept code that ran before it (in the
kernel's execution order), or be a builtin. Otherwise the error says which cell reads
which name and why it is missing: defined only in a dropped cell, only in a cell never
run, only in a cell the kernel ran later (an out-of-order dependency), or nowhere.
Names read inside function bodies only need to exist somewhere in kept code.

A statement left out of the script must not hide an effect: one that calls something
that draws random numbers (``display(model.generate(...))``) or may change state
(``plt.plot(losses.pop())``, ``plt.imshow(model(x))``) is an error naming its cell, line
and call, unless its cell is tagged ``explore`` (left out knowingly).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from labkit.promote._classify import (
    EARLIER_FIT,
    MAGIC,
    PLOT,
    PLOT_METHODS,
    TAGGED,
    Context,
    aliases_of,
    explore_call,
    lab_names,
)
from labkit.promote._effects import call_effect, calls_in, data_uses
from labkit.promote._names import BUILTIN_NAMES, IPYTHON_NAMES, statement_names
from labkit.promote._tensor_names import tensor_names
from labkit.promote.analysis import Analysis, Statement
from labkit.promote.errors import Problem

__all__ = ["check", "kept_statements"]


def kept_statements(analysis: Analysis) -> list[Statement]:
    """The statements the script holds, in execution order.

    ``explore-import`` statements are kept only when kept code reads a name they import.
    """
    kept = [s for s in analysis.statements if s.role in ("code", "fit")]
    needed = set().union(*(s.names.uses | s.names.deferred for s in kept)) if kept else set()
    return [
        s
        for s in analysis.statements
        if s.role in ("code", "fit") or (s.role == "explore-import" and s.names.defines & needed)
    ]


def check(  # noqa: C901 - a flat list of independent checks
    analysis: Analysis, *, kept: Sequence[Statement] | None = None
) -> list[Problem]:
    """All problems: the analysis' own, plus undefined and out-of-order names.

    Args:
        analysis: From :func:`labkit.promote.analysis`.
        kept: ``kept_statements(analysis)`` when the caller has it already (promote
            computes it once for the check, the report and the script).

    Returns:
        Errors and warnings, errors first; promote writes nothing when there is an error.
    """
    problems = list(analysis.problems)
    kept = kept_statements(analysis) if kept is None else list(kept)
    kept_ids = {id(s) for s in kept}
    dropped: dict[str, Statement] = {}
    for s in analysis.statements:
        if id(s) not in kept_ids:
            for name in s.names.defines:
                dropped.setdefault(name, s)
    never_run: dict[str, int] = {}
    for cell in analysis.never_run:
        for name in _cell_defines(cell.source):
            never_run.setdefault(name, cell.number)
    later: dict[str, Statement] = {}
    for s in kept:
        for name in s.names.defines:
            later.setdefault(name, s)
    star = any(s.names.star_import for s in kept)

    defined: set[str] = set()
    reported: set[tuple[int, str]] = set()

    def report(s: Statement, name: str, *, deferred: bool) -> None:
        key = (s.cell.number, name)
        if key in reported:
            return
        reported.add(key)
        where = f"{s.cell.label} line {s.lineno}"
        if name in IPYTHON_NAMES:
            msg = (
                f"{where} uses {name!r}, which only exists inside IPython/Jupyter; "
                "remove it or tag the cell 'explore'"
            )
        elif name in later and not deferred:
            first = later[name]
            msg = (
                f"{where} uses {name!r} before it is defined: the kernel ran "
                f"{first.cell.label}, which defines it, later; run the cells in order "
                "(Restart & Run All) and promote again"
            )
        elif name in dropped:
            src = dropped[name]
            msg = (
                f"{where} uses {name!r}, which is defined only in {src.cell.label}, "
                f"left out of the script ({src.reason or 'exploration'}); tag "
                f"cell {src.cell.number} 'keep' or stop using {name!r}"
            )
        elif name in never_run:
            msg = (
                f"{where} uses {name!r}, which is defined only in cell {never_run[name]}, "
                "never run; run it (or Restart & Run All) and promote again"
            )
        else:
            msg = (
                f"{where} uses undefined name {name!r}: no cell that ran defines it "
                "(deleted cell, or defined by hand in the kernel?)"
            )
        severity = "warning" if star and name not in IPYTHON_NAMES else "error"
        problems.append(Problem(severity, msg, s.cell.number, name))

    for s in kept:
        for name in sorted(s.names.uses - s.names.defines):
            if name not in defined and (name not in BUILTIN_NAMES or name in IPYTHON_NAMES):
                report(s, name, deferred=False)
        defined |= s.names.defines
    for s in kept:
        for name in sorted(s.names.deferred):
            if name not in defined and (name not in BUILTIN_NAMES or name in IPYTHON_NAMES):
                report(s, name, deferred=True)

    problems += hidden_effects(analysis)
    return sorted(problems, key=lambda p: p.severity != "error")


def hidden_effects(analysis: Analysis) -> list[Problem]:
    """Errors for left-out statements that call something with an effect (see the module
    docstring); one per statement, naming its first such call."""
    nodes = [s.node for s in analysis.statements]
    aliases = aliases_of(nodes)
    ctx = Context(aliases, lab_names(nodes, aliases), tensors=tensor_names(nodes, aliases))
    ctx.tainted = {
        n
        for s in analysis.statements
        if s.role == "explore" and s.reason not in (TAGGED, EARLIER_FIT)
        for n in s.names.defines
    }
    problems = []
    for s in analysis.statements:
        if s.role != "explore" or s.reason in (TAGGED, EARLIER_FIT, MAGIC):
            continue
        data = _data_uses(s.node, ctx)
        for call in calls_in(s.node):
            effect = _effect(call, ctx, data)
            if effect is None:
                continue
            does = (
                "draws random numbers"
                if effect == "random"
                else "may draw random numbers or change state that later code uses"
            )
            problems.append(
                Problem(
                    "error",
                    f"{s.cell.label} line {s.lineno}: {_short(s.source)!r} is left out of the "
                    f"script ({s.reason}), but it calls {_short(ast.unparse(call.func))}(), "
                    f"which {does}: without it the script would not do what the notebook "
                    "did. Make that call a statement of its own (it is kept), or tag "
                    f"cell {s.cell.number} 'explore' to leave it out knowingly",
                    s.cell.number,
                )
            )
            break
    return problems


def _data_uses(node: ast.stmt, ctx: Context) -> frozenset[ast.Call]:
    """Calls whose result ``node`` uses as data, a plot call's arguments among them (a plot
    draws arrays, never a module: ``plt.plot(losses.cpu())``)."""
    plotted = [
        arg
        for call in calls_in(node)
        if explore_call(call, ctx) == PLOT
        for arg in [*call.args, *(k.value for k in call.keywords)]
    ]
    return data_uses(node, plotted)


def _effect(call: ast.Call, ctx: Context, data: frozenset[ast.Call]) -> str | None:
    """``None`` for a display/plot/view call, a call on an exploration result, or a pure
    call; else ``"random"`` or ``"unknown"``."""
    if explore_call(call, ctx) or (isinstance(call.func, ast.Name) and call.func.id == "print"):
        return None  # printing an exploration result: left out with it
    func = call.func
    if isinstance(func, ast.Attribute):
        root: ast.expr = func
        while isinstance(root, ast.Attribute | ast.Subscript | ast.Call):
            root = root.func if isinstance(root, ast.Call) else root.value
        if func.attr in PLOT_METHODS or (isinstance(root, ast.Name) and root.id in ctx.tainted):
            return None
    effect = call_effect(call, ctx.aliases, ctx.tensors, data)
    return None if effect == "pure" else effect


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _cell_defines(source: str) -> set[str]:
    from labkit.promote.analysis import strip_magics

    try:
        tree = ast.parse(strip_magics(source)[0])
        return {name for stmt in tree.body for name in statement_names(stmt).defines}
    except (SyntaxError, RecursionError, MemoryError):  # too deep: its names are unknown
        return set()
