"""What promote does with one top-level statement: keep it (``code``), launch it (``fit``),
or leave it out (``explore``, ``explore-import``) for a stated reason.

Every effect is kept. Only these are left out:

- a bare expression whose calls are all pure (``loss``, ``x.shape``, ``len(data)``): it
  shows a value and changes nothing (:data:`RESULT` when it is the cell's displayed last
  expression, which ``--show-results`` prints; :data:`NO_EFFECT` otherwise);
- ``display(...)``, plot calls (matplotlib, seaborn, plotly; ``.plot()``, ``.hist()``,
  ``.imshow()``, ``.show()``, ``.scatter()`` on anything), widgets and labkit's trace and
  memory views, the Lab methods marked ``@exploration``, and new names made from what
  those return (``uses exploration result 'x'``); a figure saved to a file
  (``savefig``) is a write: its cell's plot statements are kept with it;
- cells tagged ``explore``; imports of plot and widget modules nothing kept reads.

``print``, logging, writes and every other call are kept. A cell tagged ``keep`` keeps
all its statements. :func:`labkit.promote.check` refuses a left-out statement that calls
something that may draw random numbers or change state (see :mod:`._effects`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from labkit.promote._effects import call_effect, calls_in, data_uses, qualname
from labkit.promote._lab_methods import lab_exploration_methods
from labkit.promote._names import StatementNames
from labkit.promote.notebook import Cell

__all__ = [
    "EXPLORE_TAG",
    "KEEP_TAG",
    "NO_EFFECT",
    "RESULT",
    "Context",
    "aliases_of",
    "classify",
    "is_fit",
    "lab_names",
    "reason_group",
]

KEEP_TAG = "keep"
EXPLORE_TAG = "explore"

# reasons a statement is left out (the report groups by these)
RESULT = "displayed result"
NO_EFFECT = "expression without effect"
DISPLAY = "display() call"
PLOT = "plot call"
VIEW = "trace/widget call"
TAGGED = "tagged explore"
IMPORT = "plot/widget import"
USES = "uses exploration result"
LAB_METHOD = "Lab exploration method"
MAGIC = "assigned from a magic or shell escape"
EARLIER_FIT = "earlier training call"

# modules whose calls only draw
PLOT_MODULES = ("matplotlib", "seaborn", "plotly")
# modules whose calls only look at things (widgets, traces, notebook display)
VIEW_MODULES = (
    "ipywidgets",
    "IPython",
    "anywidget",
    "tqdm.notebook",
    "labkit.views",
    "labkit.widgets",  # the former name of labkit.views
    "labkit.panels",
    "labkit.trace",
    "labkit.memory",
)
VIEW_FUNCTIONS = frozenset(
    {
        "labkit.show",
        "labkit.compare",
        "labkit.advise",
        "labkit.diff",
        "labkit.optimize.compare",
        "labkit.optimize.advise",
        "labkit.optimize.layer_drift",
    }
)
# methods that draw, whatever they are called on (``df.plot()``, ``fig.show()``)
PLOT_METHODS = frozenset({"plot", "hist", "imshow", "show", "scatter"})
LAB_CLASSES = frozenset({"labkit.Lab", "labkit.train.Lab", "labkit.train.lab.Lab"})


@dataclass
class Context:
    """What classifying a statement needs to know about the notebook so far.

    Args:
        aliases: Import aliases (``{"plt": "matplotlib.pyplot"}``).
        labs: Names bound to a ``labkit.Lab``.
        tainted: Names made by left-out statements (exploration results).
        tensors: Names bound only to data, never to a module
            (:func:`labkit.promote._tensor_names.tensor_names`): ``w.float()`` on them is pure.
    """

    aliases: dict[str, str]
    labs: set[str]
    tainted: set[str] = field(default_factory=set)
    tensors: frozenset[str] = frozenset()


def classify(cell: Cell, stmt: ast.stmt, names: StatementNames, ctx: Context) -> tuple[str, str]:
    """``(role, reason)`` of one top-level statement of ``cell``."""
    if is_fit(stmt, ctx.labs):
        return "fit", ""
    if KEEP_TAG in cell.tags:
        return "code", ""
    if EXPLORE_TAG in cell.tags:
        return "explore", TAGGED
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        modules = [_import_target(stmt, a) for a in stmt.names]
        if modules and all(_is_explore_module(m) for m in modules):
            return "explore-import", IMPORT
        return "code", ""
    if isinstance(stmt, ast.Expr):
        return _classify_expression(stmt.value, names, ctx)
    if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.With):
        values: list[ast.expr | None] = (
            [i.context_expr for i in stmt.items] if isinstance(stmt, ast.With) else [stmt.value]
        )
        for made in values:
            if isinstance(made, ast.Call):
                why = explore_call(made, ctx)
                if why:
                    return "explore", why
        # a new variable made from an exploration result is exploration; a mutation
        # (``model.w *= t.x``, ``n += t.y``) is not dropped silently: the check reports it
        # (``panel.recipe_state = ...`` changes an exploration object: exploration too)
        targets = _target_roots(stmt)
        plain = isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets)
        if names.uses & ctx.tainted and (plain or (targets and targets <= ctx.tainted)):
            return "explore", _uses(names, ctx)
    return "code", ""


def _classify_expression(value: ast.expr, names: StatementNames, ctx: Context) -> tuple[str, str]:
    if isinstance(value, ast.Await | ast.Yield | ast.YieldFrom):
        return "code", ""
    if isinstance(value, ast.Call):
        if is_savefig(value, ctx.aliases):
            return "code", ""  # a write: kept (with the plot statements of its cell)
        why = explore_call(value, ctx)
        if why:
            return "explore", why
        if names.uses & ctx.tainted:
            return "explore", _uses(names, ctx)
    data = data_uses(value)
    if all(call_effect(c, ctx.aliases, ctx.tensors, data) == "pure" for c in calls_in(value)):
        return "explore", NO_EFFECT  # analyze makes it RESULT when the cell displays it
    return "code", ""


def _uses(names: StatementNames, ctx: Context) -> str:
    return f"{USES} {sorted(names.uses & ctx.tainted)[0]!r}"


def explore_call(call: ast.Call, ctx: Context) -> str:
    """The reason ``call`` is exploration (display, plot, view, Lab method), else ``""``."""
    func = call.func
    on_lab = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
    if on_lab and func.value.id in ctx.labs:  # type: ignore[attr-defined]  # on_lab: checked
        methods = lab_exploration_methods()  # ``lab.trace(...)``: methods Lab marks @exploration
        attr = func.attr  # type: ignore[attr-defined]  # on_lab: an Attribute
        if attr in methods and not _keeps(call, methods[attr]):
            return f"{func.value.id}.{attr}() ({LAB_METHOD})"  # type: ignore[attr-defined]
    name = qualname(func, ctx.aliases)
    if name in ("display", "IPython.display.display"):
        return DISPLAY
    if name is not None and _in(name, PLOT_MODULES):
        return PLOT
    if name is not None and (name in VIEW_FUNCTIONS or _in(name, VIEW_MODULES)):
        return VIEW
    if isinstance(func, ast.Attribute) and func.attr in PLOT_METHODS:
        return PLOT
    return ""


def is_savefig(call: ast.Call, aliases: dict[str, str]) -> bool:
    """``plt.savefig(...)`` or ``fig.savefig(...)``: a figure written to a file."""
    return isinstance(call.func, ast.Attribute) and call.func.attr == "savefig"


def reason_group(reason: str) -> str:
    """The report's group of a reason: ``"uses exploration result 'x'"`` ->
    ``"uses exploration result"``, ``"lab.trace() (Lab exploration method)"`` ->
    ``"Lab exploration method"``."""
    if reason.startswith(USES):
        return USES
    match = re.search(r"\((.*)\)$", reason)
    if match and match.group(1) == LAB_METHOD:
        return LAB_METHOD
    return reason


def _in(name: str, modules: Iterable[str]) -> bool:
    return any(name == m or name.startswith(m + ".") for m in modules)


def _is_explore_module(name: str) -> bool:
    return _in(name, PLOT_MODULES) or _in(name, VIEW_MODULES) or name in VIEW_FUNCTIONS


def _keeps(call: ast.Call, keyword: str | None) -> bool:
    """True when ``call`` passes ``keyword`` (``lr_find(apply=True)`` changes the Lab)."""
    for kw in call.keywords:
        if keyword is not None and kw.arg == keyword:
            return not (isinstance(kw.value, ast.Constant) and not kw.value.value)
        if kw.arg is None:  # ``**options`` may hold it
            return keyword is not None
    return False


def _target_roots(stmt: ast.stmt) -> set[str]:
    """Root names of attribute/subscript targets: ``a.b[0].c = ...`` -> ``{"a"}``."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
        targets = [stmt.target]
    else:
        return set()
    roots = set()
    for target in targets:
        node = target
        while isinstance(node, ast.Attribute | ast.Subscript):
            node = node.value
        if isinstance(node, ast.Name) and node is not target:
            roots.add(node.id)
        else:
            return set()
    return roots


def _import_target(stmt: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    if isinstance(stmt, ast.Import):
        return alias.name
    return f"{stmt.module or ''}.{alias.name}".lstrip(".")


def aliases_of(statements: Iterable[ast.stmt]) -> dict[str, str]:
    """Import aliases of ``statements``: ``import numpy as np`` -> ``{"np": "numpy"}``."""
    out: dict[str, str] = {}
    for stmt in statements:
        if isinstance(stmt, ast.Import):
            for a in stmt.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(stmt, ast.ImportFrom) and stmt.module and not stmt.level:
            for a in stmt.names:
                if a.name != "*":
                    out[a.asname or a.name] = f"{stmt.module}.{a.name}"
    return out


def lab_names(statements: Iterable[ast.stmt], aliases: dict[str, str]) -> set[str]:
    """Names bound to ``labkit.Lab(...)``."""
    labs: set[str] = set()
    for stmt in statements:
        if (
            isinstance(stmt, ast.Assign | ast.AnnAssign)
            and isinstance(stmt.value, ast.Call)
            and qualname(stmt.value.func, aliases) in LAB_CLASSES
        ):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            labs.update(t.id for t in targets if isinstance(t, ast.Name))
    return labs


def call_of(stmt: ast.stmt) -> ast.Call | None:
    """The call of ``f(...)``, ``x = f(...)`` or ``x: T = f(...)``."""
    value = getattr(stmt, "value", None)
    if isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign) and isinstance(value, ast.Call):
        return value
    return None


def is_fit(stmt: ast.stmt, labs: set[str]) -> bool:
    """``lab.fit(...)`` (or ``run = lab.fit(...)``) on a Lab variable."""
    call = call_of(stmt)
    return (
        call is not None
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "fit"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id in labs
    )
