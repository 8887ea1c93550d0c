"""``labkit promote --verify``: proof that the script does what the notebook does.

The notebook runs in a fresh kernel (Restart & Run All, as ``labkit run`` runs it, with the
same ``-p`` values), then the promoted script runs with the same values as command-line
options, and what each printed is compared line by line:

1. exactly: ``identical (N lines)``;
2. else with numbers within a stated tolerance (``|a - b| <= atol + rtol * |b|``, default
   ``rtol=1e-5``, ``atol=1e-8``; the text around the numbers must match exactly):
   ``equal within rtol=1e-05, atol=1e-08 (N lines, K differ in the last digits)``;
3. else the first differing line, with both texts and the script statement that printed
   it (found by recording, for every write to stdout, the script line that made it).

Lines a progress bar draws (carriage returns, ``it/s``) are left out of both sides; fields
matching an ``ignore`` pattern (``--ignore REGEX``) are masked in both. When the only
differences are numbers followed by a time unit (``ms``, ``s``, ``it/s``), the outcome says so
and suggests the ``--ignore`` that leaves them out.

Each side runs in a working copy of the notebook's folder (inputs read as before, outputs
written to the copy, removed after: a file next to the notebook is never written), with that
folder first on ``sys.path`` and as the current directory, stdin from ``/dev/null``, in a
process group of its own that is killed when the side ends or runs past ``timeout``.
Hidden state is reported too: names the notebook's saved execution used that Restart &
Run All does not define before use, and cells whose saved execution order differs from
the file order.

Example:
    >>> print(verify("train.ipynb", "train.py").summary())         # doctest: +SKIP
    identical (12 lines)
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Difference", "Verification", "VerifyTimeout", "compare_lines", "hidden_state", "verify"]

RTOL, ATOL = 1e-5, 1e-8
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)\b")
_PROGRESS = re.compile(r"\r|it/s\b|s/it\b|━")
_CELL_MARK = re.compile(r"^\s*# %% cell (\d+)\b", re.MULTILINE)
_TIME_MAGIC = re.compile(r"^\s*%%?(time|timeit)\b", re.MULTILINE)
# what %time / %%time / %timeit print: "CPU times: ...", "Wall time: ...", "1.2 ms ± 3 us per
# loop (mean ± std. dev. of 7 runs, 1,000 loops each)"
_TIME_LINE = re.compile(r"CPU times: |Wall time: |.* per loop \(mean ± std\. dev\. of ")
# a number followed by a time unit: "1821.78ms", "3.1 s", "12.5it/s"
_TIMED = re.compile(
    r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)? ?(ms|us|µs|ns|s|it/s|s/it)(?![\w/])"
)
_MASK = "<ignored>"


class VerifyTimeout(RuntimeError):
    """A side of :func:`verify` ran past ``timeout``; the message names the side (notebook
    or script), the limit and ``--timeout``. What it started was stopped with it."""


@dataclass(frozen=True)
class Difference:
    """The first line where the script's output differs from the notebook's.

    Args:
        line: 1-based line number in the compared output.
        notebook: The notebook's line (``None`` when it printed fewer lines).
        script: The script's line (``None`` when it printed fewer lines).
        statement: The script statement that printed it (``"cell 3 (In [3]), script line
            41: print(loss)"``), ``""`` when unknown.
    """

    line: int
    notebook: str | None
    script: str | None
    statement: str = ""

    def __str__(self) -> str:
        where = f" (printed by {self.statement})" if self.statement else ""
        return (
            f"line {self.line} differs{where}:\n  notebook: {_shown(self.notebook)}\n"
            f"  script:   {_shown(self.script)}"
        )


@dataclass(frozen=True)
class Verification:
    """The outcome of :func:`verify`.

    Args:
        outcome: ``"identical"``, ``"within tolerance"`` or ``"different"``.
        lines: Lines compared (the notebook's).
        close: Lines equal only within the tolerance.
        difference: The first differing line (``outcome == "different"``).
        rtol: Relative tolerance used for numbers.
        atol: Absolute tolerance used for numbers.
        hidden: Hidden-state findings about the saved notebook.
        note: What the differences have in common (``"only times differ ..."``),
            ``""`` when nothing.
        ran_in: The folder that held the working copies both sides ran (and wrote) in,
            removed after; ``""`` for :func:`compare_lines`.
        copied: The notebook's folder they are copies of.
    """

    outcome: str
    lines: int
    close: int = 0
    difference: Difference | None = None
    rtol: float = RTOL
    atol: float = ATOL
    hidden: tuple[str, ...] = ()
    note: str = ""
    ran_in: str = ""
    copied: str = ""

    @property
    def ok(self) -> bool:
        """True unless the outputs differ."""
        return self.outcome != "different"

    def summary(self) -> str:
        """One line: ``identical (N lines)``, ``equal within ...`` or the first difference."""
        if self.outcome == "identical":
            return f"identical ({self.lines} lines)"
        if self.outcome == "within tolerance":
            return (
                f"equal within rtol={self.rtol:g}, atol={self.atol:g} ({self.lines} lines, "
                f"{self.close} differ in the last digits)"
            )
        return f"different: {self.difference}"

    def lines_of_report(self) -> list[str]:
        """The summary, then the hidden-state findings."""
        out = [f"verify: {self.summary()}"]
        if self.note:
            out.append(f"verify: {self.note}")
        if self.ran_in:
            out.append(
                f"verify: both ran in copies of {self.copied} ({self.ran_in}/notebook and "
                f"{self.ran_in}/script, removed after): what they wrote went there"
            )
        out += [f"verify: hidden state: {h}" for h in self.hidden]
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the server sends it)."""
        data = dataclasses.asdict(self)
        data["summary"] = self.summary()
        return data

    def __repr__(self) -> str:
        return f"Verification({self.summary()!r}, hidden={len(self.hidden)})"


def verify(
    notebook: str | os.PathLike[str],
    script: str | os.PathLike[str],
    *,
    parameters: Mapping[str, Any] | None = None,
    timeout: float = 600,
    rtol: float = RTOL,
    atol: float = ATOL,
    results_of: frozenset[int] = frozenset(),
    fit: bool = False,
    ignore: Sequence[str] = (),
) -> Verification:
    """Run ``notebook`` fresh and ``script`` with the same parameters; compare their prints.

    Each runs in its own working copy of the notebook's folder (the notebook in a kernel
    started there, the script as ``python script.py --name value ...`` with the copy first
    on ``sys.path``), so what they write never lands next to the notebook.

    Args:
        notebook: The ``.ipynb`` file the script was promoted from.
        script: The promoted script.
        parameters: ``-p`` values for the ``parameters`` cell (also given to the script).
        timeout: Seconds per notebook cell, and for the whole script.
        rtol: Relative tolerance for numbers that differ.
        atol: Absolute tolerance for numbers that differ.
        results_of: Cells (numbers in ``notebook``) whose displayed result the script
            prints (``show_results``): their ``execute_result`` text counts as printed.
        fit: The notebook trains with ``lab.fit``: the per-step losses of its run (the
            newest ``run.json`` the fresh run wrote in its copy) and of the script's
            (``--logdir`` in the temporary folder) are compared too, as lines
            ``fit step N loss X`` after the printed ones.
        ignore: Regular expressions; what they match is masked in both sides' lines.

    Returns:
        The :class:`Verification`.

    Raises:
        labkit.promote.NotebookRunError: the notebook fails under Restart & Run All (the
            message names the cell).
        VerifyTimeout: a notebook cell or the script ran past ``timeout``.
        RuntimeError: the script fails (its last output in the message), or the folder
            cannot be copied.
        re.error: an ``ignore`` pattern is not a regular expression.
    """
    from labkit.promote._working_copy import working_copy
    from labkit.promote.execute import NotebookRunError, execute_notebook
    from labkit.promote.notebook import read_notebook

    notebook, script = Path(notebook), Path(script)
    masks = tuple(re.compile(x) for x in ignore)
    params = dict(parameters or {})
    folder = notebook.resolve().parent
    with tempfile.TemporaryDirectory(prefix="labkit-verify-") as name:
        tmp = Path(name)
        copy = working_copy(folder, tmp / "notebook")
        started = time.time()
        try:
            executed = execute_notebook(
                notebook, params, tmp / "fresh.ipynb", timeout=timeout, cwd=copy, force=True
            )
        except NotebookRunError as exc:
            if exc.timed_out:
                cell = f"cell {exc.cell}" if exc.cell else "a cell"
                raise VerifyTimeout(
                    f"the notebook's {cell} ran past the time limit of {timeout:g} s per cell "
                    "(--timeout); its kernel and what it started were stopped"
                ) from None
            raise
        expected = _printed_lines(read_notebook(executed), results_of, _script_cells(script))
        if fit:
            expected += _loss_lines(_newest_run(copy, started))
        shutil.rmtree(copy, ignore_errors=True)  # room for the script's copy
        copy = working_copy(folder, tmp / "script")
        extra = ["--logdir", str(tmp / "script-run")] if fit else []
        got, where = _run_script(_in_copy(script, folder, copy), copy, params, tmp, timeout, extra)
        if fit:
            got += _loss_lines(tmp / "script-run" / "run.json")
    hidden = hidden_state(read_notebook(notebook))
    found = compare_lines(expected, got, rtol=rtol, atol=atol, ignore=masks)
    if found.difference is not None:
        line = found.difference.line
        statement = _statement_at(script, where[line - 1]) if line <= len(where) else ""
        found = dataclasses.replace(
            found, difference=dataclasses.replace(found.difference, statement=statement)
        )
    return dataclasses.replace(found, hidden=hidden, ran_in=str(tmp), copied=str(folder))


def _in_copy(script: Path, folder: Path, copy: Path) -> Path:
    """The script's twin in the working copy (the script itself when it lies elsewhere)."""
    try:
        return copy / script.resolve().relative_to(folder)
    except ValueError:
        return script.resolve()


def compare_lines(
    expected: list[str],
    got: list[str],
    *,
    rtol: float = RTOL,
    atol: float = ATOL,
    ignore: Sequence[str | re.Pattern[str]] = (),
) -> Verification:
    """Compare two outputs line by line: exactly, then numbers within the tolerance.

    What an ``ignore`` pattern matches is masked in both lines first. When the outputs
    differ only in numbers followed by a time unit, ``note`` says so and suggests the
    ``--ignore`` patterns that leave them out.

    Example:
        >>> compare_lines(["loss 0.5"], ["loss 0.5"]).summary()
        'identical (1 lines)'
        >>> compare_lines(["loss 0.5000001"], ["loss 0.5"]).outcome
        'within tolerance'
        >>> print(compare_lines(["loss 0.5"], ["loss 0.6"]).difference)
        line 1 differs:
          notebook: 'loss 0.5'
          script:   'loss 0.6'
        >>> print(compare_lines(["iter 0: time 1821.78ms"], ["iter 0: time 3068.49ms"]).note)
        only times differ (numbers followed by ms): --ignore '[0-9.]+ ?ms' leaves them out
        >>> compare_lines(["t 1.5ms"], ["t 2.5ms"], ignore=[r"[0-9.]+ ?ms"]).outcome
        'identical'
    """
    masks = [re.compile(x) for x in ignore]
    expected, got = _masked(expected, masks), _masked(got, masks)
    close = 0
    for number in range(max(len(expected), len(got))):
        a = expected[number] if number < len(expected) else None
        b = got[number] if number < len(got) else None
        if a == b:
            continue
        if a is not None and b is not None and _close(a, b, rtol, atol):
            close += 1
            continue
        return Verification(
            "different",
            len(expected),
            close,
            Difference(number + 1, a, b),
            rtol,
            atol,
            note=_timing_note(expected, got, rtol, atol),
        )
    outcome = "identical" if close == 0 else "within tolerance"
    return Verification(outcome, len(expected), close, None, rtol, atol)


def _masked(lines: list[str], masks: list[re.Pattern[str]]) -> list[str]:
    for mask in masks:
        lines = [mask.sub(_MASK, line) for line in lines]
    return lines


def _timing_note(expected: list[str], got: list[str], rtol: float, atol: float) -> str:
    """``"only times differ ..."`` when every differing line differs only in
    numbers followed by a time unit; else ``""``."""
    if len(expected) != len(got):
        return ""
    units: dict[str, None] = {}
    for a, b in zip(expected, got, strict=True):
        if a == b or _close(a, b, rtol, atol):
            continue
        if _TIMED.sub("#", a) != _TIMED.sub("#", b):
            return ""
        units.update(dict.fromkeys(m.group(1) for m in _TIMED.finditer(a)))
    if not units:
        return ""
    flags = " ".join(f"--ignore '[0-9.]+ ?{re.escape(u)}'" for u in units)
    return (
        f"only times differ (numbers followed by {', '.join(units)}): {flags} "
        f"leave{'s' if len(units) == 1 else ''} them out"
    )


def hidden_state(notebook: Any) -> tuple[str, ...]:
    """What the saved notebook's execution relied on that Restart & Run All would not give:
    names used before (or without) a definition in file order, and cells whose saved
    execution order differs from the file order.

    Args:
        notebook: A :class:`~labkit.promote.notebook.Notebook` as saved.

    Returns:
        One sentence per finding.
    """
    from labkit.promote.analysis import analyze
    from labkit.promote.checks import check

    code = [c for c in notebook.code_cells if c.source.strip()]
    ran = [c for c in code if c.execution_count is not None]
    out = []
    order = sorted(ran, key=lambda c: c.execution_count or 0)
    moved = [
        c.label
        for c, d in zip(order, sorted(ran, key=lambda c: c.number), strict=True)
        if c is not d
    ]
    if moved:
        out.append(
            f"the saved outputs come from running cells out of file order ({', '.join(moved)}"
            "): Restart & Run All runs them top to bottom"
        )
    in_file_order = dataclasses.replace(
        notebook,
        cells=tuple(
            dataclasses.replace(c, execution_count=i, outputs=())
            for i, c in enumerate(notebook.cells, 1)
        ),
    )
    for problem in check(analyze(in_file_order)):
        if (
            problem.severity == "error"
            and problem.name
            and ("before it is defined" in problem.message or "undefined name" in problem.message)
        ):
            cell = notebook.cells[problem.cell - 1] if problem.cell else None
            where = cell.label if cell is not None else "a cell"
            out.append(
                f"{where} uses {problem.name!r}, which no cell above it defines in file "
                "order (it came from the kernel's history: a deleted cell, a cell run "
                "later, or code typed by hand)"
            )
    return tuple(dict.fromkeys(out))


def _script_cells(script: Path) -> frozenset[int] | None:
    """The notebook cells the promoted script holds (its ``# %% cell N`` markers); None
    when it has no markers (then every cell counts)."""
    try:
        text = script.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = frozenset(int(n) for n in _CELL_MARK.findall(text))
    return found or None


def _magics_only(source: str) -> bool:
    """A cell promote drops whole: a non-Python cell magic (``%%bash``), or nothing but
    magics and shell escapes (what :func:`~labkit.promote.analysis.strip_magics` strips)."""
    from labkit.promote.analysis import strip_magics

    code, stripped, _, reason = strip_magics(source)
    if reason:
        return True
    rest = [x for x in (line.strip() for line in code.split("\n")) if x and x != "pass"]
    return bool(stripped) and all(x.startswith("#") for x in rest)


def _printed_lines(
    nb: Any, results_of: frozenset[int] = frozenset(), kept: frozenset[int] | None = None
) -> list[str]:
    """What the notebook's cells printed (stdout; the displayed result of ``results_of``
    cells too), in file order, without progress-bar lines. ``results_of`` and ``kept``
    number cells as the notebook before ``labkit run`` injected its parameters cell.

    A cell of magics and shell escapes only (``!pip install``, ``%%bash``) that the
    script leaves out (not in ``kept``) is not compared: no script can print what it
    printed. A left-out exploration cell still counts: what it printed (and the random
    numbers it drew) is where the script starts to differ. The lines ``%time``,
    ``%%time`` and ``%timeit`` print are left out too: the script drops the magic.
    """
    from labkit.promote.execute import INJECTED_TAG

    text = ""
    number = 0
    for cell in nb.cells:
        if INJECTED_TAG in cell.tags:
            continue
        number += 1
        if not cell.is_code or (
            kept is not None and number not in kept and _magics_only(cell.source)
        ):
            continue
        timed = _TIME_MAGIC.search(cell.source)
        for out in cell.outputs:
            kind = out.get("output_type")
            if kind == "stream" and out.get("name") == "stdout":
                part = out.get("text", "")
            elif kind == "execute_result" and number in results_of:
                part = (out.get("data") or {}).get("text/plain", "")
                part = ("".join(part) if isinstance(part, list) else str(part)) + "\n"
            else:
                continue
            part = "".join(part) if isinstance(part, list) else str(part)
            if timed:
                part = "".join(x for x in part.splitlines(keepends=True) if not _TIME_LINE.match(x))
            text += part
    return [line for line in text.splitlines() if not _PROGRESS.search(line)]


_RUNNER = r"""
import json, runpy, sys
script, record, folder = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path[0] = folder  # the notebook's folder (its copy) first, as in the notebook's kernel
writes = []


class _Tee:
    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename != script:
            frame = frame.f_back
        writes.append([frame.f_lineno if frame is not None else 0, text])
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


sys.stdout = _Tee(sys.stdout)
sys.argv = [script, *sys.argv[4:]]
try:
    runpy.run_path(script, run_name="__main__")
finally:
    sys.stdout.flush()
    with open(record, "w") as fh:
        json.dump(writes, fh)
"""


def _newest_run(folder: Path, since: float) -> Path | None:
    """The newest ``run.json`` under ``folder`` written since ``since`` (the fresh run's)."""
    found = []
    for path in folder.rglob("run.json"):
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        if mtime >= since - 1:
            found.append((mtime, path))
    return max(found)[1] if found else None


def _loss_lines(path: Path | None) -> list[str]:
    """``fit step N loss X`` for every recorded step of a run (none without a run)."""
    if path is None or not path.exists():
        return ["fit: no run record was written"]
    from labkit.train import Run

    return [f"fit step {i} loss {loss!r}" for i, loss in enumerate(Run.load(path).losses, 1)]


def _run_script(
    script: Path,
    cwd: Path,
    params: Mapping[str, Any],
    tmp: Path,
    timeout: float,
    extra: list[str] | None = None,
) -> tuple[list[str], list[int]]:
    """The script's printed lines and, for each, the script line that printed it."""
    from labkit.promote._process_group import GroupTimeout, run_in_group

    runner, record = tmp / "runner.py", tmp / "writes.json"
    runner.write_text(_RUNNER)
    path = str(script.resolve())
    cmd = [
        sys.executable,
        str(runner),
        path,
        str(record),
        str(cwd),
        *_options(params),
        *(extra or []),
    ]
    try:
        done = run_in_group(cmd, cwd=cwd, timeout=timeout)
    except GroupTimeout:
        raise VerifyTimeout(
            f"the script ran past the time limit of {timeout:g} s (--timeout); it and what "
            "it started were stopped"
        ) from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"{script}: the script failed (exit {done.returncode}):\n{tail}")
    writes = json.loads(record.read_text()) if record.exists() else []
    lines: list[str] = []
    where: list[int] = []
    current, first = "", 0
    for lineno, text in writes:
        for piece in re.split(r"(\n)", text):
            if piece == "\n":
                lines.append(current)
                where.append(first)
                current, first = "", 0
            elif piece:
                first = first or lineno
                current += piece
    if current:
        lines.append(current)
        where.append(first)
    kept = [(line, at) for line, at in zip(lines, where, strict=True) if not _PROGRESS.search(line)]
    return [line for line, _ in kept], [at for _, at in kept]


def _options(params: Mapping[str, Any]) -> list[str]:
    """``{"lr": 0.1, "shuffle": False}`` -> ``["--lr", "0.1", "--no-shuffle"]``."""
    out = []
    for name, value in params.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, str):
            out += [flag, value]
        elif isinstance(value, float) and not math.isfinite(value):
            out += [flag, str(value)]
        else:
            out += [flag, repr(value)]
    return out


def _statement_at(script: Path, lineno: int) -> str:
    """``cell 3 (In [3]), script line 41: print(loss)``: the cell header above the line."""
    if lineno <= 0:
        return ""
    lines = script.read_text(encoding="utf-8").splitlines()
    if lineno > len(lines):
        return ""
    cell = next(
        (
            lines[i].strip()[5:].split(":")[0]
            for i in range(lineno - 1, -1, -1)
            if lines[i].strip().startswith("# %% ")
        ),
        "",
    )
    text = lines[lineno - 1].strip()
    return f"{cell + ', ' if cell else ''}script line {lineno}: {text}"


def _close(a: str, b: str, rtol: float, atol: float) -> bool:
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    for x, y in zip(_NUMBER.findall(a), _NUMBER.findall(b), strict=True):
        fx, fy = float(x), float(y)
        if math.isnan(fx) and math.isnan(fy):
            continue
        if not abs(fx - fy) <= atol + rtol * abs(fy):
            return False
    return True


def _shown(text: str | None) -> str:
    return "(no line)" if text is None else repr(text)
