"""Bad input: clear errors naming the cell, the name and the file, and nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.cli import main
from labkit.promote import (
    NotebookError,
    Problem,
    PromoteError,
    TargetExistsError,
    analyze,
    check,
    promote,
    read_notebook,
)
from tests.promote._notebooks import code, numbered, write_notebook
from tests.promote.test_analyze import FIT, HEAD, LAB, MODEL


def _errors(nb: Path) -> list[str]:
    with pytest.raises(PromoteError) as info:
        promote(nb, nb.with_suffix(".py"))
    assert not nb.with_suffix(".py").exists()
    assert not list(nb.parent.glob(".*.tmp"))
    return [p.message for p in info.value.errors]


@pytest.mark.parametrize(
    "text",
    ["{not json", '{"cells": []}', '{"cells": "x", "nbformat": 4, "nbformat_minor": 5}', ""],
)
def test_malformed_ipynb(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]):
    nb = tmp_path / "bad.ipynb"
    nb.write_text(text)
    with pytest.raises(NotebookError, match=r"bad\.ipynb: not a"):
        promote(nb)
    assert main(["promote", str(nb)]) == 1
    assert "bad.ipynb: not a" in capsys.readouterr().err
    assert not (tmp_path / "bad.py").exists()


def test_missing_file(tmp_path: Path):
    with pytest.raises(NotebookError, match="no such notebook file"):
        promote(tmp_path / "nope.ipynb")


def test_plain_loop_needs_no_training_call(tmp_path: Path):
    # a plain PyTorch loop: promoted as it is, with main()
    loop = (
        "opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "for (xb,) in data:\n    loss = model(xb).pow(2).mean()\n    loss.backward()\n"
        "    opt.step()\n    opt.zero_grad()"
    )
    nb = write_notebook(tmp_path / "loop.ipynb", numbered(HEAD, MODEL, loop))
    assert check(analyze(read_notebook(nb))) == []
    source = promote(nb, dry_run=True).source
    assert "def main(argv" in source and "    for (xb,) in data:" in source


def test_out_of_order_dependency(tmp_path: Path):
    # cell 2 ran first (In [1]) and reads n, which cell 3 defines but ran later (In [3])
    nb = write_notebook(
        tmp_path / "nb.ipynb",
        [
            code(HEAD, 2),
            code("k = n + 1", 1),
            code("n = 4\n" + MODEL, 3),
            code(LAB, 4),
            code(FIT, 5),
        ],
    )
    (message,) = _errors(nb)
    assert message.startswith("cell 2 (In [1]) line 1 uses 'n' before it is defined")
    assert "cell 3 (In [3])" in message


def test_name_defined_only_in_a_dropped_cell(tmp_path: Path):
    nb = write_notebook(
        tmp_path / "nb.ipynb",
        numbered(
            HEAD, MODEL, "scale = 2", "model.weight.data *= scale", LAB, FIT, tags={3: ("explore",)}
        ),
    )
    (message,) = _errors(nb)
    assert "cell 4 (In [4]) line 1 uses 'scale'" in message
    assert "defined only in cell 3 (In [3])" in message and "tagged explore" in message
    assert "tag cell 3 'keep'" in message


def test_undefined_name_and_never_run_and_syntax(tmp_path: Path):
    nb = write_notebook(
        tmp_path / "nb.ipynb",
        [
            *numbered(HEAD, MODEL, "w = width * 2", "def f():\n    return helper()", LAB, FIT),
            code("helper = print", None),
            code("x = (", 7),
        ],
    )
    messages = _errors(nb)
    assert any("cell 3 (In [3]) line 1 uses undefined name 'width'" in m for m in messages)
    assert any("'helper', which is defined only in cell 7, never run" in m for m in messages)
    assert any("cell 8 (In [7]): syntax error on line 1" in m for m in messages)


def test_ipython_only_names(tmp_path: Path):
    nb = write_notebook(
        tmp_path / "nb.ipynb", numbered(HEAD, MODEL, "shell = get_ipython()", LAB, FIT)
    )
    (message,) = _errors(nb)
    assert "'get_ipython', which only exists inside IPython" in message


def test_existing_output_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    nb = write_notebook(tmp_path / "nb.ipynb", numbered(HEAD, MODEL, LAB, FIT))
    out = tmp_path / "nb.py"
    out.write_text("# mine\n")
    with pytest.raises(TargetExistsError, match=r"nb\.py exists; pass --force"):
        promote(nb)
    assert out.read_text() == "# mine\n"
    assert main(["promote", str(nb)]) == 1
    assert "pass --force" in capsys.readouterr().err
    assert main(["promote", str(nb), "--force"]) == 0
    assert out.read_text().startswith("#!/usr/bin/env python")
    assert (out.stat().st_mode & 0o777) == 0o755


def test_cli_prints_every_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    nb = write_notebook(tmp_path / "nb.ipynb", numbered(HEAD, "m = a + b"))
    assert main(["promote", str(nb)]) == 1
    err = capsys.readouterr().err
    assert "undefined name 'a'" in err and "undefined name 'b'" in err
    assert "nothing written" in err


def test_problem_repr_and_validation():
    p = Problem("error", "cell 2 uses undefined name 'x'", cell=2, name="x")
    assert repr(p) == "Problem(error, cell=2, name='x', \"cell 2 uses undefined name 'x'\")"
    assert str(p) == "error: cell 2 uses undefined name 'x'"
    with pytest.raises(ValueError, match="severity"):
        Problem("fatal", "x")
