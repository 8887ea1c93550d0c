"""Render the promoted script of a notebook that trains with ``lab.fit``: the kept cells in
execution order, the recorded Recipe and a ``main()`` that launches the training call
through :func:`labkit.train.fit_from_args`, whose command line is generated from
:class:`labkit.train.fit_options.FitOptions` (the same options as ``Lab.fit``).

The layout of a promoted script::

    #!/usr/bin/env python
    \"\"\"docstring: where it came from, how to run it (python, torchrun)\"\"\"
    # %% cell 1 (In [1])          kept cells, before the training call, verbatim
    ...
    LABKIT_RECIPE = {...}         the Recipe in effect when the notebook trained
    def main(argv=None):          applies the Recipe, then fit_from_args(lab, argv,
                                  **the notebook's fit options) (the command line overrides
                                  them), then the kept code that ran after the training call
    if __name__ == "__main__":
        main()

The values of the cell tagged ``parameters`` are command-line options too, as in
:mod:`labkit.promote.plain` (``lr = 0.1`` -> ``--lr``): the cells before the training call
run when the script starts, so the options are read from the process's arguments right
after that cell (``_parameters().parse_known_args``), and ``fit_from_args`` lists and
accepts them beside the fit options. A name that is also a fit option (``seed``) stays a
fit option only.

A notebook without a training call is rendered by :mod:`labkit.promote.plain`.

Cells are marked ``# %%`` so editors (VS Code, jupytext) show them as cells again.
"""

from __future__ import annotations

import ast
import shlex
import textwrap
from collections.abc import Sequence
from typing import Any

from labkit.promote._literal import comment, literal, script_header
from labkit.promote._spans import indent_code
from labkit.promote.analysis import Analysis, Statement
from labkit.promote.checks import kept_statements
from labkit.promote.plain import (
    LITERAL_HELPER,
    Parameter,
    argument_lines,
    override_lines,
    parameters_of,
)
from labkit.train.fit_options import fit_flags

INJECTED_TAG = "injected-parameters"  # labkit.promote.execute.INJECTED_TAG (no import: light)
PARAMETERS_TAG = "parameters"

__all__ = ["render_script"]

_RUN = """Run:
    python {name} --max-epochs 2
    python {name} --devices 2 --strategy ddp
    torchrun --nproc-per-node 2 {name} --devices 2 --strategy ddp
    torchrun --nnodes 2 --node-rank R --master-addr HOST --master-port PORT \\
        --nproc-per-node 1 {name} --num-nodes 2 --devices 1 --strategy ddp"""


def render_script(
    analysis: Analysis,
    *,
    script_name: str,
    recipe: dict[str, Any] | None = None,
    recipe_source: str = "",
    notes: str = "",
    kept: Sequence[Statement] | None = None,
) -> str:
    """The promoted script's text.

    Args:
        analysis: A checked :class:`~labkit.promote.analysis.Analysis` with a training call.
        script_name: The script's file name (shown in its docstring).
        recipe: The recorded Recipe (``Recipe.to_dict()``), or ``None`` to keep the
            notebook's code as the only source of the Recipe.
        recipe_source: Where the recipe was recorded (``"cell 7 (In [9])"``), for a comment.
        notes: A paragraph for the docstring (the report's counts).
        kept: ``kept_statements(analysis)`` when the caller has it already.

    Returns:
        Python source; it parses with :func:`ast.parse`.
    """
    fit = analysis.fit
    if fit is None:
        raise ValueError("render_script needs an analysis with a training call")
    kept = kept_statements(analysis) if kept is None else list(kept)
    position = next(i for i, s in enumerate(kept) if s is fit)
    before, after = kept[:position], kept[position + 1 :]
    future = [s for s in before if _is_future(s)]
    before = [s for s in before if not _is_future(s)]
    params, apply_after = _options(kept, before)

    order = ", ".join(dict.fromkeys(s.cell.label for s in kept)) or "none"
    call = fit.source.strip().splitlines()[0]
    body = textwrap.fill(
        "It runs the notebook's cells that ran in the kernel, in the order they ran "
        f"({order}), without the exploration cells, then trains like the notebook did "
        f"({call}). Command-line options override the notebook's values"
        + (" (the parameters cell's too)." if params else "."),
        width=88,
    )
    header = script_header(
        script_name,
        analysis.notebook.path.name,
        [body, textwrap.fill(notes, width=88)],
        _RUN.format(name=shlex.quote(script_name)),
    )
    parts = [header]
    parts += [s.text for s in future]
    if params:
        parts.append("import argparse as _argparse\nimport sys as _sys")
        if any(p.kind == "literal" for p in params):
            parts.append(LITERAL_HELPER.strip("\n"))
        parts.append(_parameters_source(params))
    parts += _cells(before, indent="", after={id(apply_after): _read_options(params)})
    if recipe is not None:
        parts.append(
            "# %% the Recipe in effect when the notebook trained "
            f"(recorded in {comment(recipe_source)})\n"
            f"LABKIT_RECIPE = {_recipe_literal(recipe)}"
        )
    parts.append(_main_source(analysis, fit, after, recipe is not None, bool(params)))
    parts.append('if __name__ == "__main__":\n    main()')
    return "\n\n\n".join(p.rstrip("\n") for p in parts) + "\n"


def _is_future(s: Statement) -> bool:
    return isinstance(s.node, ast.ImportFrom) and s.node.module == "__future__"


def _options(kept: list[Statement], before: list[Statement]) -> tuple[list[Parameter], Any]:
    """The parameters that become options (set before the training call, not named like a
    fit option) and the statement after which they are read."""
    params, apply_after, _ = parameters_of(kept)
    if apply_after is None or not any(s is apply_after for s in before):
        return [], None
    taken = fit_flags()
    return [p for p in params if p.flag not in taken], apply_after


def _parameters_source(params: list[Parameter]) -> str:
    lines = [
        "def _parameters() -> _argparse.ArgumentParser:",
        '    """The parameters cell\'s options; one left out keeps the notebook\'s value."""',
        "    parser = _argparse.ArgumentParser(add_help=False)",
        *argument_lines(params),
        "    return parser",
    ]
    return "\n".join(lines)


def _read_options(params: list[Parameter]) -> list[str]:
    if not params:
        return []
    return [
        "# read when the script starts: the cells above run at import",
        "_cli = _parameters().parse_known_args(_sys.argv[1:])[0]",
        *override_lines(params, ""),
    ]


def _cells(
    statements: Sequence[Statement], *, indent: str, after: dict[int, list[str]] | None = None
) -> list[str]:
    blocks: list[str] = []
    current = None
    for s in statements:
        if s.cell is not current:
            current = s.cell
            note = ": parameters injected by labkit run" if INJECTED_TAG in s.cell.tags else ""
            if after and PARAMETERS_TAG in s.cell.tags and any(after.values()):
                note = ": parameters (command-line options override them)"
            blocks.append(f"{indent}# %% {s.cell.label}{note}")
        blocks[-1] += "\n" + indent_code(s.text, indent)
        for line in (after or {}).get(id(s), []):
            blocks[-1] += "\n" + indent + line
    return blocks


def _recipe_literal(value: dict[str, Any]) -> str:
    """The recorded Recipe as a dict literal (each key and value checked by ``literal``)."""
    text = literal(value)
    if len(text) <= 80:
        return text
    items = ",\n".join(f"    {literal(k)}: {literal(v)}" for k, v in value.items())
    return "{\n" + items + ",\n}"


def _notebook_kwargs(fit: Statement) -> tuple[list[str], list[tuple[str | None, str]]]:
    call = fit.node.value  # type: ignore[attr-defined]  # the fit statement is an Expr call
    positional = [ast.unparse(a) for a in call.args]
    keywords = [(kw.arg, ast.unparse(kw.value)) for kw in call.keywords]
    return positional, keywords


def _main_source(
    analysis: Analysis,
    fit: Statement,
    after: Sequence[Statement],
    has_recipe: bool,
    has_options: bool = False,
) -> str:
    lab = analysis.lab_name
    positional, keywords = _notebook_kwargs(fit)
    assigned = sorted(set().union(*(s.names.defines for s in after)) if after else set())
    target = ""
    node = fit.node
    if isinstance(node, ast.Assign | ast.AnnAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        target = " = ".join(ast.unparse(t) for t in targets) + " = "
        assigned = sorted(set(assigned) | set(fit.names.defines))
    entries = [f"        **({p}).to_kwargs()," for p in positional]
    entries += [f"        {k!r}: {v}," if k is not None else f"        **{v}," for k, v in keywords]
    lines = [
        "def main(argv: list[str] | None = None) -> None:",
        f'    """Train like {fit.cell.label} of the notebook did; the command line (labkit\'s',
        '    fit options: --max-epochs, --devices, --ckpt-path last, ...) overrides it."""',
    ]
    if assigned:
        lines.append(f"    global {', '.join(assigned)}")
    if has_recipe:
        lines += [
            "    from labkit.optimize import Recipe as _Recipe",
            "    from labkit.train import fit_from_args as _fit_from_args",
            "",
            f"    {lab}.recipe = _Recipe.from_dict(LABKIT_RECIPE)",
        ]
    else:
        lines += ["    from labkit.train import fit_from_args as _fit_from_args", ""]
    lines += [
        f"    # the training call's options, as in {fit.cell.label}",
        "    _fit_kwargs = {",
        *entries,
        "    }",
        f"    {target}_fit_from_args({lab}, argv, description=__doc__, "
        + ("script_options=_parameters(), " if has_options else "")
        + "**_fit_kwargs)",
    ]
    if after:
        lines.append("    # kept code that ran after the training call")
        lines += _cells(after, indent="    ")
    return "\n".join(lines)
