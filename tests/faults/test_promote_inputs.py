"""Fault table, promote and run from the command line: hostile notebook content and paths are
named (cell, file) with exit status 1, never a traceback (issue 26, item 2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from labkit._paths import OutputPathError
from labkit.cli import main
from labkit.promote import promote
from labkit.promote.notebook import MAX_NOTEBOOK_BYTES, NotebookError, read_notebook
from tests.promote._notebooks import code, numbered, write_notebook


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_a_lone_surrogate_in_a_cell_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = write_notebook(
        tmp_path / "s.ipynb", numbered("x = 1", "# note\ny = 'a\udcffb'\nprint(y)"), escaped=True
    )
    err = _cli(capsys, "promote", str(nb))
    assert "cell 2 (In [2]) line 2 holds a lone surrogate (U+DCFF)" in err
    assert not (tmp_path / "s.py").exists()


@pytest.mark.parametrize(
    "source",
    ["x = " + "+".join(["1"] * 100_000), "x = " + "-" * 200_000 + "1"],
    ids=["100k-term-sum", "200k-unary-minus"],
)
def test_code_too_deep_to_parse_is_named(
    source: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = write_notebook(tmp_path / "deep.ipynb", numbered("y = 2", source))
    err = _cli(capsys, "promote", str(nb))
    assert "cell 2 (In [2]): the code nests too deeply for Python's parser" in err


def test_a_long_expression_python_compiles_still_promotes(tmp_path: Path) -> None:
    """500 terms compile in a kernel; promote must not run out of recursion on them."""
    source = "x = " + "+".join(["1"] * 2000)
    nb = write_notebook(tmp_path / "long.ipynb", numbered(source, "print(x)"))
    done = promote(nb, dry_run=True)
    assert source in done.source


def test_a_notebook_over_the_limit_is_refused_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    huge = tmp_path / "huge.ipynb"
    with huge.open("wb") as fh:  # sparse: no disk used
        fh.truncate(MAX_NOTEBOOK_BYTES + 1)
    for command in ("promote", "run"):
        err = _cli(capsys, command, str(huge))
        assert f"{huge}: the notebook is 256.00 MiB ({MAX_NOTEBOOK_BYTES + 1} bytes)" in err
        assert "labkit reads notebooks up to 256.00 MiB" in err


def test_a_fifo_is_refused_without_hanging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = tmp_path / "pipe.ipynb"
    os.mkfifo(fifo)
    for command in ("promote", "run"):
        err = _cli(capsys, command, str(fifo))
        assert f"{fifo}: a FIFO (named pipe); labkit reads notebooks from regular files" in err
    with pytest.raises(NotebookError, match="a folder, not a notebook file"):
        read_notebook(tmp_path)


def test_a_300_character_script_name_is_an_output_path_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = write_notebook(tmp_path / "n.ipynb", numbered("x = 1"))
    long = tmp_path / ("a" * 300 + ".py")
    err = _cli(capsys, "promote", str(nb), "-o", str(long))
    assert "labkit promote: error:" in err and "a" * 30 in err
    with pytest.raises(OutputPathError, match="aaaa"):
        promote(nb, long)
    assert list(tmp_path.iterdir()) == [nb]


def test_crlf_and_lone_cr_line_ends_read_as_python_reads_them(tmp_path: Path) -> None:
    """``\\r`` ends a line for Python: the script holds the same statements as with ``\\n``."""
    lf = write_notebook(tmp_path / "lf.ipynb", [code("a = 1\nb = a + 1  # c\nc = b", 1)])
    cr = write_notebook(tmp_path / "cr.ipynb", [code("a = 1\r\nb = a + 1  # c\rc = b", 1)])
    one, two = promote(lf, dry_run=True).source, promote(cr, dry_run=True).source
    assert one.replace("lf.", "cr.") == two
