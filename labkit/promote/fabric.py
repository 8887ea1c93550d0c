"""``labkit promote --fabric``: put a recognizable plain PyTorch loop onto Lightning Fabric.

A loop is recognizable when the kept code has, at the top level of its cells:

- ``opt = torch.optim.<Optimizer>(model.parameters(), ...)`` (the model and optimizer),
- ``loader = DataLoader(...)`` (``torch.utils.data.DataLoader``), one or more,
- a ``for`` statement that iterates such a loader (``for xb, yb in loader``, also inside
  ``enumerate(...)`` or an outer epoch loop) and calls ``<loss>.backward()``.

The rewrite adds what Fabric needs and changes nothing else::

    fabric = _Fabric(accelerator=..., devices=..., strategy=..., num_nodes=..., precision=...)
    fabric.launch()                                   # first thing in main()
    model, opt = fabric.setup(model, opt)             # after the optimizer line
    loader = fabric.setup_dataloaders(loader)         # after each DataLoader line
    fabric.backward(loss)                             # instead of loss.backward()

so the script runs with ``--devices 2 --strategy ddp`` (Fabric starts the processes) and
under ``torchrun``. Anything else is refused with a message naming the cell and line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from labkit.promote.analyze import Statement
from labkit.promote.errors import Problem

__all__ = ["FABRIC_OPTIONS", "FabricPlan", "plan_fabric"]

# command-line options the Fabric script adds: name -> (argparse type, default, help)
FABRIC_OPTIONS: dict[str, tuple[str, str, str]] = {
    "accelerator": ("str", "'auto'", "'cpu', 'gpu' or 'auto'"),
    "devices": ("_devices", "1", "devices (processes) per node: a count, 'auto' or ids 0,1"),
    "strategy": ("str", "'auto'", "'auto', 'ddp', 'fsdp', ..."),
    "num_nodes": ("int", "1", "nodes (launch each with torchrun)"),
    "precision": ("str", "'32-true'", "'32-true', 'bf16-mixed', '16-mixed', ..."),
}

FABRIC_PREAMBLE = [
    "from lightning.fabric import Fabric as _Fabric",
    "",
    "fabric = _Fabric(",
    "    accelerator=_cli.accelerator, devices=_cli.devices, strategy=_cli.strategy,",
    "    num_nodes=_cli.num_nodes, precision=_cli.precision,",
    ")",
    "fabric.launch()",
]


@dataclass
class FabricPlan:
    """What the rewrite changes, by statement (``id(statement)``).

    Args:
        texts: New text of statements with ``.backward()`` calls.
        after: Lines inserted after a statement (``fabric.setup...``).
        problems: Errors naming the cell and line when the loop is not recognizable.
    """

    texts: dict[int, str] = field(default_factory=dict)
    after: dict[int, list[str]] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def plan_fabric(  # noqa: C901 - finds each piece of the loop, each with its own error
    body: list[Statement], aliases: dict[str, str]
) -> FabricPlan:
    """Find model, optimizer, DataLoaders and ``backward`` calls in ``body`` and plan the edits.

    Args:
        body: The kept statements, in execution order.
        aliases: Import aliases of the notebook (``{"nn": "torch.nn", ...}``).

    Returns:
        The :class:`FabricPlan`; ``problems`` is non-empty when the loop is not recognizable.
    """
    plan = FabricPlan()
    optimizers: list[tuple[Statement, str, str]] = []  # (statement, optimizer, model)
    loaders: dict[str, Statement] = {}
    loops: list[tuple[Statement, list[ast.Call]]] = []
    for s in body:
        node = s.node
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            name = _qualname(node.value.func, aliases)
            target = node.targets[0] if len(node.targets) == 1 else None
            if name and name.startswith("torch.optim.") and isinstance(target, ast.Name):
                model = _model_of(node.value)
                if model is None:
                    plan.problems.append(
                        _error(s, "the optimizer's first argument is not `model.parameters()`")
                    )
                else:
                    optimizers.append((s, target.id, model))
            elif name in ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"):
                if isinstance(target, ast.Name):
                    loaders[target.id] = s
                else:
                    plan.problems.append(
                        _error(s, "assign each DataLoader to one name (`loader = DataLoader(...)`)")
                    )
        calls = [
            n
            for n in ast.walk(node)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and n.func.attr == "backward"
        ]
        if calls:
            loops.append((s, calls))

    if not loops:
        plan.problems.append(
            Problem(
                "error",
                "--fabric: no `loss.backward()` in the kept code: there is no training loop "
                "to put on Fabric",
            )
        )
        return plan
    if not optimizers:
        s = loops[0][0]
        plan.problems.append(
            _error(
                s,
                "no `opt = torch.optim.<Optimizer>(model.parameters(), ...)` at the top level "
                "of a cell that ran before it; Fabric needs the model and its optimizer",
            )
        )
    if not loaders:
        s = loops[0][0]
        plan.problems.append(
            _error(
                s,
                "the loop does not iterate a `DataLoader` assigned at the top level of a cell "
                "(`loader = DataLoader(dataset, ...)`); Fabric shards and places batches "
                "through setup_dataloaders",
            )
        )
    for s, _ in loops:
        if not isinstance(s.node, ast.For | ast.While | ast.With | ast.If):
            plan.problems.append(
                _error(s, "`.backward()` outside a loop; put the training step in a `for` loop")
            )
        elif loaders and not _iterates(s.node, set(loaders)):
            plan.problems.append(
                _error(
                    s,
                    f"the loop does not iterate a DataLoader ({', '.join(sorted(loaders))}) "
                    "directly or through enumerate()",
                )
            )
    if plan.problems:
        return plan

    for s, opt, model in optimizers:
        plan.after.setdefault(id(s), []).append(f"{model}, {opt} = fabric.setup({model}, {opt})")
    for name, s in loaders.items():
        plan.after.setdefault(id(s), []).append(f"{name} = fabric.setup_dataloaders({name})")
    for s, calls in loops:
        plan.texts[id(s)] = s.prefix + _replace_backward(s, calls) + s.suffix
    return plan


def _error(s: Statement, message: str) -> Problem:
    return Problem("error", f"--fabric: {s.cell.label} line {s.lineno}: {message}", s.cell.number)


def _qualname(node: ast.expr, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([aliases.get(node.id, node.id), *reversed(parts)])


def _model_of(call: ast.Call) -> str | None:
    """``torch.optim.SGD(model.parameters(), ...)`` -> ``"model"``."""
    first = call.args[0] if call.args else None
    if first is None:
        first = next((k.value for k in call.keywords if k.arg == "params"), None)
    if (
        isinstance(first, ast.Call)
        and isinstance(first.func, ast.Attribute)
        and first.func.attr == "parameters"
        and isinstance(first.func.value, ast.Name)
    ):
        return first.func.value.id
    return None


def _iterates(node: ast.stmt, loaders: set[str]) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.For):
            it = n.iter
            if isinstance(it, ast.Call) and getattr(it.func, "id", "") == "enumerate" and it.args:
                it = it.args[0]
            if isinstance(it, ast.Name) and it.id in loaders:
                return True
    return False


def _replace_backward(s: Statement, calls: list[ast.Call]) -> str:
    """The statement's text with each ``x.backward(args)`` as ``fabric.backward(x, args)``."""
    lines = [line.encode("utf-8") for line in s.source.split("\n")]
    base_line, base_col = s.node.lineno, s.node.col_offset
    if getattr(s.node, "decorator_list", None):
        base_line = min(d.lineno for d in s.node.decorator_list)  # type: ignore[attr-defined]  # checked
        base_col = 0

    def offset(lineno: int, col: int) -> tuple[int, int]:
        row = lineno - base_line
        return row, col - (base_col if row == 0 else 0)

    def segment(node: ast.expr) -> str:
        (r0, c0), (r1, c1) = (
            offset(node.lineno, node.col_offset),
            offset(node.end_lineno or node.lineno, node.end_col_offset or 0),
        )
        if r0 == r1:
            return lines[r0][c0:c1].decode("utf-8")
        parts = [lines[r0][c0:], *lines[r0 + 1 : r1], lines[r1][:c1]]
        return b"\n".join(parts).decode("utf-8")

    edits = []
    for call in calls:
        receiver = call.func.value  # type: ignore[attr-defined]  # calls are x.method(...)
        args = [segment(receiver)] + [segment(a) for a in call.args]
        args += [f"{k.arg}={segment(k.value)}" if k.arg else f"**{segment(k.value)}"
                 for k in call.keywords]  # fmt: skip
        start = offset(call.lineno, call.col_offset)
        end = offset(call.end_lineno or call.lineno, call.end_col_offset or 0)
        edits.append((start, end, f"fabric.backward({', '.join(args)})"))
    for (r0, c0), (r1, c1), text in sorted(edits, reverse=True):
        head, tail = lines[r0][:c0], lines[r1][c1:]
        lines[r0 : r1 + 1] = [head + text.encode("utf-8") + tail]
    return "\n".join(line.decode("utf-8") for line in lines)
