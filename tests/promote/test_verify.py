"""``labkit promote --verify`` on a Lab notebook: the fit's per-step losses (from each run's
record) are compared after the printed lines; comparison rules on plain lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from labkit.cli import main
from labkit.promote.verification import compare_lines
from tests.faults.test_promote_names import LAB_CELLS
from tests.promote._notebooks import numbered, write_notebook


@pytest.mark.slow
def test_a_lab_notebook_verifies_on_its_fit_losses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cells = [*LAB_CELLS, "print(f'last loss {run.losses[-1]:.6f}')"]
    cells[0] = "import torch\ntorch.manual_seed(0)\nimport labkit\nfrom torch import nn"
    nb = write_notebook(tmp_path / "lab.ipynb", numbered(*cells))
    assert main(["promote", str(nb), "--verify", "-q"]) == 0
    out = capsys.readouterr().out
    assert "verify: identical (3 lines)" in out  # the print, then 2 steps (8 rows, batch 4)


def test_numbers_within_the_tolerance_and_text_around_them() -> None:
    assert compare_lines(["a 1.0 b 2"], ["a 1.0 b 2"]).summary() == "identical (1 lines)"
    close = compare_lines(["loss 0.30000001", "x"], ["loss 0.3", "x"])
    assert close.outcome == "within tolerance" and close.close == 1
    assert (
        close.summary()
        == "equal within rtol=1e-05, atol=1e-08 (2 lines, 1 differ in the last digits)"
    )
    assert compare_lines(["loss 0.3"], ["lost 0.3"]).outcome == "different"  # the text differs
    far = compare_lines(["loss 0.3"], ["loss 0.31"], rtol=1e-3)
    assert far.difference is not None and far.difference.line == 1
    short = compare_lines(["a", "b"], ["a"])
    assert short.difference is not None and short.difference.script is None
    assert "script:   (no line)" in str(short.difference)
    assert compare_lines(["x nan"], ["x nan"]).outcome == "identical"


def test_reprs() -> None:
    from labkit.promote.report import Report

    assert repr(compare_lines(["a"], ["a"])) == "Verification('identical (1 lines)', hidden=0)"
    assert repr(Report()) == "Report(dropped=0, skipped=0, printed=0)"


def test_only_the_cells_the_script_holds_count_and_time_magic_lines_do_not(
    tmp_path: Path,
) -> None:
    """A lecture notebook: a cell of shell escapes only (left out of the script) printed
    'hello'; a %%time cell printed CPU/Wall times before the script's own print. Found on a
    notebook nobody here wrote: verify called them 'different' at line 1. A left-out
    exploration cell still counts (where its random draws make the script differ)."""
    import nbformat

    from labkit.promote import read_notebook
    from labkit.promote.verification import _printed_lines, _script_cells

    def stdout(text: str) -> dict:
        return nbformat.v4.new_output("stream", name="stdout", text=text)

    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_code_cell("!echo hello", outputs=[stdout("hello\n")]),
        nbformat.v4.new_code_cell(
            "%%time\nprint('trained')",
            outputs=[
                stdout("trained\nCPU times: user 3 ms, sys: 0 ns, total: 3 ms\nWall time: 3.1 ms\n")
            ],
        ),
        nbformat.v4.new_code_cell(
            "%timeit x = 1\nprint('done')",
            outputs=[
                stdout(
                    "24.1 ns ± 0.3 ns per loop "
                    "(mean ± std. dev. of 7 runs, 10,000,000 loops each)\n"
                    "done\n"
                )
            ],
        ),
        nbformat.v4.new_code_cell("print('a sample')", outputs=[stdout("a sample\n")]),
    ]
    path = tmp_path / "lecture.ipynb"
    nbformat.write(nb, path)
    script = tmp_path / "lecture.py"
    script.write_text(
        "def main():\n    # %% cell 1 (In [1])\n    import torch\n"
        "    # %% cell 3 (In [3])\n    print('trained')\n"
        "    # %% cell 4 (In [4])\n    print('done')\n"
    )
    kept = _script_cells(script)
    assert kept == frozenset({1, 3, 4})
    assert _printed_lines(read_notebook(path), kept=kept) == ["trained", "done", "a sample"]
    # without markers (a script written by hand) every cell counts
    assert _printed_lines(read_notebook(path), kept=None)[0] == "hello"
