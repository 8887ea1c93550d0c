"""``labkit promote`` and ``labkit run``: argument parsers and runners for :mod:`labkit.cli`."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labkit.promote.pipeline import Promoted

__all__ = [
    "add_parameter_argument",
    "add_promote_arguments",
    "add_run_arguments",
    "parameters_of",
    "promote_command",
    "run_command",
]

PROMOTE_HELP = "turn an exploration notebook into a standalone training script"
RUN_HELP = "execute a notebook headlessly with parameters (-p name=value)"


def add_parameter_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """``-p/--parameter NAME=VALUE``, repeatable: a value for the notebook's cell tagged
    'parameters' (``labkit run`` and ``labkit promote --verify``); read with
    :func:`parameters_of`."""
    parser.add_argument(
        "-p", "--parameter", action="append", default=[], metavar="NAME=VALUE", help=help
    )


def parameters_of(args: argparse.Namespace) -> dict[str, object]:
    """The ``-p NAME=VALUE`` values as ``{name: value}`` (VALUE a Python literal, else a string).

    Raises:
        ParameterError: A ``-p`` value is not ``NAME=VALUE`` or NAME is not an identifier.
    """
    from labkit.promote.execute import parse_parameter

    return dict(parse_parameter(p) for p in args.parameter)


def add_promote_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="the .ipynb file")
    parser.add_argument("-o", "--output", help="script path (default: NOTEBOOK with .py)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing script")
    parser.add_argument(
        "--check",
        action="store_true",
        help="run the script in a subprocess before writing it (one batch when it trains "
        "with lab.fit, else the whole script); it says what it ran",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="check and print the script; write nothing"
    )
    parser.add_argument(
        "--fabric",
        action="store_true",
        help="put a plain PyTorch loop on Lightning Fabric (--devices N --strategy ddp)",
    )
    parser.add_argument(
        "--show-results",
        action="store_true",
        help="print each cell's displayed result (its last expression) in the script",
    )
    parser.add_argument(
        "--show-result",
        action="append",
        default=[],
        metavar="EXPR",
        help="print only this displayed result, as written in the cell (e.g. dev_loss; repeatable)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="do not list what the script leaves out"
    )
    parser.add_argument(
        "--verify",
        action="store_true",
        help="after writing, run the notebook fresh (Restart & Run All) and the script with "
        "the same -p values, and compare what they print line by line",
    )
    add_parameter_argument(
        parser,
        "with --verify: a value for the cell tagged 'parameters' (repeatable), given "
        "to the notebook (as labkit run -p) and to the script (as --name VALUE)",
    )
    parser.add_argument(
        "--rtol", type=float, default=1e-5, help="with --verify: relative tolerance (1e-5)"
    )
    parser.add_argument(
        "--atol", type=float, default=1e-8, help="with --verify: absolute tolerance (1e-8)"
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="with --verify: seconds per notebook cell, and for the whole script (600)",
    )
    parser.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="REGEX",
        help="with --verify: mask what REGEX matches in both outputs before comparing "
        "(repeatable; e.g. --ignore '[0-9.]+ ?ms' for printed times)",
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", help="the .ipynb file")
    add_parameter_argument(
        parser,
        "set a name of the cell tagged 'parameters' (repeatable); VALUE is a Python "
        "literal, else a string",
    )
    parser.add_argument(
        "-o", "--output", help="executed copy (default: NOTEBOOK.run.ipynb, replaced)"
    )
    parser.add_argument("--force", action="store_true", help="replace an existing -o file")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per cell (600)")
    parser.add_argument("--kernel", help="kernel name (default: the notebook's)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-cell progress")


def promote_command(args: argparse.Namespace) -> int:
    from labkit._paths import OutputPathError
    from labkit.promote import NotebookError, PromoteError, TargetExistsError, promote
    from labkit.promote.execute import ParameterError
    from labkit.promote.pipeline import check_script_path

    if args.verify and args.dry_run:
        print(
            "labkit promote: error: --verify runs the written script; drop --dry-run",
            file=sys.stderr,
        )
        return 2
    for pattern in args.ignore:
        try:
            re.compile(pattern)
        except re.error as exc:
            print(
                f"labkit promote: error: --ignore {pattern!r} is not a regular expression ({exc})",
                file=sys.stderr,
            )
            return 2
    try:
        parameters = parameters_of(args)
        if args.output is not None and not args.dry_run:  # before reading the notebook
            check_script_path(
                Path(args.output), Path(args.notebook), force=args.force, what="script (-o)"
            )
        result = promote(
            args.notebook,
            args.output,
            force=args.force,
            check_run=args.check,
            dry_run=args.dry_run,
            fabric=args.fabric,
            show_results=args.show_results or args.show_result,
        )
    except PromoteError as exc:
        for problem in exc.problems:
            print(f"labkit promote: {problem}", file=sys.stderr)
        print(f"labkit promote: {args.notebook}: nothing written", file=sys.stderr)
        return 1
    except (
        NotebookError,
        TargetExistsError,
        FileNotFoundError,
        OutputPathError,
        ParameterError,
    ) as exc:
        print(f"labkit promote: error: {exc}", file=sys.stderr)
        return 1
    for line in result.warnings:
        print(f"labkit promote: warning: {line}", file=sys.stderr)
    if not args.quiet:
        for line in result.report.lines():
            print(f"labkit promote: {line}", file=sys.stderr)
    if args.dry_run:
        sys.stdout.write(result.source)
    else:
        checked = f" ({result.checked})" if args.check and result.checked else ""
        print(f"wrote {shown(result.script)}{checked}")
    if args.verify:
        return _verify(args, result, parameters)
    return 0


def _verify(args: argparse.Namespace, result: Promoted, parameters: dict[str, object]) -> int:
    """``--verify``: run both, print the outcome; 1 when they differ or one fails."""
    from labkit.promote import NotebookRunError
    from labkit.promote.verification import verify

    printed = frozenset(d.number for d in result.report.printed)
    if result.script is None:  # a dry run wrote no script
        print("labkit promote: verify: no script was written (drop --dry-run)", file=sys.stderr)
        return 1
    try:
        found = verify(
            result.notebook,
            result.script,
            parameters=parameters,
            timeout=args.timeout,
            rtol=args.rtol,
            atol=args.atol,
            results_of=printed,
            fit=result.analysis is not None and result.analysis.fit is not None,
            ignore=args.ignore,
        )
    except NotebookRunError as exc:
        print(
            f"labkit promote: verify: the notebook fails under Restart & Run All: {exc}",
            file=sys.stderr,
        )
        from labkit.promote import read_notebook
        from labkit.promote.verification import hidden_state

        for line in hidden_state(read_notebook(result.notebook)):
            print(f"labkit promote: verify: hidden state: {line}", file=sys.stderr)
        return 1
    except (RuntimeError, OSError) as exc:
        print(f"labkit promote: verify: {exc}", file=sys.stderr)
        return 1
    for line in found.lines_of_report():
        print(line)
    return 0 if found.ok else 1


def run_command(args: argparse.Namespace) -> int:
    from labkit._paths import OutputPathError
    from labkit.promote import NotebookError, NotebookRunError, ParameterError, run_notebook
    from labkit.promote.execute import _stderr_progress

    try:
        parameters = parameters_of(args)
        out = run_notebook(
            args.notebook,
            parameters,
            args.output,
            timeout=args.timeout,
            kernel_name=args.kernel,
            progress=None if args.quiet else _stderr_progress,
            force=args.force,
        )
    except (NotebookError, ParameterError, NotebookRunError, OutputPathError) as exc:
        print(f"labkit run: error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {shown(out)}")
    return 0


def shown(path: object) -> str:
    """A path for the terminal: a name with undecodable bytes (``\\udcff``) is shown
    escaped instead of failing to print."""
    return str(path).encode("utf-8", "backslashreplace").decode("utf-8")
