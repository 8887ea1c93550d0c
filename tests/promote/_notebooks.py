"""Build small .ipynb files for the promote tests (nbformat, no kernel)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nbformat


def code(
    source: str,
    count: int | None = None,
    *,
    tags: tuple[str, ...] = (),
    outputs: list[dict[str, Any]] | None = None,
) -> Any:
    """A code cell with an execution count, tags and outputs."""
    cell = nbformat.v4.new_code_cell(source)
    cell.execution_count = count
    if tags:
        cell.metadata["tags"] = list(tags)
    cell.outputs = [nbformat.from_dict(o) for o in outputs or []]
    return cell


def markdown(source: str) -> Any:
    return nbformat.v4.new_markdown_cell(source)


def write_notebook(path: Path, cells: list[Any], *, escaped: bool = False) -> Path:
    """Write ``cells`` as a valid nbformat-4 notebook with a python3 kernelspec; ``escaped``
    writes JSON's ``\\u`` escapes (text may then hold lone surrogates, as JSON allows)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = cells
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.validate(nb)
    if escaped:
        path.write_text(json.dumps(nb, indent=1, ensure_ascii=True), encoding="ascii")
    else:
        path.write_text(nbformat.writes(nb), encoding="utf-8")
    return path


def numbered(*sources: str, tags: dict[int, tuple[str, ...]] | None = None) -> list[Any]:
    """Code cells run in notebook order (In [1], In [2], ...)."""
    tags = tags or {}
    return [code(s, i, tags=tags.get(i, ())) for i, s in enumerate(sources, start=1)]
