"""Read and validate an ``.ipynb`` file into plain data: cells with tags and execution counts.

Nothing here runs the notebook's code; :func:`read_notebook` only parses the JSON
(with nbformat) and keeps what promote needs: each code cell's source, tags,
execution count and outputs.

The file is checked before a byte is read: it must be a regular file (a FIFO or a device
could hang the reader) of at most :data:`MAX_NOTEBOOK_BYTES` (256 MiB; a larger file is
refused with :class:`NotebookTooLargeError`, which the server answers with 413).
Line ends in cell sources are Python's: ``\r\n`` and a lone ``\r`` become ``\n``.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit._format import first_line, fmt_bytes

__all__ = [
    "MAX_NOTEBOOK_BYTES",
    "Cell",
    "Notebook",
    "NotebookError",
    "NotebookTooLargeError",
    "read_notebook",
    "read_notebook_text",
]

MAX_NOTEBOOK_BYTES = 256 << 20
"""The largest notebook file labkit reads (256 MiB)."""


class NotebookError(ValueError):
    """The file is not a notebook labkit can read; the message names the file and the fix."""


class NotebookTooLargeError(NotebookError):
    """The notebook file is larger than the limit (:data:`MAX_NOTEBOOK_BYTES`)."""


@dataclass(frozen=True)
class Cell:
    """One cell of a notebook, as plain data.

    Args:
        number: 1-based position in the notebook (what the errors call ``cell N``).
        cell_type: ``"code"``, ``"markdown"`` or ``"raw"``.
        source: The cell's text.
        tags: The cell's tags (``metadata.tags``).
        execution_count: The kernel's ``In [n]`` counter, ``None`` when never run.
        outputs: The stored outputs (nbformat dicts), code cells only.

    Example:
        >>> Cell(number=1, cell_type="code", source="x = 1")
        Cell(number=1, code, In [ ], 'x = 1')
    """

    number: int
    cell_type: str
    source: str
    tags: tuple[str, ...] = ()
    execution_count: int | None = None
    outputs: tuple[dict[str, Any], ...] = field(default=(), repr=False)

    @property
    def is_code(self) -> bool:
        """True for code cells."""
        return self.cell_type == "code"

    @property
    def label(self) -> str:
        """``'cell 3 (In [7])'``, or ``'cell 3'`` when never run: how errors name the cell."""
        if self.execution_count is None:
            return f"cell {self.number}"
        return f"cell {self.number} (In [{self.execution_count}])"

    def __repr__(self) -> str:
        count = " " if self.execution_count is None else self.execution_count
        head = self.source if len(self.source) <= 30 else self.source[:27] + "..."
        tags = f", tags={list(self.tags)}" if self.tags else ""
        return f"Cell(number={self.number}, {self.cell_type}, In [{count}], {head!r}{tags})"


@dataclass(frozen=True)
class Notebook:
    """A notebook's cells and metadata.

    Args:
        path: Where it was read from.
        cells: Every cell, in notebook order.
        metadata: The notebook-level metadata (kernelspec, language_info, ...).

    Example:
        >>> nb = read_notebook("train.ipynb")                  # doctest: +SKIP
        >>> [c.label for c in nb.code_cells]                   # doctest: +SKIP
        ['cell 1 (In [1])', 'cell 2 (In [2])']
    """

    path: Path
    cells: tuple[Cell, ...]
    metadata: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def code_cells(self) -> tuple[Cell, ...]:
        """The code cells, in notebook order."""
        return tuple(c for c in self.cells if c.is_code)

    def __repr__(self) -> str:
        return f"Notebook({str(self.path)!r}, cells={len(self.cells)}, code={len(self.code_cells)})"


def read_notebook(path: str | os.PathLike[str], *, max_bytes: int = MAX_NOTEBOOK_BYTES) -> Notebook:
    """Read ``path`` as a Jupyter notebook (nbformat 4) and validate it.

    Args:
        path: The ``.ipynb`` file.
        max_bytes: The largest file accepted.

    Returns:
        The :class:`Notebook`.

    Raises:
        NotebookError: when the file is missing, not a regular file, larger than
            ``max_bytes`` (:class:`NotebookTooLargeError`), not JSON, or not a valid
            notebook; the message names the file and what is wrong.
    """
    import nbformat

    path = Path(path)
    text = read_notebook_text(path, max_bytes=max_bytes)
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise NotebookError(
            f"{path}: not a notebook: the file is not valid JSON ({exc}); "
            "was it saved by Jupyter, or truncated?"
        ) from None
    if isinstance(raw, dict) and isinstance(raw.get("nbformat"), int) and raw["nbformat"] < 4:
        raise NotebookError(
            f"{path}: an nbformat v{raw['nbformat']} notebook (IPython 3 or older); labkit "
            "reads v4: convert it with `jupyter nbconvert --to notebook "
            f"--nbformat 4 --output {path.stem}.v4.ipynb {path.name}` (or open and save it in "
            "JupyterLab)"
        )
    if not isinstance(raw, dict) or "cells" not in raw or "nbformat" not in raw:
        raise NotebookError(f"{path}: not a notebook: JSON without 'cells' and 'nbformat' keys")
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as exc:  # nbformat raises several types (ValidationError, NBFormatError)
        first = first_line(str(exc)) or type(exc).__name__
        raise NotebookError(f"{path}: not a valid nbformat-4 notebook: {first}") from None
    cells = []
    for number, cell in enumerate(nb.cells, start=1):
        source = cell.get("source", "")
        if isinstance(source, list):  # pragma: no cover - nbformat joins these already
            source = "".join(source)
        source = source.replace("\r\n", "\n").replace("\r", "\n")  # Python's line ends
        tags = tuple(str(t) for t in cell.get("metadata", {}).get("tags", []))
        is_code = cell.get("cell_type") == "code"
        cells.append(
            Cell(
                number=number,
                cell_type=cell.get("cell_type", "raw"),
                source=source,
                tags=tags,
                execution_count=cell.get("execution_count") if is_code else None,
                outputs=tuple(_plain(o) for o in cell.get("outputs", [])) if is_code else (),
            )
        )
    return Notebook(path=path, cells=tuple(cells), metadata=_plain(nb.get("metadata", {})))


def read_notebook_text(path: str | os.PathLike[str], *, max_bytes: int = MAX_NOTEBOOK_BYTES) -> str:
    """The text of the notebook file ``path``, once it is known to be a regular file of at
    most ``max_bytes`` (checked with ``stat`` before opening, and on the open file).

    Raises:
        NotebookError: missing, not a regular file, unreadable or not UTF-8;
            :class:`NotebookTooLargeError` when larger than ``max_bytes``.
    """
    path = Path(path)
    try:
        _check_file(os.stat(path), path, max_bytes)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as handle:
            _check_file(os.fstat(handle.fileno()), path, max_bytes)  # swapped meanwhile?
            data = handle.read(max_bytes + 1)
    except FileNotFoundError:
        raise NotebookError(f"{path}: no such notebook file") from None
    except ValueError as exc:  # a NUL byte in the name
        if isinstance(exc, NotebookError):
            raise
        raise NotebookError(f"{str(path)!r}: not a file name ({exc})") from None
    except OSError as exc:
        raise NotebookError(f"{path}: cannot read the notebook ({exc.strerror or exc})") from None
    if len(data) > max_bytes:
        raise NotebookTooLargeError(f"{path}: the notebook grew past {max_bytes} bytes while read")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotebookError(f"{path}: cannot read the notebook ({exc})") from None


def _check_file(st: os.stat_result, path: Path, max_bytes: int) -> None:
    if stat.S_ISDIR(st.st_mode):
        raise NotebookError(f"{path}: a folder, not a notebook file")
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "not a regular file"
        raise NotebookError(
            f"{path}: {kind}; labkit reads notebooks from regular files only (reading it "
            "could hang)"
        )
    if st.st_size > max_bytes:
        raise NotebookTooLargeError(
            f"{path}: the notebook is {fmt_bytes(st.st_size)} ({st.st_size} bytes); labkit "
            f"reads notebooks up to {fmt_bytes(max_bytes)}: clear its outputs (Edit > Clear "
            "Outputs of All Cells, or `jupyter nbconvert --clear-output`) and save it"
        )


def _plain(value: Any) -> Any:
    """nbformat's NotebookNode (a dict subclass) to plain dicts and lists."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
