"""Lecture-style notebooks promoted and proved with ``--verify`` (issue 29): the notebook runs
fresh in a kernel, the script with the same ``-p`` values, and their prints are compared."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labkit.cli import main
from labkit.promote import read_notebook
from labkit.promote.verification import hidden_state
from tests.promote._notebooks import code, write_notebook
from tests.realworld.notebooks.lectures import MAKEMORE, notebook, write_notebooks

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lectures(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_notebooks(tmp_path_factory.mktemp("lectures"))


def _promote(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["promote", "--force", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_makemore_script_prints_what_the_notebook_prints(
    lectures: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    nb = lectures["makemore_mlp.ipynb"]
    status, out, err = _promote(capsys, str(nb), "--verify", "--show-results", "-p", "max_steps=40")
    assert status == 0, out + err
    # vocab size, word count, shapes, parameter count; 2 loss lines and the loss of each
    # training call, the sample between them; the dev loss
    assert "verify: identical (12 lines)" in out
    script = nb.with_suffix(".py").read_text()
    assert "torch.multinomial(probs, num_samples=1, generator=g)" in script  # the sample: kept
    assert "plt." not in script and "matplotlib" not in script
    assert "labkit promote:   plot call (4)" in err
    assert "print(dev_loss)" in script
    ast.parse(script)


def test_a_sample_left_out_makes_the_losses_diverge_and_verify_names_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's failure, made on purpose: the sample cell tagged 'explore' is left out
    with its random draws; verify names the first line the script does not print alike."""
    cells = [(k, s, "explore") if "sample one name" in s else (k, s, *r) for k, s, *r in MAKEMORE]
    path = tmp_path / "makemore_sample_dropped.ipynb"
    path.write_text(__import__("nbformat").writes(notebook(cells)))
    status, out, _ = _promote(capsys, str(path), "--verify", "-q")
    assert status == 1
    assert "verify: different: line 5 differs (printed by cell 9, script line" in out
    assert "print(f'{i:7d}/{steps:7d}: {loss.item():.4f}')" in out
    notebook_line = out.split("notebook: ")[1].splitlines()[0]
    assert "/" not in notebook_line  # the notebook printed the sample there


def test_an_unseeded_notebook_is_reported_different_at_its_first_line(
    lectures: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = _promote(capsys, str(lectures["makemore_unseeded.ipynb"]), "--verify", "-q")
    assert status == 1
    assert "verify: different: line " in out and "\n  notebook: " in out and "\n  script:   " in out


def test_a_pasted_train_py_loop_verifies(
    lectures: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    nb = lectures["train_py_bigram.ipynb"]
    status, out, err = _promote(capsys, str(nb), "--verify", "-p", "max_iters=20", "-q")
    assert status == 0, out + err
    assert "verify: identical (3 lines)" in out  # steps 0 and 10, then the generated text
    status, out, err = _promote(capsys, str(nb), "--verify", "--show-results", "-q")
    assert status == 0 and "verify: identical (9 lines)" in out, out + err  # + model, loss


def test_hidden_state_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # saved after running cell 3 before cell 2; a name from a deleted cell
    cells = [code("a = 1", 1), code("b = a + 1\nprint(b)", 3), code("c = 5\nprint(c)", 2)]
    nb = write_notebook(tmp_path / "h.ipynb", cells)
    status, out, _ = _promote(capsys, str(nb), "--verify", "-q")
    # the script follows the saved execution (prints 5, 2), Restart & Run All the file (2, 5)
    assert status == 1 and "verify: different: line 1 differs" in out
    assert "  notebook: '2'\n  script:   '5'" in out
    assert "verify: hidden state: the saved outputs come from running cells out of file " in out
    gone = write_notebook(
        tmp_path / "gone.ipynb", [code("import math", 1), code("y = math.sqrt(x)", 3)]
    )
    found = hidden_state(read_notebook(gone))
    assert found == (
        "cell 2 (In [3]) uses 'x', which no cell above it defines in file order "
        "(it came from the kernel's history: a deleted cell, a cell run later, or "
        "code typed by hand)",
    )
