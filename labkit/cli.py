"""The ``labkit`` command line.

Subcommands are small functions registered in :data:`COMMANDS`; each gets its
own parser. Later subcommands (``promote``, ``run``) register the same way.

Example:
    $ labkit doctor
    $ labkit version
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import metadata

from labkit.promote import cli as _promote_cli

__all__ = ["build_parser", "main"]


def _version(args: argparse.Namespace) -> int:
    print(f"labkit {_labkit_version()}")
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from labkit import doctor

    checks = doctor.check()
    print(doctor.to_json(checks) if args.json else doctor.render(checks))
    return doctor.exit_code(checks)


def _add_doctor(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the report as JSON")


# name -> (help, add arguments, run)
COMMANDS: dict[
    str,
    tuple[
        str,
        Callable[[argparse.ArgumentParser], None] | None,
        Callable[[argparse.Namespace], int],
    ],
] = {
    "doctor": (
        "check libraries, devices, widget assets and Jupyter extensions",
        _add_doctor,
        _doctor,
    ),
    "version": ("print labkit's version", None, _version),
    "promote": (
        _promote_cli.PROMOTE_HELP,
        _promote_cli.add_promote_arguments,
        _promote_cli.promote_command,
    ),
    "run": (_promote_cli.RUN_HELP, _promote_cli.add_run_arguments, _promote_cli.run_command),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one subparser per entry of :data:`COMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="labkit",
        description="labkit: see, measure and train PyTorch models from a notebook.",
    )
    parser.add_argument("--version", action="version", version=f"labkit {_labkit_version()}")
    sub = parser.add_subparsers(dest="command", metavar="command")
    for name, (help_text, add_arguments, run) in COMMANDS.items():
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if add_arguments is not None:
            add_arguments(cmd)
        cmd.set_defaults(run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``labkit`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        print("labkit: error: choose a command (see labkit --help)", file=sys.stderr)
        return 2
    return args.run(args)


def _labkit_version() -> str:
    try:
        return metadata.version("labkit")
    except metadata.PackageNotFoundError:
        return "unknown (labkit is not installed; run make lab)"


if __name__ == "__main__":
    sys.exit(main())
