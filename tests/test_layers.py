"""The layer table in CONTRIBUTING.md holds: no module imports a layer above its own, and no
module reaches another package's private names (``_module`` or ``_name``).

Each module under ``labkit/`` is parsed (imports inside functions count too). The shared
helpers at the package root (``labkit/_tensors.py``, ``_format``, ``_paths``, ``_interleave``,
``_lazy``, ``_options``, ``_display``) are meant for every layer. What is still in the way is
listed in ``DEBT`` with its reason; the list may only shrink (it is empty now): a new crossing
fails, and so does an entry that is gone.
"""

from __future__ import annotations

import ast
from pathlib import Path

LABKIT = Path(__file__).resolve().parents[1] / "labkit"

# lowest first; a module may import its own package, a lower layer, and the root helpers
LAYERS: dict[str, int] = {
    "trace": 1,
    "memory": 2,
    "plan": 2,
    "optimize": 3,
    "train": 3,
    "gnn": 3,
    "promote": 4,  # turns notebooks that use train into scripts: above it
    "views": 5,
    "widgets": 5,  # the former name of views
    "panels": 6,  # widgets that measure or act: they use the views' plumbing
    "server": 6,
    "cli": 7,
    "demo": 7,
    "doctor": 7,
    "__init__": 7,
}

# (importing file, imported module, imported name): crossings not yet removed (issue 28); none
# is left: a new one is a layer to fix, not an entry to add
DEBT: set[tuple[str, str, str]] = set()


def _package(path: Path) -> str:
    rel = path.relative_to(LABKIT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _lazy_targets(tree: ast.Module) -> list[tuple[int, str, str]]:
    """Modules named as strings in a module-level table (``_LAZY = {"Name": "labkit.x.y"}``):
    imported on first use, so arrows all the same. ``_MOVED`` tables are not: they name
    where an old name went (up), and nothing of the package imports it."""
    found = []
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or not isinstance(node.value, ast.Dict):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if any(isinstance(t, ast.Name) and t.id == "_MOVED" for t in targets):
            continue
        for value in node.value.values:
            if isinstance(value, ast.Constant) and str(value.value).startswith("labkit."):
                found.append((value.lineno, str(value.value), ""))
    return found


def _imports(tree: ast.Module) -> list[tuple[int, str, str]]:
    found = _lazy_targets(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] == "labkit":
                found += [(node.lineno, node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name, "") for a in node.names if a.name.startswith("labkit.")]
    return found


def crossings() -> dict[tuple[str, str, str], str]:
    """Every import that breaks the table, keyed as DEBT is, with a readable reason."""
    out: dict[tuple[str, str, str], str] = {}
    for path in sorted(LABKIT.rglob("*.py")):
        mine = _package(path)
        for line, module, name in _imports(ast.parse(path.read_text(), str(path))):
            parts = module.split(".")
            other = parts[1] if len(parts) > 1 else "__init__"
            if other.startswith("_") or other == mine:
                continue
            private = any(p.startswith("_") for p in parts[2:]) or name.startswith("_")
            upward = LAYERS.get(other, 0) > LAYERS.get(mine, 0)
            if private or upward:
                rel = str(path.relative_to(LABKIT.parent))
                why = " and ".join(w for w, b in (("private", private), ("upward", upward)) if b)
                out[(rel, module, name)] = f"{rel}:{line} imports {module} {name} ({why})"
    return out


def test_every_package_has_a_layer() -> None:
    packages = {_package(p) for p in LABKIT.rglob("*.py")}
    missing = sorted(p for p in packages if not p.startswith("_") and p not in LAYERS)
    assert not missing, f"add these to LAYERS and CONTRIBUTING.md's layer table: {missing}"


def test_no_new_crossings() -> None:
    new = [why for key, why in crossings().items() if key not in DEBT]
    assert not new, "imports that break the layer table:\n" + "\n".join(new)


def test_debt_list_is_current() -> None:
    gone = sorted(DEBT - set(crossings()))
    assert not gone, f"these crossings are gone: remove them from DEBT: {gone}"


def test_string_tables_count_as_imports_but_moved_names_do_not() -> None:
    tree = ast.parse(
        '_LAZY = {"View": "labkit.panels.x"}\n'
        '_MOVED = {"Old": "labkit.panels"}\n'
        "def f():\n    from labkit.server import y\n"
    )
    assert sorted(m for _, m, _ in _imports(tree)) == ["labkit.panels.x", "labkit.server"]
