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
    fabric.print(...)                                 # instead of print(...): rank 0 only
    fabric.clip_gradients(model, opt, max_norm=1.0)   # instead of clip_grad_norm_(...)
    fabric.to_device(x)                               # instead of x.to(device)
    val_loss = _mean_over_processes(val_loss)          # fabric.all_reduce(..., "mean")

The last line follows the statement (or the evaluation loop, one without ``backward``)
that sets a name like ``val_loss`` / ``dev_loss`` / ``test_loss``: each process evaluates
its shard of the data, and the mean over processes is what rank 0 prints.

so the script runs with ``--devices 2 --strategy ddp`` (Fabric starts the processes) and
under ``torchrun``. Anything else is refused with a message naming the cell and line.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from labkit.promote._effects import qualname
from labkit.promote.analysis import Statement
from labkit.promote.errors import Problem

__all__ = [
    "FABRIC_OPTIONS",
    "LEAVE_HELPER",
    "MAIN_BLOCK",
    "MEAN_HELPER",
    "FabricPlan",
    "plan_fabric",
]

# command-line options the Fabric script adds: name -> (argparse type, default, help)
FABRIC_OPTIONS: dict[str, tuple[str, str, str]] = {
    "accelerator": ("str", "'auto'", "'cpu', 'gpu' or 'auto'"),
    "devices": ("_devices", "1", "devices (processes) per node: a count, 'auto' or ids 0,1"),
    "strategy": ("str", "'auto'", "'auto', 'ddp', 'fsdp', ..."),
    "num_nodes": ("int", "1", "nodes (launch each with torchrun)"),
    "precision": ("str", "'32-true'", "'32-true', 'bf16-mixed', '16-mixed', ..."),
}

MEAN_HELPER = '''

def _mean_over_processes(value):
    """``value`` averaged over every process (``fabric.all_reduce``), as the type it had
    (a Python number is reduced in float64, so one process gives back the same digits)."""
    if fabric.world_size == 1:
        return value
    if isinstance(value, (int, float)):
        import torch

        total = torch.tensor(float(value), dtype=torch.float64)
        return type(value)(fabric.all_reduce(total, reduce_op="mean").item())
    return fabric.all_reduce(value, reduce_op="mean")
'''

LEAVE_HELPER = '''

def _leave_process_group(kept: set[str]) -> None:
    """After a run that went well: let go of what main() made (all but ``kept``) and leave
    the process group while the interpreter is whole. Left to interpreter shutdown, the
    process group's gloo threads are freed last and can abort a process that trained fine
    ('terminate called without an active exception')."""
    import gc

    import torch.distributed as dist

    for name in set(globals()) - kept:
        del globals()[name]
    if dist.is_initialized():
        dist.destroy_process_group()
    gc.collect()
'''

MAIN_BLOCK = """if __name__ == "__main__":
    _kept = set(globals())
    main()
    _leave_process_group(_kept)"""

FABRIC_PREAMBLE = [
    "from lightning.fabric import Fabric as _Fabric",
    "",
    "fabric = _Fabric(",
    "    accelerator=_cli.accelerator, devices=_cli.devices, strategy=_cli.strategy,",
    "    num_nodes=_cli.num_nodes, precision=_cli.precision,",
    ")",
    "fabric.launch()",
    "# a run that fails still leaves its process group before the interpreter ends",
    "import atexit as _atexit",
    "import torch.distributed as _dist",
    "",
    "_atexit.register(lambda: _dist.is_initialized() and _dist.destroy_process_group())",
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
            name = qualname(node.value.func, aliases)
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
    pairs = {model: opt for _, opt, model in optimizers}
    for s in body:
        edits, inserts, problems = _rank_and_device_edits(s, aliases, pairs)
        if any(s is loop for loop, _ in loops):
            calls = next(c for loop, c in loops if loop is s)
            edits += [
                (c, f"fabric.backward({', '.join(_call_args(s, c, receiver=True))})") for c in calls
            ]
        plan.problems += problems
        if edits or inserts:
            plan.texts[id(s)] = s.prefix + _rewrite(s, edits, inserts) + s.suffix
    return plan


_VAL_LOSS = re.compile(r"^(val|valid|validation|dev|test|eval)_?loss$|^loss_?(val|valid|dev|test)$")
_CLIP = frozenset(
    {
        "torch.nn.utils.clip_grad_norm_",
        "torch.nn.utils.clip_grad_value_",
        "torch.nn.utils.clip_grad.clip_grad_norm_",
    }
)


def _rank_and_device_edits(
    s: Statement, aliases: dict[str, str], pairs: dict[str, str]
) -> tuple[list[tuple[ast.Call, str]], list[tuple[ast.stmt, str]], list[Problem]]:
    """``print`` -> ``fabric.print``, ``clip_grad_norm_`` -> ``fabric.clip_gradients``,
    ``x.to(device)`` -> ``fabric.to_device(x)``, and ``all_reduce`` after a val loss."""
    edits: list[tuple[ast.Call, str]] = []
    problems: list[Problem] = []
    for node in ast.walk(s.node):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "print":
            edits.append((node, f"fabric.print({', '.join(_call_args(s, node))})"))
        elif qualname(func, aliases) in _CLIP:
            edit = _clip(s, node, pairs)
            if isinstance(edit, Problem):
                problems.append(edit)
            elif edit is not None:
                edits.append((node, edit))
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "to"
            and len(node.args) == 1
            and not node.keywords
            and _is_device(node.args[0])
        ):
            edits.append((node, f"fabric.to_device({_segment(s, func.value)})"))
    inserts = [
        (stmt, f"{name} = _mean_over_processes({name})") for stmt, name in _val_losses(s.node)
    ]
    # an edit inside another edit's call (print(x.to(device))): keep the outer one only
    outer = []
    for call, text in edits:
        if not any(other is not call and _inside(call, other) for other, _ in edits):
            outer.append((call, text))
    return outer, inserts, problems


def _clip(s: Statement, call: ast.Call, pairs: dict[str, str]) -> str | Problem | None:
    """``clip_grad_norm_(model.parameters(), 1.0)`` -> ``fabric.clip_gradients(model, opt,
    max_norm=1.0)``; ``clip_grad_value_`` -> ``clip_val=``."""
    first = call.args[0] if call.args else None
    model = None
    if (
        isinstance(first, ast.Call)
        and isinstance(first.func, ast.Attribute)
        and first.func.attr == "parameters"
        and isinstance(first.func.value, ast.Name)
    ):
        model = first.func.value.id
    if model is None or model not in pairs:
        return _error(
            s,
            "clip the gradients of the model the optimizer was built on "
            "(`clip_grad_norm_(model.parameters(), max_norm)`), so Fabric can "
            "clip them across processes",
        )
    value = "clip_grad_value_" in ast.unparse(call.func)
    limit = call.args[1] if len(call.args) > 1 else None
    rest = []
    for kw in call.keywords:
        if kw.arg in ("max_norm", "clip_value"):
            limit = kw.value
        elif kw.arg is not None:
            rest.append(f"{kw.arg}={_segment(s, kw.value)}")
    if limit is None:
        return None
    key = "clip_val" if value else "max_norm"
    args = [model, pairs[model], f"{key}={_segment(s, limit)}", *rest]
    return f"fabric.clip_gradients({', '.join(args)})"


def _is_device(node: ast.expr) -> bool:
    """``device``, ``DEVICE``, ``args.device``, ``torch.device(...)``, ``'cuda'``, ``'cpu'``."""
    if isinstance(node, ast.Name):
        return "device" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return node.attr.lower() == "device"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(":")[0] in ("cuda", "cpu", "mps")
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr == "device"
    return False


def _val_losses(node: ast.stmt) -> list[tuple[ast.stmt, str]]:
    """Where to reduce a validation loss: after an evaluation loop (no ``backward`` in it)
    that sets it, else after the statement that sets it."""
    out: list[tuple[ast.stmt, str]] = []

    def has_backward(n: ast.AST) -> bool:
        return any(
            isinstance(c, ast.Call)
            and isinstance(c.func, ast.Attribute)
            and c.func.attr == "backward"
            for c in ast.walk(n)
        )

    def visit(stmt: ast.stmt, eval_loop: ast.stmt | None) -> None:
        names = []
        if isinstance(stmt, ast.Assign):
            names = [t.id for t in stmt.targets if isinstance(t, ast.Name)]
        elif isinstance(stmt, ast.AugAssign | ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            names = [stmt.target.id]
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and isinstance(stmt.value, ast.Constant):
            names = []  # ``val_loss = 0.0``: a start value, nothing to reduce yet
        for name in names:
            if _VAL_LOSS.match(name):
                where = eval_loop if eval_loop is not None else stmt
                if (where, name) not in out:
                    out.append((where, name))
        is_eval = isinstance(stmt, ast.For | ast.While) and not has_backward(stmt)
        inner = eval_loop if eval_loop is not None else (stmt if is_eval else None)
        for part in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(stmt, part, []) or []:
                if isinstance(child, ast.stmt):
                    visit(child, inner)
                elif isinstance(child, ast.ExceptHandler):
                    for sub in child.body:
                        visit(sub, inner)

    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        visit(node, None)
    return out


def _inside(inner: ast.AST, outer: ast.AST) -> bool:
    return inner is not outer and any(n is inner for n in ast.walk(outer))


def _error(s: Statement, message: str) -> Problem:
    return Problem("error", f"--fabric: {s.cell.label} line {s.lineno}: {message}", s.cell.number)


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


def _offset(s: Statement, lineno: int, col: int) -> tuple[int, int]:
    """(row, byte column) of a node position within ``s.source``."""
    base_line, base_col = s.node.lineno, s.node.col_offset
    if getattr(s.node, "decorator_list", None):
        base_line = min(d.lineno for d in s.node.decorator_list)  # type: ignore[attr-defined]  # checked
        base_col = 0
    row = lineno - base_line
    return row, col - (base_col if row == 0 else 0)


def _segment(s: Statement, node: ast.expr) -> str:
    """The exact text of ``node`` within ``s``."""
    lines = [line.encode("utf-8") for line in s.source.split("\n")]
    (r0, c0) = _offset(s, node.lineno, node.col_offset)
    (r1, c1) = _offset(s, node.end_lineno or node.lineno, node.end_col_offset or 0)
    if r0 == r1:
        return lines[r0][c0:c1].decode("utf-8")
    parts = [lines[r0][c0:], *lines[r0 + 1 : r1], lines[r1][:c1]]
    return b"\n".join(parts).decode("utf-8")


def _call_args(s: Statement, call: ast.Call, *, receiver: bool = False) -> list[str]:
    """The arguments of ``call`` as written (``x.backward(g)`` with ``receiver``: x, g)."""
    args = [_segment(s, call.func.value)] if receiver else []  # type: ignore[attr-defined]  # x.method
    args += [_segment(s, a) for a in call.args]
    args += [
        f"{k.arg}={_segment(s, k.value)}" if k.arg else f"**{_segment(s, k.value)}"
        for k in call.keywords
    ]
    return args


def _rewrite(
    s: Statement, edits: list[tuple[ast.Call, str]], inserts: list[tuple[ast.stmt, str]]
) -> str:
    """``s.source`` with each call in ``edits`` replaced and each insert's line placed after
    its statement, at that statement's indentation."""
    lines = [line.encode("utf-8") for line in s.source.split("\n")]
    ops: list[tuple[tuple[int, int], tuple[int, int], bytes, bool]] = []
    for call, text in edits:
        start = _offset(s, call.lineno, call.col_offset)
        end = _offset(s, call.end_lineno or call.lineno, call.end_col_offset or 0)
        ops.append((start, end, text.encode("utf-8"), False))
    for stmt, text in inserts:
        row, _ = _offset(s, stmt.end_lineno or stmt.lineno, 0)
        indent = lines[_offset(s, stmt.lineno, 0)[0]][: stmt.col_offset]
        indent = indent if not indent.strip() else b" " * stmt.col_offset
        ops.append(((row + 1, -1), (row + 1, -1), indent + text.encode("utf-8"), True))
    for (r0, c0), (r1, c1), data, insert in sorted(ops, key=lambda o: o[0], reverse=True):
        if insert:
            lines.insert(r0, data + b"  # labkit promote --fabric")
        else:
            lines[r0 : r1 + 1] = [lines[r0][:c0] + data + lines[r1][c1:]]
    return "\n".join(line.decode("utf-8") for line in lines)
