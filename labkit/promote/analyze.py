"""Which code of a notebook a script needs, in the order the kernel ran it.

:func:`analyze` works on source text only (it runs nothing): it strips magics and shell
escapes, parses each cell with :mod:`ast`, sorts cells by execution count, splits each
cell into top-level statements (cut by their exact ``ast`` spans: ``a = 1; b = 2`` is
two) and classifies every statement as

- ``code``: kept in the script;
- ``fit``: the training call (``lab.fit(...)`` on a ``labkit.Lab``); the script's ``main()``
  launches it with command-line overrides;
- ``explore``: dropped (display-only expressions, ``print``/``display``, trace, widget and
  plot calls and what they return, calls of the Lab methods marked ``@exploration`` in
  ``labkit/train/lab.py`` such as ``lab.trace()`` and ``lab.tensorboard()``, cells tagged
  ``explore``);
- ``explore-import``: an import of a plotting/widget module, kept only if kept code uses it.

A cell tagged ``keep`` keeps all its statements.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from labkit.promote._lab_methods import lab_exploration_methods
from labkit.promote._names import StatementNames, statement_names
from labkit.promote._spans import Span, statement_spans
from labkit.promote.errors import Problem
from labkit.promote.notebook import Cell, Notebook

__all__ = ["Analysis", "CellPlan", "Statement", "analyze", "strip_magics"]

KEEP_TAG = "keep"
EXPLORE_TAG = "explore"

# modules whose calls only look at things (plots, widgets, traces, pretty printing)
EXPLORE_MODULES = (
    "matplotlib",
    "seaborn",
    "plotly",
    "ipywidgets",
    "IPython",
    "anywidget",
    "pprint",
    "tqdm.notebook",
    "labkit.widgets",
    "labkit.trace",
    "labkit.memory",
)
EXPLORE_FUNCTIONS = frozenset(
    {
        "print",
        "display",
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
EXPLORE_METHODS = frozenset({"plot", "hist", "imshow", "show", "savefig", "scatter"})
LAB_CLASSES = frozenset({"labkit.Lab", "labkit.train.Lab", "labkit.train.lab.Lab"})
# %%cell magics whose body is Python run once: keep the body
_PYTHON_CELL_MAGICS = frozenset({"time", "capture", "prun"})


@dataclass(frozen=True)
class Statement:
    """One top-level statement of a cell and what promote does with it.

    Args:
        cell: The cell it belongs to.
        source: Its exact source text, cut by its ``ast`` span (``a = 1; b = 2`` is two
            statements, each with its own text; magics already stripped).
        lineno: Its first line within the cell (1-based).
        role: ``"code"``, ``"fit"``, ``"explore"`` or ``"explore-import"``.
        reason: Why an ``explore`` statement is dropped.
        names: What it defines and uses.
        prefix: Comment lines directly above it in the cell.
        suffix: A comment after it on its last line.
    """

    cell: Cell
    source: str
    lineno: int
    role: str
    reason: str
    names: StatementNames = field(repr=False)
    node: ast.stmt = field(repr=False, compare=False)
    prefix: str = field(default="", repr=False)
    suffix: str = field(default="", repr=False)

    @property
    def text(self) -> str:
        """What the script holds for it: comments above, the statement, its end comment."""
        return f"{self.prefix}{self.source}{self.suffix}"

    def __repr__(self) -> str:
        return f"Statement({self.cell.label}, line {self.lineno}, {self.role}, {self.source!r})"


@dataclass(frozen=True)
class CellPlan:
    """A code cell that ran, with its statements classified.

    Args:
        cell: The cell.
        statements: Its top-level statements.
        magics: The magic and shell-escape lines that were stripped.
        reason: Why the whole cell is dropped (``""`` when something in it is kept).
    """

    cell: Cell
    statements: tuple[Statement, ...]
    magics: tuple[str, ...] = ()
    reason: str = ""

    @property
    def kept(self) -> bool:
        """True when at least one statement goes into the script."""
        return any(s.role in ("code", "fit") for s in self.statements)

    def __repr__(self) -> str:
        state = "kept" if self.kept else f"dropped: {self.reason or 'exploration'}"
        return f"CellPlan({self.cell.label}, {len(self.statements)} statements, {state})"


@dataclass(frozen=True)
class Analysis:
    """A notebook read for promotion: cells in execution order and the training call.

    Args:
        notebook: The notebook.
        plans: Code cells that ran, in execution order.
        never_run: Code cells with source but no execution count (left out).
        fit: The training call, or ``None`` when the notebook has none.
        lab_name: The variable holding the ``labkit.Lab`` that ``fit`` is called on.
        problems: Warnings (and syntax errors) found while reading.
    """

    notebook: Notebook
    plans: tuple[CellPlan, ...]
    never_run: tuple[Cell, ...]
    fit: Statement | None
    lab_name: str | None
    problems: tuple[Problem, ...]

    @property
    def statements(self) -> tuple[Statement, ...]:
        """Every statement of the cells that ran, in execution order."""
        return tuple(s for p in self.plans for s in p.statements)

    def __repr__(self) -> str:
        kept = sum(p.kept for p in self.plans)
        fit = f"{self.lab_name}.fit in {self.fit.cell.label}" if self.fit else "no fit"
        return (
            f"Analysis({self.notebook.path.name!r}, cells run={len(self.plans)}, kept={kept}, "
            f"never run={len(self.never_run)}, {fit})"
        )


_MAGIC = re.compile(r"^(\s*)([%!]|\?)")
_MAGIC_ASSIGN = re.compile(r"^(\s*)([A-Za-z_][\w\s,()]*?)\s*=\s*[%!]")
_HELP = re.compile(r"^\s*[\w.]+\s*\?{1,2}\s*$")


def strip_magics(source: str) -> tuple[str, tuple[str, ...], frozenset[str], str]:
    """Remove IPython magics, shell escapes and ``obj?`` help lines from a cell's source.

    Line numbers are preserved: a stripped line becomes blank, or ``pass`` inside a block.

    Args:
        source: A code cell's text.

    Returns:
        ``(code, stripped lines, names assigned from magics, reason)``; ``reason`` is
        non-empty when the whole cell is dropped (a non-Python cell magic).

    Example:
        >>> strip_magics("%matplotlib inline\\nx = 1")[:2]
        ('\\nx = 1', ('%matplotlib inline',))
    """
    lines = source.split("\n")  # not splitlines(): "\x0c" or "\u2028" in a string is no line end
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        magic = lines[first].strip()[2:].split()[0] if lines[first].strip()[2:] else ""
        if magic not in _PYTHON_CELL_MAGICS:
            return "", (lines[first].strip(),), frozenset(), f"cell magic %%{magic}"
        lines[first] = ""
        stripped = [f"%%{magic}"]
    else:
        stripped = []
    assigned: set[str] = set()
    for i, line in enumerate(lines):
        assign = _MAGIC_ASSIGN.match(line)
        if assign or _MAGIC.match(line) or _HELP.match(line):
            if assign:
                assigned.update(
                    n.strip() for n in assign.group(2).replace("(", "").replace(")", "").split(",")
                )
            stripped.append(line.strip())
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = f"{indent}pass" if indent else ""
    return "\n".join(lines), tuple(stripped), frozenset(a for a in assigned if a), ""


def analyze(notebook: Notebook) -> Analysis:  # noqa: C901 - one pass over cells, kind by kind
    """Classify every statement of ``notebook`` for promotion (runs none of them).

    Args:
        notebook: From :func:`labkit.promote.read_notebook`.

    Returns:
        The :class:`Analysis`; :func:`labkit.promote.check` turns it into errors.
    """
    problems: list[Problem] = []
    code_cells = [c for c in notebook.code_cells if c.source.strip()]
    ran = [c for c in code_cells if c.execution_count is not None]
    if ran:
        order = sorted(ran, key=lambda c: c.execution_count or 0)
        never_run = tuple(c for c in code_cells if c.execution_count is None)
        for cell in never_run:
            problems.append(
                Problem("warning", f"{cell.label} was never run; it is left out", cell.number)
            )
        if [c.number for c in order] != sorted(c.number for c in order):
            ran_as = ", ".join(c.label for c in order)
            problems.append(
                Problem(
                    "warning",
                    "the kernel ran cells out of notebook order; the script follows "
                    f"the execution order: {ran_as}",
                )
            )
    else:
        order, never_run = code_cells, ()
        if code_cells:
            problems.append(
                Problem("warning", "no cell has an execution count; following notebook order")
            )
    for cell in order:
        for out in cell.outputs:
            if out.get("output_type") == "error":
                problems.append(
                    Problem(
                        "warning",
                        f"{cell.label} raised {out.get('ename', 'an error')} in the notebook; "
                        "it is promoted as written",
                        cell.number,
                    )
                )

    parsed: list[tuple[Cell, list[ast.stmt], str, tuple[str, ...], frozenset[str], str]] = []
    for cell in order:
        code, magics, magic_names, reason = strip_magics(cell.source)
        body, problem = _parse_cell(cell, code)
        if problem is not None:
            problems.append(problem)
        parsed.append((cell, body, code, magics, magic_names, reason))

    aliases = _aliases(stmt for _, body, *_ in parsed for stmt in body)
    labs = _lab_names((stmt for _, body, *_ in parsed for stmt in body), aliases)
    plans: list[CellPlan] = []
    tainted: set[str] = set()
    for cell, body, code, magics, magic_names, reason in parsed:
        statements = []
        for stmt, span, names in _statement_names(cell, code, body, problems):
            role, why = _classify(cell, stmt, names, aliases, labs, tainted)
            # what a trace/widget/plot call returns is exploration too; names from cells
            # tagged explore are not: kept code that reads them is an error, not dropped
            if role == "explore" and why != "tagged explore":
                tainted |= names.defines
            statements.append(
                Statement(
                    cell,
                    span.source,
                    stmt.lineno,
                    role,
                    why,
                    names,
                    stmt,
                    span.prefix,
                    span.suffix,
                )
            )
        if magic_names:
            # names assigned from a shell escape (``files = !ls``) exist only in the kernel
            statements.append(
                Statement(
                    cell,
                    "",
                    0,
                    "explore",
                    "assigned from a magic or shell escape",
                    StatementNames(magic_names, frozenset(), frozenset()),
                    ast.Pass(),
                )
            )
        cell_reason = reason
        if not cell_reason and not any(s.role in ("code", "fit") for s in statements):
            if EXPLORE_TAG in cell.tags:
                cell_reason = "tagged explore"
            elif not body:
                cell_reason = "magics and shell escapes only" if magics else "empty"
            else:
                cell_reason = "; ".join(dict.fromkeys(s.reason for s in statements if s.reason))
        plans.append(CellPlan(cell, tuple(statements), magics, cell_reason))

    plans, fit = _pick_fit(plans, problems)
    lab_name = None
    if fit is not None:
        receiver = _call(fit.node).func.value  # type: ignore[union-attr]  # _pick_fit: x.fit(...)
        lab_name = receiver.id if isinstance(receiver, ast.Name) else None
    return Analysis(notebook, tuple(plans), tuple(never_run), fit, lab_name, tuple(problems))


_SURROGATE = re.compile("[\ud800-\udfff]")


def _parse_cell(cell: Cell, code: str) -> tuple[list[ast.stmt], Problem | None]:
    """The cell's top-level statements, or none and the error that names the cell: a
    syntax error, a lone surrogate (no script file can hold it), code nested too deeply."""
    bad = _SURROGATE.search(code)
    if bad is not None:
        line = code.count("\n", 0, bad.start()) + 1
        return [], Problem(
            "error",
            f"{cell.label} line {line} holds a lone surrogate (U+{ord(bad.group()):04X}), "
            "half of a character that a UTF-8 script cannot hold; the notebook was saved by "
            "a tool that split a character: retype that text",
            cell.number,
        )
    try:
        return ast.parse(code, filename=f"<{cell.label}>").body, None
    except SyntaxError as exc:
        return [], Problem(
            "error", f"{cell.label}: syntax error on line {exc.lineno}: {exc.msg}", cell.number
        )
    except (RecursionError, MemoryError) as exc:
        return [], _too_deep(cell, exc)


def _too_deep(cell: Cell, exc: BaseException) -> Problem:
    return Problem(
        "error",
        f"{cell.label}: the code nests too deeply for Python's parser ({type(exc).__name__}: "
        "an expression of thousands of terms or operators); split it into smaller statements",
        cell.number,
    )


def _statement_names(
    cell: Cell, code: str, body: list[ast.stmt], problems: list[Problem]
) -> list[tuple[ast.stmt, Span, StatementNames]]:
    """Each statement with its exact text and names; none (and an error naming the cell)
    when the code is too deep to analyze."""
    if not body:
        return []
    try:
        spans = statement_spans(code, body)
        return [
            (stmt, span, statement_names(stmt, span.source))
            for stmt, span in zip(body, spans, strict=True)
        ]
    except (RecursionError, MemoryError) as exc:
        problems.append(_too_deep(cell, exc))
        return []


def _classify(  # noqa: C901 - the statement kinds, in the order they are told apart
    cell: Cell,
    stmt: ast.stmt,
    names: StatementNames,
    aliases: dict[str, str],
    labs: set[str],
    tainted: set[str],
) -> tuple[str, str]:
    if _is_fit(stmt, labs):
        return "fit", ""
    if KEEP_TAG in cell.tags:
        return "code", ""
    if EXPLORE_TAG in cell.tags:
        return "explore", "tagged explore"
    if isinstance(stmt, ast.Import | ast.ImportFrom):
        modules = [_import_target(stmt, a) for a in stmt.names]
        if modules and all(_is_explore_module(m) for m in modules):
            return "explore-import", "plot/widget import"
        return "code", ""
    if isinstance(stmt, ast.Expr):
        value = stmt.value
        if not isinstance(value, ast.Call | ast.Await | ast.Yield | ast.YieldFrom):
            return "explore", "display-only expression"
        if isinstance(value, ast.Call):
            why = _explore_call(value, aliases, labs)
            if why:
                return "explore", why
            if isinstance(value.func, ast.Attribute) and value.func.attr in EXPLORE_METHODS:
                return "explore", "plot call"
        if names.uses & tainted:
            return "explore", f"uses exploration result {sorted(names.uses & tainted)[0]!r}"
        return "code", ""
    if isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.With):
        values: list[ast.expr | None] = (
            [i.context_expr for i in stmt.items] if isinstance(stmt, ast.With) else [stmt.value]
        )
        for made in values:
            if isinstance(made, ast.Call):
                why = _explore_call(made, aliases, labs)
                if why:
                    return "explore", why
        # a new variable made from an exploration result is exploration; a mutation
        # (``model.w *= t.x``, ``n += t.y``) is not dropped silently: the check reports it
        # (``panel.recipe_state = ...`` changes an exploration object: exploration too)
        targets = _target_roots(stmt)
        plain = isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets)
        if names.uses & tainted and (plain or (targets and targets <= tainted)):
            return "explore", f"uses exploration result {sorted(names.uses & tainted)[0]!r}"
    return "code", ""


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


def _explore_call(call: ast.Call, aliases: dict[str, str], labs: set[str]) -> str:
    func = call.func
    # ``lab.trace(...)`` and friends on a Lab variable
    if (
        isinstance(func, ast.Attribute)
        and isinstance(func.value, ast.Name)
        and func.value.id in labs
    ):
        methods = lab_exploration_methods()  # the methods Lab marks @exploration
        attr = func.attr
        if attr in methods and not _keeps(call, methods[attr]):
            return f"{func.value.id}.{attr}() (Lab exploration method)"
    qualname = _qualname(func, aliases)
    if qualname is None:
        return ""
    if qualname in ("print", "display", "pprint"):
        return f"{qualname}() (display only)"
    if qualname in EXPLORE_FUNCTIONS or _is_explore_module(qualname):
        return f"{qualname}() (trace/widget/plot)"
    return ""


def _keeps(call: ast.Call, keyword: str | None) -> bool:
    """True when ``call`` passes ``keyword`` (``lr_find(apply=True)`` changes the Lab)."""
    for kw in call.keywords:
        if keyword is not None and kw.arg == keyword:
            return not (isinstance(kw.value, ast.Constant) and not kw.value.value)
        if kw.arg is None:  # ``**options`` may hold it
            return keyword is not None
    return False


def _is_explore_module(qualname: str) -> bool:
    return any(qualname == m or qualname.startswith(m + ".") for m in EXPLORE_MODULES) or (
        qualname in EXPLORE_FUNCTIONS
    )


def _qualname(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """``plt.plot`` -> ``'matplotlib.pyplot.plot'`` through the notebook's imports."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call):  # plt.figure().add_subplot -> matplotlib.pyplot.figure...
        inner = _qualname(node.func, aliases)
        return None if inner is None else ".".join([inner, *reversed(parts)])
    if not isinstance(node, ast.Name):
        return None
    root = aliases.get(node.id, node.id)
    return ".".join([root, *reversed(parts)])


def _import_target(stmt: ast.Import | ast.ImportFrom, alias: ast.alias) -> str:
    if isinstance(stmt, ast.Import):
        return alias.name
    return f"{stmt.module or ''}.{alias.name}".lstrip(".")


def _aliases(statements: Iterable[ast.stmt]) -> dict[str, str]:
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


def _lab_names(statements: Iterable[ast.stmt], aliases: dict[str, str]) -> set[str]:
    labs: set[str] = set()
    for stmt in statements:
        if (
            isinstance(stmt, ast.Assign | ast.AnnAssign)
            and isinstance(stmt.value, ast.Call)
            and _qualname(stmt.value.func, aliases) in LAB_CLASSES
        ):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            labs.update(t.id for t in targets if isinstance(t, ast.Name))
    return labs


def _call(stmt: ast.stmt) -> ast.Call | None:
    value = getattr(stmt, "value", None)
    if isinstance(stmt, ast.Expr | ast.Assign | ast.AnnAssign) and isinstance(value, ast.Call):
        return value
    return None


def _is_fit(stmt: ast.stmt, labs: set[str]) -> bool:
    call = _call(stmt)
    return (
        call is not None
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "fit"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id in labs
    )


def _pick_fit(
    plans: list[CellPlan], problems: list[Problem]
) -> tuple[list[CellPlan], Statement | None]:
    """Keep the last fit call (in execution order); earlier ones are dropped with a warning."""
    fits = [s for p in plans for s in p.statements if s.role == "fit"]
    if not fits:
        return plans, None
    last = fits[-1]
    for s in fits[:-1]:
        problems.append(
            Problem(
                "warning",
                f"{s.cell.label}: an earlier training call is left out; the script trains "
                f"once, like the last one in {last.cell.label}",
                s.cell.number,
            )
        )
    if len(fits) == 1:
        return plans, last
    out = []
    for plan in plans:
        stmts = tuple(
            dataclasses.replace(s, role="explore", reason="earlier training call")
            if s.role == "fit" and s is not last
            else s
            for s in plan.statements
        )
        out.append(CellPlan(plan.cell, stmts, plan.magics, plan.reason))
    return out, last
