"""No class in ``labkit/`` is over 450 lines (issue 40 item 2).

Each module under ``labkit/`` is parsed with :mod:`ast`; a class's size is its source span
(``end_lineno - lineno + 1``, decorators not counted), nested classes included. A class that
grows past the limit is split by concern (a helper module or class), not squeezed.
"""

from __future__ import annotations

import ast
from pathlib import Path

LABKIT = Path(__file__).resolve().parents[1] / "labkit"
MAX_LINES = 450


def class_sizes(path: Path) -> list[tuple[str, int]]:
    """``(qualified class name, lines)`` for every class defined in the module at ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                name = f"{prefix}{child.name}"
                assert child.end_lineno is not None
                out.append((name, child.end_lineno - child.lineno + 1))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def test_the_parser_sees_classes() -> None:
    sizes = dict(class_sizes(LABKIT / "memory" / "tracker.py"))
    assert "MemoryTracker" in sizes
    assert sizes["MemoryTracker"] > 100


def test_no_class_over_the_limit() -> None:
    modules = sorted(LABKIT.rglob("*.py"))
    assert modules, f"no modules found under {LABKIT}"
    over = [
        f"{path.relative_to(LABKIT.parent)}: class {name} is {lines} lines (limit {MAX_LINES})"
        for path in modules
        for name, lines in class_sizes(path)
        if lines > MAX_LINES
    ]
    assert not over, "classes over the size limit; split them by concern:\n" + "\n".join(over)
