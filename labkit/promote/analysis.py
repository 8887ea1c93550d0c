"""Which code of a notebook a script needs, in the order the kernel ran it.

:func:`analyze` works on source text only (it runs nothing): it strips magics and shell
escapes, parses each cell with :mod:`ast`, sorts cells by execution count, splits each
cell into top-level statements (cut by their exact ``ast`` spans: ``a = 1; b = 2`` is
two) and classifies every statement (:mod:`labkit.promote._classify`) as

- ``code``: kept in the script: every statement with an effect (``print``, logging,
  writes, any call that is not a known display, plot or view);
- ``fit``: the training call (``lab.fit(...)`` on a ``labkit.Lab``); the script's ``main()``
  launches it with command-line overrides;
- ``explore``: left out, with its reason: a bare expression without effect (a displayed
  result, printed instead with ``show_results``), ``display``, plot, trace and widget
  calls and what they return, the Lab methods marked ``@exploration`` in
  ``labkit/train/lab.py`` such as ``lab.trace()``, cells tagged ``explore``;
- ``explore-import``: an import of a plotting/widget module, kept only if kept code uses it.

A cell tagged ``keep`` keeps all its statements.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import re
from collections.abc import Collection
from dataclasses import dataclass, field

from labkit.promote._classify import (
    EARLIER_FIT,
    EXPLORE_TAG,
    MAGIC,
    NO_EFFECT,
    PLOT,
    RESULT,
    TAGGED,
    Context,
    aliases_of,
    call_of,
    classify,
    is_savefig,
    lab_names,
    reason_group,
)
from labkit.promote._names import StatementNames, statement_names
from labkit.promote._spans import Span, statement_spans
from labkit.promote._tensor_names import tensor_names
from labkit.promote.errors import Problem
from labkit.promote.notebook import Cell, Notebook

__all__ = ["Analysis", "CellPlan", "Statement", "analyze", "reason_group", "strip_magics"]

_aliases = aliases_of  # the name plain.py imports

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
        printed: A displayed result the script prints (``show_results``); ``source`` is
            then ``print(...)`` of it.
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
    printed: bool = field(default=False, repr=False)

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


def analyze(notebook: Notebook, *, show_results: bool | Collection[str] = False) -> Analysis:
    """Classify every statement of ``notebook`` for promotion (runs none of them).

    Args:
        notebook: From :func:`labkit.promote.read_notebook`.
        show_results: Print each cell's displayed result (its last expression, when the
            notebook displayed it) in the script: ``True`` for every cell, or the
            expressions to print, as written (``{"loss", "dev_loss"}``).

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
            problems += _stale_outputs(ran)
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

    all_statements = [stmt for _, body, *_ in parsed for stmt in body]
    aliases = aliases_of(all_statements)
    labs = lab_names(all_statements, aliases)
    ctx = Context(aliases, labs, tensors=tensor_names(all_statements, aliases))
    plans = [
        _plan_cell(cell, body, code, magics, magic_names, reason, ctx, problems, show_results)
        for cell, body, code, magics, magic_names, reason in parsed
    ]

    plans, fit = _pick_fit(plans, problems)
    lab_name = None
    if fit is not None:
        receiver = call_of(fit.node).func.value  # type: ignore[union-attr]  # _pick_fit: x.fit(...)
        lab_name = receiver.id if isinstance(receiver, ast.Name) else None
    return Analysis(notebook, tuple(plans), tuple(never_run), fit, lab_name, tuple(problems))


def _stale_outputs(ran: list[Cell]) -> list[Problem]:
    """Cells whose counts fall below a cell above them in the file, after a gap in the
    counts: their outputs may come from before the last kernel start."""
    counts = sorted(c.execution_count or 0 for c in ran)
    gaps = any(b - a > 1 for a, b in itertools.pairwise(counts)) or counts[0] > 1
    if not gaps:
        return []
    out = []
    highest: Cell | None = None
    for cell in ran:  # file order
        if highest is not None and (cell.execution_count or 0) < (highest.execution_count or 0):
            out.append(
                Problem(
                    "warning",
                    f"{cell.label} ran before {highest.label} above it, and the counts have "
                    "gaps: its outputs (or those above) may predate the last kernel start; "
                    "Restart & Run All, save, and promote again",
                    cell.number,
                )
            )
        if highest is None or (cell.execution_count or 0) > (highest.execution_count or 0):
            highest = cell
    return out


def _plan_cell(
    cell: Cell,
    body: list[ast.stmt],
    code: str,
    magics: tuple[str, ...],
    magic_names: frozenset[str],
    reason: str,
    ctx: Context,
    problems: list[Problem],
    show_results: bool | Collection[str],
) -> CellPlan:
    """Classify the statements of one cell (``ctx.tainted`` grows with what it leaves out)."""
    before = set(ctx.tainted)
    statements = []
    for stmt, span, names in _statement_names(cell, code, body, problems):
        role, why = classify(cell, stmt, names, ctx)
        # what a trace/widget/plot call returns is exploration too; names from cells
        # tagged explore are not: kept code that reads them is an error, not dropped
        if role == "explore" and why != TAGGED:
            ctx.tainted |= names.defines
        statements.append(
            Statement(
                cell, span.source, stmt.lineno, role, why, names, stmt, span.prefix, span.suffix
            )
        )
    if any(s.role == "code" and _saves_figure(s, ctx) for s in statements):
        # a figure written to a file: the plot statements that draw it are kept with it
        statements = [_keep_plot(s, ctx) for s in statements]
        ctx.tainted = before | {
            n
            for s in statements
            if s.role == "explore" and s.reason != TAGGED
            for n in s.names.defines
        }
    if statements and statements[-1].node is body[-1] and _displayed(cell, code, body[-1]):
        last = statements[-1]
        if last.role == "explore" and last.reason == NO_EFFECT:
            last = dataclasses.replace(last, reason=RESULT)
        if _selected(last, show_results) and _shows_value(cell, last):
            last = _printed(last)
        statements[-1] = last
    if magic_names:
        # names assigned from a shell escape (``files = !ls``) exist only in the kernel
        statements.append(
            Statement(
                cell,
                "",
                0,
                "explore",
                MAGIC,
                StatementNames(magic_names, frozenset(), frozenset()),
                ast.Pass(),
            )
        )
    cell_reason = reason
    if not cell_reason and not any(s.role in ("code", "fit") for s in statements):
        if EXPLORE_TAG in cell.tags:
            cell_reason = TAGGED
        elif not body:
            cell_reason = "magics and shell escapes only" if magics else "empty"
        else:
            cell_reason = "; ".join(
                dict.fromkeys(reason_group(s.reason) for s in statements if s.reason)
            )
    return CellPlan(cell, tuple(statements), magics, cell_reason)


def _saves_figure(s: Statement, ctx: Context) -> bool:
    return (
        isinstance(s.node, ast.Expr)
        and isinstance(s.node.value, ast.Call)
        and is_savefig(s.node.value, ctx.aliases)
    )


def _keep_plot(s: Statement, ctx: Context) -> Statement:
    """A plot statement of a cell that saves its figure: kept, unless it only shows it."""
    if s.role != "explore" or not (s.reason == PLOT or s.reason.startswith("uses ")):
        return s
    call = call_of(s.node)
    if call is not None and isinstance(call.func, ast.Attribute) and call.func.attr == "show":
        return s
    return dataclasses.replace(s, role="code", reason="")


def _displayed(cell: Cell, code: str, last: ast.stmt) -> bool:
    """Whether Jupyter displays the value of the cell's last statement: an expression not
    followed by ``;``."""
    if not isinstance(last, ast.Expr):
        return False
    lines = code.split("\n")
    end = lines[(last.end_lineno or last.lineno) - 1].encode("utf-8")[last.end_col_offset or 0 :]
    rest = end.decode("utf-8", "replace") + "\n" + "\n".join(lines[last.end_lineno or 0 :])
    rest = "\n".join(line.split("#")[0] for line in rest.split("\n"))
    return not rest.strip().startswith(";")


def _selected(s: Statement, show_results: bool | Collection[str]) -> bool:
    if isinstance(show_results, bool):
        return show_results
    return s.source.strip() in {str(x).strip() for x in show_results}


_ADDRESS = re.compile(r"^<.* at 0x[0-9a-fA-F]+>$")


def _shows_value(cell: Cell, s: Statement) -> bool:
    """A result the notebook showed: an expression without effect, or a kept call whose
    saved output is a value (not ``None``, not ``<object at 0x...>``)."""
    if s.role == "explore":
        return s.reason == RESULT
    if s.role != "code" or not isinstance(s.node, ast.Expr):
        return False
    for out in cell.outputs:
        if out.get("output_type") == "execute_result":
            text = (out.get("data") or {}).get("text/plain", "")
            text = "".join(text) if isinstance(text, list) else str(text)
            return bool(text.strip()) and not _ADDRESS.match(text.strip())
    return False


def _printed(s: Statement) -> Statement:
    """``loss`` -> ``print(loss)`` (``a, b`` -> ``print((a, b))``, as the notebook shows it)."""
    value = s.node.value  # type: ignore[attr-defined]  # _shows_value: an Expr
    inner = f"({s.source})" if isinstance(value, ast.Tuple) else s.source
    return dataclasses.replace(s, role="code", reason="", source=f"print({inner})", printed=True)


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
            dataclasses.replace(s, role="explore", reason=EARLIER_FIT)
            if s.role == "fit" and s is not last
            else s
            for s in plan.statements
        )
        out.append(CellPlan(plan.cell, stmts, plan.magics, plan.reason))
    return out, last
