"""The ``labkit`` command line: help, version, unknown subcommands."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labkit.cli import COMMANDS, build_parser, main

LABKIT = Path(sys.executable).parent / "labkit"


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LABKIT), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_console_script_help():
    proc = run("--help")
    assert proc.returncode == 0, proc.stderr
    for name in COMMANDS:
        assert name in proc.stdout


def test_console_script_unknown_subcommand_exits_2_with_usage():
    proc = run("bogus")
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: labkit")
    assert "invalid choice: 'bogus'" in proc.stderr


def test_no_command_prints_usage_and_exits_2(capsys: pytest.CaptureFixture[str]):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: labkit")
    assert "choose a command" in err


@pytest.mark.parametrize("argv", [["version"], ["--version"]])
def test_version(argv: list[str], capsys: pytest.CaptureFixture[str]):
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's --version action exits
        code = exc.code
    assert code == 0
    assert capsys.readouterr().out.strip() == "labkit 0.1.0"


def test_every_command_has_help():
    parser = build_parser()
    text = parser.format_help()
    for name, (help_text, _, _) in COMMANDS.items():
        assert name in text
        assert help_text in text
