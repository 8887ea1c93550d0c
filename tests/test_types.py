"""Types that say something (issue 28 item 4, issue 40 item 4): in each package of ``CHECKED``,
fewer than one annotated parameter or return in ten is a bare ``Any``.

Every function and method under the package is parsed; each annotated parameter (``*args``
and ``**kwargs`` too) and each return annotation counts once, and it counts as ``Any`` when
the annotation is ``Any`` itself (``dict[str, Any]`` says it is a dict, so it does not).
Where a value really can be anything labkit passes on untouched (a module's output), the
type is ``object``, which mypy checks, not ``Any``, which it does not.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

LABKIT = Path(__file__).resolve().parents[1] / "labkit"
LIMIT = 0.10


def annotations(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, function, is bare Any)`` for each annotated parameter and return in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *(p for p in (a.vararg, a.kwarg) if p)]
        found = [p.annotation for p in params if p.annotation is not None]
        if node.returns is not None:
            found.append(node.returns)
        for ann in found:
            text = ast.unparse(ann).strip("'\"")
            out.append((node.lineno, node.name, text in ("Any", "typing.Any")))
    return out


def any_share(package: str) -> tuple[int, int, Counter[str]]:
    """``(bare Any, annotated, Any per file)`` over the package's modules."""
    total, bare, per_file = 0, 0, Counter[str]()
    for path in sorted((LABKIT / package).rglob("*.py")):
        for _, _, is_any in annotations(path):
            total += 1
            if is_any:
                bare += 1
                per_file[str(path.relative_to(LABKIT.parent))] += 1
    return bare, total, per_file


def test_the_count_sees_parameters_returns_and_star_args(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text(
        "from typing import Any\n"
        "def f(a: Any, b: int, *args: Any, c: dict[str, Any], **kw: object) -> Any: ...\n"
        "def g(self, x) -> None: ...\n"
    )
    flags = [is_any for _, _, is_any in annotations(f)]
    assert flags == [True, False, False, True, False, True, False]


# issue 40 item 4 asks this of every package; these hold it. Still above it (2026-12-03):
# plan 23% (fake-tensor and index-value modes), train 18% (watch_transformers, module),
# panels 17%, optimize 12%: each moves into CHECKED once under the limit.
CHECKED = ["trace", "memory", "gnn", "promote", "server", "views"]
NOT_YET = {"plan", "train", "panels", "optimize"}


def test_every_package_is_checked_or_listed() -> None:
    packages = {
        p.name for p in LABKIT.iterdir() if p.is_dir() and any(p.glob("*.py")) and p.name[0] != "_"
    }
    missing = sorted(packages - set(CHECKED) - NOT_YET - {"widgets"})  # widgets: an alias
    assert not missing, f"add these to CHECKED (or NOT_YET, with why): {missing}"
    now_fine = sorted(p for p in NOT_YET if any_share(p)[0] / any_share(p)[1] < LIMIT)
    assert not now_fine, f"these now hold the limit: move them from NOT_YET to CHECKED: {now_fine}"


@pytest.mark.parametrize("package", CHECKED)
def test_fewer_than_one_annotation_in_ten_is_any(package: str) -> None:
    bare, total, per_file = any_share(package)
    assert total > 30, f"labkit/{package} has only {total} annotations: is the path right?"
    share = bare / total
    assert share < LIMIT, (
        f"labkit/{package}: {bare} of {total} annotated parameters and returns are Any "
        f"({share:.1%}, limit {LIMIT:.0%}); give them real types (torch.nn.Module, "
        f"torch.Tensor, an Observer, object for what is passed on untouched). By file: "
        f"{per_file.most_common(8)}"
    )
