"""``promote``: notebook in, checked script out (the function behind ``labkit promote``)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit._paths import OutputPathError, check_output_file
from labkit.promote._literal import literal
from labkit.promote.analysis import Analysis, analyze
from labkit.promote.checks import check, kept_statements
from labkit.promote.errors import Problem, PromoteError
from labkit.promote.notebook import read_notebook
from labkit.promote.plain import render_plain_script
from labkit.promote.recipe_record import recorded_recipe
from labkit.promote.report import Report, promotion_report
from labkit.promote.script import render_script
from labkit.promote.write import TargetExistsError, install, temporary_sibling

__all__ = ["Promoted", "promote"]


@dataclass(frozen=True)
class Promoted:
    """What :func:`promote` wrote.

    Args:
        notebook: The notebook read.
        script: The script written (``None`` with ``dry_run``).
        source: The script's text.
        problems: The warnings (promote raises on errors).
        analysis: The cell-by-cell analysis.
        report: What the script leaves out, by cell and line, grouped by reason.
        checked: What ``check_run`` ran (``""`` without it).
    """

    notebook: Path
    script: Path | None
    source: str = field(repr=False)
    problems: tuple[Problem, ...] = ()
    analysis: Analysis | None = field(default=None, repr=False, compare=False)
    report: Report = field(default_factory=Report, repr=False, compare=False)
    checked: str = ""

    @property
    def warnings(self) -> tuple[str, ...]:
        """The warning messages."""
        return tuple(p.message for p in self.problems if p.severity == "warning")

    def __repr__(self) -> str:
        return (
            f"Promoted({str(self.notebook)!r} -> {str(self.script)!r}, "
            f"warnings={len(self.warnings)})"
        )


def default_output(notebook: str | os.PathLike[str]) -> Path:
    """``train.ipynb`` -> ``train.py`` next to it."""
    return Path(notebook).with_suffix(".py")


def promote(
    notebook: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    check_run: bool = False,
    dry_run: bool = False,
    check_timeout: float = 300,
    fabric: bool = False,
    show_results: bool | Collection[str] = False,
) -> Promoted:
    """Promote ``notebook`` to a standalone script.

    A notebook that trains with ``lab.fit`` gets ``main()`` with labkit's fit options
    (``--max-epochs``, ``--devices``, ...); any other notebook (a plain PyTorch loop) gets
    ``main()`` with its ``parameters`` cell's values as options.

    Nothing of the notebook runs, unless ``check_run``: then the script runs once in a
    subprocess (for one batch when it trains with ``lab.fit``) before it takes its name.

    Args:
        notebook: The ``.ipynb`` file.
        output: The script path (default: the notebook's name with ``.py``).
        force: Overwrite an existing script.
        check_run: Run the script in a subprocess (``--max-epochs 1 --limit-batches 1``
            when it trains with ``lab.fit``, else as written); write it only if that succeeds.
        dry_run: Check and render, write nothing.
        check_timeout: Seconds the check run may take.
        fabric: Put a plain PyTorch loop on Lightning Fabric (``labkit promote --fabric``,
            see :mod:`labkit.promote.fabric`); refused for a notebook that uses ``lab.fit``.
        show_results: Print each cell's displayed result (its last expression) in the
            script: ``True`` for all, or the expressions to print as written (``{"loss"}``).

    Returns:
        A :class:`Promoted`.

    Raises:
        labkit.promote.NotebookError: the file is not a readable notebook.
        PromoteError: a static check failed (every error is listed), or the check run did.
        TargetExistsError: the output exists and ``force`` is false.
        labkit._paths.OutputPathError: the output is a folder, its name is too long, or its
            folder is missing or not writable (checked before the notebook is analyzed).

    Example:
        >>> promote("train.ipynb", "train.py").warnings          # doctest: +SKIP
        ('cell 5 was never run; it is left out',)
    """
    nb = read_notebook(notebook)
    _refuse_failed_run(nb.path, nb.metadata)
    out = Path(output) if output is not None else default_output(nb.path)
    if out.resolve() == nb.path.resolve():
        raise PromoteError(out, [Problem("error", f"{out}: the output would replace the notebook")])
    if not dry_run:
        check_script_path(out, nb.path, force=force)
    analysis = analyze(nb, show_results=show_results)
    kept = kept_statements(analysis)  # once: the check, the report and the script read it
    problems = check(analysis, kept=kept)
    if any(p.severity == "error" for p in problems):
        raise PromoteError(nb.path, problems)
    recorded = recorded_recipe(p.cell for p in analysis.plans)
    recipe, recipe_cell = recorded if recorded else (None, None)
    if recipe is not None and recipe_cell is not None:
        try:
            literal(recipe)
        except ValueError as exc:
            msg = (
                f"{recipe_cell.label}: the recorded Recipe holds a value that is not a plain "
                f"literal ({exc}); record it again (run the cell) or clear that output"
            )
            raise PromoteError(nb.path, [Problem("error", msg, recipe_cell.number)]) from None
    if fabric and analysis.fit is not None:
        msg = (
            f"--fabric rewrites plain PyTorch loops; {analysis.fit.cell.label} trains with "
            f"{analysis.lab_name}.fit, whose script scales already (--devices, --strategy)"
        )
        raise PromoteError(nb.path, [Problem("error", msg, analysis.fit.cell.number)])
    report = promotion_report(analysis, kept=kept)
    if analysis.fit is None:  # no lab.fit: a plain loop, data preparation, ...
        source, more = render_plain_script(
            analysis, script_name=out.name, fabric=fabric, notes=report.summary(), kept=kept
        )
        problems = [*problems, *more]
        if any(p.severity == "error" for p in more):
            raise PromoteError(nb.path, problems)
    else:
        source = render_script(
            analysis,
            script_name=out.name,
            recipe=recipe,
            recipe_source=recipe_cell.label if recipe_cell else "",
            notes=report.summary(),
            kept=kept,
        )
    warnings = tuple(p for p in problems if p.severity == "warning")
    if dry_run:
        return Promoted(nb.path, None, source, warnings, analysis, report)
    if not out.parent.is_dir():
        raise FileNotFoundError(f"{out}: folder {out.parent} does not exist")
    checked = ""
    with temporary_sibling(out, source, mode=0o755) as tmp:
        if check_run:
            checked = _check_run(tmp, nb.path, check_timeout, trains=analysis.fit is not None)
        install(tmp, out, force=force)
    return Promoted(nb.path, out, source, warnings, analysis, report, checked)


def _refuse_failed_run(path: Path, metadata: dict[str, Any]) -> None:
    """A copy written by a failed ``labkit run`` holds cells that never ran: refuse it."""
    labkit_meta = metadata.get("labkit")
    record = labkit_meta.get("run") if isinstance(labkit_meta, dict) else None
    if not isinstance(record, dict) or record.get("status") != "failed":
        return
    cell = record.get("cell")
    error = str(record.get("error") or "a cell failed")
    msg = (
        f"{path.name} is the copy of a `labkit run` that failed ({error}); the cells after "
        "it never ran. Fix the notebook and run it again, or promote the notebook itself"
    )
    raise PromoteError(path, [Problem("error", msg, cell if isinstance(cell, int) else None)])


def check_script_path(out: Path, notebook: Path, *, force: bool, what: str = "script") -> None:
    """Before any work: the script's path can be written (a file name, not a folder, in a
    writable folder, not too long), and it exists only with ``force``."""
    try:
        check_output_file(out, force=True, what=what, file_name=f"{notebook.stem}.py")
        exists = out.exists()
    except OutputPathError:
        raise
    except (OSError, ValueError) as exc:  # e.g. a name over the filesystem's limit
        reason = getattr(exc, "strerror", None) or str(exc)
        raise OutputPathError(f"cannot write the {what} {out}: {reason}", out) from None
    if exists and not force:
        raise TargetExistsError(f"{out} exists; pass --force (force=True) to overwrite it")


def _check_run(script: Path, notebook: Path, timeout: float, *, trains: bool) -> str:
    """Run ``script`` in a subprocess, in the notebook's folder: for one batch when it
    trains with ``lab.fit``, else as it is. Returns what it ran, in words."""
    with tempfile.TemporaryDirectory(prefix="labkit-check-") as logdir:
        cmd = [sys.executable, str(script.resolve())]
        if trains:
            cmd += ["--max-epochs", "1", "--limit-batches", "1", "--logdir", logdir]
        env = dict(os.environ)
        try:
            done = subprocess.run(
                cmd,
                cwd=notebook.parent,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise PromoteError(
                notebook,
                [Problem("error", f"--check: the script ran past {timeout:.0f} s")],
            ) from None
        if done.returncode == 0:
            if trains:
                return "checked: trained one batch (--max-epochs 1 --limit-batches 1)"
            return "checked: ran the whole script as written, every kept cell"
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise PromoteError(
            notebook,
            [
                Problem(
                    "error",
                    f"--check: the promoted script failed (exit {done.returncode})"
                    f"{' on one batch' if trains else ''}; nothing written. Its last "
                    f"output:\n{tail}",
                )
            ],
        )
