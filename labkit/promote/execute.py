"""``labkit run``: execute a notebook headlessly with parameters, and keep the executed copy.

Parameters follow papermill's convention: a new cell tagged ``injected-parameters`` goes
right after the cell tagged ``parameters`` and assigns the given values, so they replace
the defaults. Unlike papermill, each parameter is checked first: the ``parameters`` cell
must assign it, and the value must fit the default's type (an ``int`` is accepted for a
``float``; anything is accepted for a ``None`` default).
"""

from __future__ import annotations

import ast
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from labkit._paths import atomic_writer, check_output_file
from labkit.promote._process_group import kill_group
from labkit.promote.notebook import read_notebook, read_notebook_text

__all__ = [
    "INJECTED_TAG",
    "PARAMETERS_TAG",
    "NotebookRunError",
    "ParameterError",
    "inject_parameters",
    "parse_parameter",
    "run_notebook",
]

PARAMETERS_TAG = "parameters"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
INJECTED_TAG = "injected-parameters"


class ParameterError(ValueError):
    """A ``-p name=value`` does not fit the notebook; the message names it and the cell."""


class NotebookRunError(RuntimeError):
    """A cell raised while the notebook ran; the executed copy (with the error) was written.

    Args:
        message: What failed, naming the cell.
        output: The executed copy.
        cell: The 1-based number of the failing cell.
        timed_out: The cell ran past the time limit.
    """

    def __init__(
        self, message: str, *, output: Path | None, cell: int | None, timed_out: bool = False
    ) -> None:
        super().__init__(message)
        self.output = output
        self.cell = cell
        self.timed_out = timed_out


def parse_parameter(text: str) -> tuple[str, Any]:
    """``"lr=0.1"`` -> ``("lr", 0.1)``: the value is a Python literal, else a string.

    Example:
        >>> parse_parameter("epochs=3"), parse_parameter("name=run-a")
        (('epochs', 3), ('name', 'run-a'))
    """
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier():
        raise ParameterError(f"parameter {text!r}: write it as name=value (e.g. -p lr=0.01)")
    try:
        value = ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError):
        value = raw
    return name, value


def value_source(value: Any) -> str:
    """Python source that makes ``value``: ``repr``, except that floats that are not
    literals are written as calls (``inf`` -> ``float("inf")``, ``nan`` -> ``float("nan")``).

    Example:
        >>> print(value_source([1.5, float("inf"), {"a": float("-inf")}]))
        [1.5, float("inf"), {'a': float("-inf")}]
    """
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, list):
        return "[" + ", ".join(value_source(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(value_source(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        items = (f"{value_source(k)}: {value_source(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    return repr(value)


def _defaults(source: str) -> dict[str, Any]:
    """Names the parameters cell assigns, with their literal defaults (``...`` if not literal)."""
    out: dict[str, Any] = {}
    for stmt in ast.parse(source).body:
        targets: list[ast.Name] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets = [t for t in stmt.targets if isinstance(t, ast.Name)]
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            targets = [stmt.target]
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            value = stmt.value
        for target in targets:
            try:
                out[target.id] = ast.literal_eval(value) if value else ...
            except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
                out[target.id] = ...
    return out


def _coerce(name: str, value: Any, default: Any, where: str) -> Any:
    if default is ... or default is None or value is None:
        return value
    if isinstance(default, bool) or isinstance(value, bool):
        if isinstance(default, bool) and isinstance(value, bool):
            return value
    elif isinstance(default, float) and isinstance(value, int):
        return float(value)
    elif isinstance(default, str):
        return value if isinstance(value, str) else str(value)
    elif isinstance(value, type(default)):
        return value
    raise ParameterError(
        f"parameter {name}={value!r}: {where} sets {name} = {default!r} "
        f"({type(default).__name__}); give a {type(default).__name__}"
    )


def inject_parameters(nb: Any, parameters: Mapping[str, Any], *, path: str | Path = "") -> int:
    """Insert the ``injected-parameters`` cell after the ``parameters`` cell of ``nb``.

    Args:
        nb: An nbformat notebook node (changed in place).
        parameters: Name -> value; each must be assigned by the ``parameters`` cell.
        path: The notebook's file, for messages.

    Returns:
        The 0-based index of the injected cell (``-1`` when there are no parameters).

    Raises:
        ParameterError: no ``parameters`` cell, an unknown name or a value of the wrong type.
    """
    import nbformat

    nb.cells = [c for c in nb.cells if INJECTED_TAG not in c.get("metadata", {}).get("tags", [])]
    if not parameters:
        return -1
    index = next(
        (
            i
            for i, c in enumerate(nb.cells)
            if c.cell_type == "code" and PARAMETERS_TAG in c.get("metadata", {}).get("tags", [])
        ),
        None,
    )
    if index is None:
        raise ParameterError(
            f"{path}: no cell is tagged 'parameters'; tag the cell that sets the defaults "
            f"(got {', '.join(parameters)})"
        )
    where = f"the parameters cell (cell {index + 1})"
    try:
        defaults = _defaults(nb.cells[index].source)
    except SyntaxError as exc:
        raise ParameterError(f"{path}: {where} is not valid Python ({exc.msg})") from None
    lines = ["# Parameters injected by labkit run"]
    for name, value in parameters.items():
        if name not in defaults:
            known = ", ".join(defaults) or "nothing"
            raise ParameterError(
                f"{path}: parameter {name!r} is not set in {where}; it sets: {known}"
            )
        value = _coerce(name, value, defaults[name], where)
        lines.append(f"{name} = {value_source(value)}")
    cell = nbformat.v4.new_code_cell("\n".join(lines))
    cell.metadata["tags"] = [INJECTED_TAG]
    nb.cells.insert(index + 1, cell)
    return index + 1


def default_run_output(notebook: str | Path) -> Path:
    """``train.ipynb`` -> ``train.run.ipynb`` next to it."""
    notebook = Path(notebook)
    return notebook.with_name(f"{notebook.stem}.run.ipynb")


def _quiet_kernel(name: str) -> list[str]:
    """IPython kernels started here log at ERROR: ipykernel's start-up warning ("Kernel is
    running over TCP without encryption", for a kernel on 127.0.0.1 that only this process
    talks to) otherwise lands in every ``labkit run`` and ``--verify`` output. Other
    kernels get nothing (an unknown option could stop them from starting)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        argv = KernelSpecManager().get_kernel_spec(name).argv
    except (NoSuchKernel, OSError, ValueError):
        return []
    return ["--IPKernelApp.log_level=ERROR"] if any("ipykernel" in a for a in argv) else []


def run_notebook(
    notebook: str | os.PathLike[str],
    parameters: Mapping[str, Any] | None = None,
    output: str | os.PathLike[str] | None = None,
    *,
    timeout: float | None = 600,
    kernel_name: str | None = None,
    progress: Callable[[str], None] | None = None,
    force: bool = False,
) -> Path:
    """Execute ``notebook`` with ``parameters`` in a fresh kernel; write the executed copy.

    The kernel starts in the notebook's folder and reads ``/dev/null`` as stdin; what its
    cells started is stopped when the run ends (its process group is killed). The input
    notebook is never changed.

    Args:
        notebook: The ``.ipynb`` file.
        parameters: Values for names the ``parameters`` cell assigns.
        output: Where the executed copy goes (default ``NAME.run.ipynb``, replaced if it
            exists; never the input notebook). Checked before the kernel starts: its folder
            must exist and be writable, and an existing file is replaced only with ``force``.
        timeout: Seconds one cell may run (``None``: no limit).
        kernel_name: Kernel to use (default: the notebook's kernelspec, else ``python3``).
        progress: Called with a line per cell as it starts (the CLI prints these).
        force: Replace an existing ``output``.

    Returns:
        The executed copy's path.

    Raises:
        labkit.promote.NotebookError: not a readable notebook.
        ParameterError: a parameter does not fit the ``parameters`` cell.
        labkit._paths.OutputPathError: ``output`` is a folder, exists without ``force``, or
            its folder is missing or not writable (before anything runs).
        NotebookRunError: a cell raised, ran past ``timeout`` or killed the kernel (the
            message names the cell; the executed copy is written, with the cells that did
            not run cleared and ``metadata.labkit.run`` marked failed), or the kernel is
            not installed (the message names the installed ones; nothing runs).

    Example:
        >>> run_notebook("train.ipynb", {"epochs": 1})             # doctest: +SKIP
        PosixPath('train.run.ipynb')
    """
    return execute_notebook(
        notebook,
        parameters,
        output,
        timeout=timeout,
        kernel_name=kernel_name,
        progress=progress,
        force=force,
    )


def execute_notebook(
    notebook: str | os.PathLike[str],
    parameters: Mapping[str, Any] | None = None,
    output: str | os.PathLike[str] | None = None,
    *,
    timeout: float | None = 600,
    kernel_name: str | None = None,
    progress: Callable[[str], None] | None = None,
    force: bool = False,
    cwd: str | os.PathLike[str] | None = None,
) -> Path:
    """:func:`run_notebook` with the kernel started in ``cwd`` (default: the notebook's
    folder; ``labkit promote --verify`` gives a working copy of it), which then also goes
    first on the kernel's ``sys.path`` (``PYTHONPATH``). The kernel reads ``/dev/null`` as
    stdin, and its process group (what its cells started too) is killed when the run
    ends, however it ends."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    checked = read_notebook(notebook)  # clear errors for malformed files
    path = checked.path
    out = Path(output) if output is not None else default_run_output(path)
    if out.resolve() == path.resolve():
        raise ParameterError(f"{out}: the executed copy would replace the notebook; choose -o")
    check_output_file(
        out,
        force=force or output is None,
        what="output notebook",
        file_name=path.with_suffix(".run.ipynb").name,
    )
    nb = nbformat.reads(read_notebook_text(path), as_version=4)
    injected = inject_parameters(nb, dict(parameters or {}), path=path)
    name = kernel_name or nb.metadata.get("kernelspec", {}).get("name") or "python3"

    _check_kernel(name, path)
    started: list[int] = []

    def on_start(cell: Any, cell_index: int) -> None:
        started.append(cell_index)
        if progress is not None:
            if cell_index == injected:
                label = "injected parameters"
            else:
                label = f"cell {_original_number(cell_index, injected)}"
            progress(f"[{cell_index + 1}/{len(nb.cells)}] {label}")

    groups: list[int | None] = []
    client = NotebookClient(
        nb,
        timeout=timeout,
        kernel_name=name,
        resources={"metadata": {"path": str(cwd if cwd is not None else path.parent)}},
        on_cell_start=on_start,
        extra_arguments=_quiet_kernel(name),
    )
    client.on_notebook_start = lambda **_: groups.append(_kernel_group(client))
    try:
        client.execute(
            stdin=subprocess.DEVNULL, **({} if cwd is None else {"env": _path_first(cwd)})
        )
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as exc:
        index = started[-1] if started else None  # the cell that was running
        failed = None if index is None else _original_number(index, injected)
        where = f"cell {failed}" if failed else "a cell"
        if isinstance(exc, CellTimeoutError):
            what = f"{where} ran past the time limit of {timeout:g} s per cell (--timeout)"
        elif isinstance(exc, DeadKernelError):
            what = f"the kernel died while {where} ran (os._exit, a crash, or out of memory)"
        else:
            what = f"{where} failed: {_error_summary(exc)}"
        _finish(nb, started, failed=failed, error=what)
        _write(out, nbformat.writes(nb))
        raise NotebookRunError(
            f"{path}: {what}; the executed copy is {out} (cells after it were not run: their "
            "outputs are cleared)",
            output=out,
            cell=failed,
            timed_out=isinstance(exc, CellTimeoutError),
        ) from None
    finally:
        for group in groups:  # what the cells started, still running after the kernel
            kill_group(group)
    _finish(nb, started, failed=None, error="")
    _write(out, nbformat.writes(nb))
    return out


def _path_first(folder: str | os.PathLike[str]) -> dict[str, str]:
    """This process's environment with ``folder`` first on ``PYTHONPATH``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(folder).resolve()), *filter(None, [env.get("PYTHONPATH")])]
    )
    return env


def _kernel_group(client: Any) -> int | None:
    """The process group of ``client``'s kernel (jupyter_client starts it in a session of
    its own), read when it has started."""
    return getattr(getattr(client.km, "provisioner", None), "pgid", None)


RUN_METADATA = "labkit"  # nb.metadata["labkit"]["run"]: {"status": "ok"|"failed", "cell", "error"}


def _finish(nb: Any, started: list[int], *, failed: int | None, error: str) -> None:
    """Clear the outputs and counts of every code cell that did not run (papermill does),
    and record in the copy's metadata whether the run failed, and where."""
    ran = set(started)
    for index, cell in enumerate(nb.cells):
        if cell.get("cell_type") == "code" and index not in ran:
            cell["outputs"] = []
            cell["execution_count"] = None
    record: dict[str, Any] = {"status": "failed" if error else "ok"}
    if error:
        record.update(cell=failed, error=error)
    nb.metadata.setdefault(RUN_METADATA, {})["run"] = record


def _error_summary(exc: BaseException) -> str:
    """``NameError: name 'x' is not defined`` from a CellExecutionError."""
    name, value = getattr(exc, "ename", ""), getattr(exc, "evalue", "")
    if name:
        return f"{name}: {_ANSI.sub('', str(value))}".strip().rstrip(":")
    lines = [line for line in _ANSI.sub("", str(exc)).splitlines() if line.strip("- ")]
    return lines[-1].strip() if lines else type(exc).__name__


def _check_kernel(name: str, path: Path) -> None:
    """Refuse an unknown kernel before anything runs, naming the installed ones."""
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager().find_kernel_specs()
    if name not in specs:
        raise NotebookRunError(
            f"{path}: no Jupyter kernel named {name!r} is installed (the notebook's kernelspec "
            f"or --kernel); installed: {', '.join(sorted(specs)) or 'none'}; pass "
            "--kernel NAME",
            output=None,
            cell=None,
        )


def _write(out: Path, text: str) -> None:
    with atomic_writer(out, "w", what="output notebook") as fh:  # the umask's mode
        fh.write(text)


def _original_number(index: int, injected: int) -> int:
    """1-based number in the input notebook of the executed copy's cell ``index``."""
    return index if 0 <= injected < index else index + 1


def _stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
