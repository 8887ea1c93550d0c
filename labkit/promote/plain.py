"""The script of a notebook without a ``labkit.Lab`` training call (a plain PyTorch loop,
data preparation, evaluation, ...): the kept statements, in execution order, in ``main()``.

The values of the cell tagged ``parameters`` become command-line options, typed from the
values (``lr = 0.1`` -> ``--lr 0.1``, a float; ``use_amp = False`` -> ``--use-amp`` /
``--no-use-amp``; lists, dicts and ``None`` take a Python literal). An option given on
the command line replaces the value right after the cell (after ``labkit run``'s injected
one, when there is one), the way ``labkit run -p`` does in the notebook.

``main()`` declares every name the kept code defines ``global``, so functions defined in
the notebook still see them, and classes keep their plain ``__qualname__`` (they pickle).
"""

from __future__ import annotations

import ast
import shlex
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from labkit.promote._literal import script_header
from labkit.promote._spans import indent_code
from labkit.promote.analysis import Analysis, Statement, _aliases
from labkit.promote.checks import kept_statements
from labkit.promote.errors import Problem
from labkit.promote.fabric import (
    FABRIC_OPTIONS,
    FABRIC_PREAMBLE,
    LEAVE_HELPER,
    MAIN_BLOCK,
    MEAN_HELPER,
    FabricPlan,
    plan_fabric,
)

__all__ = ["Parameter", "argument_lines", "override_lines", "parameters_of", "render_plain_script"]

PARAMETERS_TAG = "parameters"  # labkit.promote.execute.PARAMETERS_TAG (no import: light)
INJECTED_TAG = "injected-parameters"

LITERAL_HELPER = '''

def _literal(text: str) -> object:
    """A Python literal (list, dict, tuple, None, ...) from the command line."""
    import ast

    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise _argparse.ArgumentTypeError(f"{text!r} is not a Python literal") from None
'''


_DEVICES = '''

def _devices(text: str) -> int | str | list[int]:
    """--devices: 'auto', a count, or device ids separated by commas."""
    if text == "auto":
        return text
    if "," in text:
        return [int(part) for part in text.split(",") if part.strip()]
    return int(text)
'''


@dataclass(frozen=True)
class Parameter:
    """A value of the ``parameters`` cell that becomes a command-line option.

    Args:
        name: The variable.
        value: Its value in the notebook (after ``labkit run``'s injection, if any).
        kind: ``"int"``, ``"float"``, ``"str"``, ``"bool"`` or ``"literal"``.
    """

    name: str
    value: Any
    kind: str

    @property
    def flag(self) -> str:
        """``batch_size`` -> ``--batch-size``."""
        return "--" + self.name.replace("_", "-")


def parameters_of(kept: list[Statement]) -> tuple[list[Parameter], Statement | None, list[Problem]]:
    """The options from the kept statements of the ``parameters`` (and injected) cells.

    Returns:
        ``(parameters, the statement after which the command line applies, warnings)``.
    """
    found: dict[str, Parameter] = {}
    last = None
    problems: list[Problem] = []
    for s in kept:
        if PARAMETERS_TAG not in s.cell.tags and INJECTED_TAG not in s.cell.tags:
            continue
        last = s
        node = s.node
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            continue
        name = node.targets[0].id
        try:
            value = ast.literal_eval(node.value)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            problems.append(
                Problem(
                    "warning",
                    f"{s.cell.label} line {s.lineno}: {name} is not a literal value, so it is "
                    "not a command-line option of the script",
                    s.cell.number,
                    name,
                )
            )
            continue
        kind = {bool: "bool", int: "int", float: "float", str: "str"}.get(type(value), "literal")
        previous = found.get(name)
        if previous is not None and previous.kind == "float" and kind == "int":
            kind = "float"  # ``-p lr=1`` injected over ``lr = 0.1``: keep taking floats
        found[name] = Parameter(name, value, kind)
    return list(found.values()), last, problems


def render_plain_script(
    analysis: Analysis,
    *,
    script_name: str,
    fabric: bool = False,
    notes: str = "",
    kept: Sequence[Statement] | None = None,
) -> tuple[str, list[Problem]]:
    """The script of a notebook without a training call, and warnings about its options.

    Args:
        analysis: A checked :class:`~labkit.promote.analysis.Analysis`.
        script_name: The script's file name (shown in its docstring).
        fabric: Put the training loop on Lightning Fabric (:mod:`labkit.promote.fabric`).
        notes: A paragraph for the docstring (the report's counts).
        kept: ``kept_statements(analysis)`` when the caller has it already.

    Returns:
        ``(Python source, problems)``; with errors (a loop ``--fabric`` cannot rewrite)
        the source is empty.
    """
    kept = kept_statements(analysis) if kept is None else list(kept)
    params, apply_after, problems = parameters_of(kept)
    hoisted = [s for s in kept if _must_be_module_level(s)]
    body = [s for s in kept if not _must_be_module_level(s)]
    plan = None
    if fabric:
        plan = plan_fabric(body, _aliases(s.node for s in analysis.statements))
        clash = [p for p in params if p.name in FABRIC_OPTIONS]
        plan.problems += [
            Problem(
                "error",
                f"--fabric: {p.name!r} of the parameters cell clashes with the script's "
                f"--{p.name.replace('_', '-')} (a Fabric option); rename it",
                None,
                p.name,
            )
            for p in clash
        ]
        if plan.problems:
            return "", problems + plan.problems
    order = ", ".join(dict.fromkeys(s.cell.label for s in kept)) or "none"
    text = (
        "It runs the notebook's cells that ran in the kernel, in the order they ran "
        f"({order}), without the exploration cells, inside main()."
    )
    if params:
        text += " The values of the cell tagged 'parameters' are command-line options."
    text = textwrap.fill(text, width=88)
    name = shlex.quote(script_name)
    example = "".join(f" {p.flag} {_shown(p)}" for p in params[:2] if p.kind != "bool")
    if fabric:
        text += (
            "\n\nThe training loop runs on Lightning Fabric (labkit promote --fabric): "
            "fabric.setup(model, optimizer),\nfabric.setup_dataloaders(loader) and "
            "fabric.backward(loss); prints go through fabric.print (rank 0 only), a\n"
            "validation loss is averaged over the processes (fabric.all_reduce)."
        )
        example += (
            f"\n    python {name} --accelerator cpu --devices 2 --strategy ddp"
            f"\n    torchrun --nproc-per-node 2 {name} --devices 2 --strategy ddp"
        )
    run = f"Run:\n    python {name}{example}"
    notes = textwrap.fill(notes, width=88)
    parts = [script_header(script_name, analysis.notebook.path.name, [text, notes], run)]
    parts += [s.text for s in hoisted]
    parts.append("import argparse as _argparse")
    if any(p.kind == "literal" for p in params):
        parts.append(LITERAL_HELPER.strip("\n"))
    if fabric:
        parts.append(_DEVICES.strip("\n"))
        if plan is not None and any("_mean_over_processes(" in t for t in plan.texts.values()):
            parts.append(MEAN_HELPER.strip("\n"))
        parts.append(LEAVE_HELPER.strip("\n"))
    parts.append(_parse_args_source(params, fabric=fabric))
    parts.append(_main_source(body, params, apply_after, plan))
    parts.append(MAIN_BLOCK if fabric else 'if __name__ == "__main__":\n    main()')
    return "\n\n\n".join(p.rstrip("\n") for p in parts) + "\n", problems


def _must_be_module_level(s: Statement) -> bool:
    """``from __future__`` and ``import *`` are not allowed inside a function."""
    return isinstance(s.node, ast.ImportFrom) and (
        s.node.module == "__future__" or any(a.name == "*" for a in s.node.names)
    )


def _shown(p: Parameter) -> str:
    """The option's value as a shell word for the docstring's example."""
    if p.kind in ("int", "float"):
        return str(p.value)
    return shlex.quote(p.value if p.kind == "str" else repr(p.value))


def argument_lines(params: list[Parameter]) -> list[str]:
    """``parser.add_argument(...)`` lines (in a function body) for the parameters' options:
    typed from the notebook's values, ``None`` when left out."""
    lines = []
    for p in params:
        how = {
            "bool": "action=_argparse.BooleanOptionalAction",
            "literal": "type=_literal",
        }.get(p.kind, f"type={p.kind}")
        helpful = repr(f"{p.name} in the notebook: {p.value!r}").replace("%", "%%")
        lines += [
            "    parser.add_argument(",
            f"        {p.flag!r},",
            f"        {how},",
            f"        dest={p.name!r},",
            "        default=None,",
            f"        help={helpful},",
            "    )",
        ]
    return lines


def override_lines(params: list[Parameter], indent: str) -> list[str]:
    """Lines that replace each parameter with its option from ``_cli`` when given."""
    lines = [f"{indent}# the command line's values replace the notebook's"]
    for p in params:
        lines += [f"{indent}if _cli.{p.name} is not None:", f"{indent}    {p.name} = _cli.{p.name}"]
    return lines


def _parse_args_source(params: list[Parameter], *, fabric: bool) -> str:
    lines = [
        "def _parse_args(argv: list[str] | None = None) -> _argparse.Namespace:",
        '    """The command line; an option left out keeps the notebook\'s value."""',
        "    parser = _argparse.ArgumentParser(description=__doc__.splitlines()[0])",
        *argument_lines(params),
    ]
    for name, (kind, default, text) in FABRIC_OPTIONS.items() if fabric else ():
        lines += [
            "    parser.add_argument(",
            f"        {'--' + name.replace('_', '-')!r},",
            f"        type={kind},",
            f"        default={default},",
            f"        help={text + ' (Fabric, default %(default)s)'!r},",
            "    )",
        ]
    lines.append("    return parser.parse_args(argv)")
    return "\n".join(lines)


def _main_source(
    body: list[Statement],
    params: list[Parameter],
    apply_after: Statement | None,
    plan: FabricPlan | None,
) -> str:
    names: set[str] = set().union(*(s.names.defines for s in body)) if body else set()
    defined = sorted(names | ({"fabric"} if plan else set()))
    argv = "argv" if "argv" not in defined else "_labkit_argv"
    lines = [
        f"def main({argv}: list[str] | None = None) -> None:",
        '    """Run the notebook\'s kept cells, in the order the kernel ran them."""',
    ]
    if defined:
        lines += textwrap.wrap(
            f"global {', '.join(defined)}",
            width=92,
            initial_indent="    ",
            subsequent_indent="    global ",
            break_on_hyphens=False,
        )
        lines = [ln.rstrip(",") for ln in lines]
    lines.append(f"    _cli = _parse_args({argv})")
    if plan is not None:
        lines.append("    # Lightning Fabric: processes, devices, precision from the command line")
        lines += [f"    {line}" if line else "" for line in FABRIC_PREAMBLE]
    current = None
    for s in body:
        if s.cell is not current:
            current = s.cell
            note = ""
            if INJECTED_TAG in s.cell.tags:
                note = ": parameters injected by labkit run"
            elif PARAMETERS_TAG in s.cell.tags:
                note = ": parameters (command-line options override them)"
            lines.append(f"    # %% {s.cell.label}{note}")
        text = plan.texts.get(id(s), s.text) if plan else s.text
        lines.append(indent_code(text, "    "))
        for line in plan.after.get(id(s), []) if plan else ():
            lines.append(f"    {line}  # labkit promote --fabric")
        if s is apply_after and params:
            lines += override_lines(params, "    ")
    if not body:
        lines.append("    pass")
    return "\n".join(lines)
