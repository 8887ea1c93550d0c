"""``labkit run``: parameters checked against the parameters cell, injected after it,
executed in a real kernel (nbclient); a failing cell is named and its copy kept."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from labkit.cli import main
from labkit.promote import NotebookRunError, ParameterError, read_notebook, run_notebook
from labkit.promote.execute import INJECTED_TAG, inject_parameters, parse_parameter
from tests.promote._notebooks import code, markdown, write_notebook


def _nb(tmp_path: Path, *extra: str) -> Path:
    cells = [
        markdown("# run me"),
        code("epochs = 2\nlr = 0.1\nname = 'a'\nflag = False\nopt = None", tags=("parameters",)),
        code("result = f'{name}:{epochs}:{lr}:{flag}:{opt}'\nprint(result)"),
        *(code(e) for e in extra),
    ]
    return write_notebook(tmp_path / "p.ipynb", cells)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("epochs=3", ("epochs", 3)),
        ("lr=1e-3", ("lr", 0.001)),
        ("name=run-b", ("name", "run-b")),
        ("flag=True", ("flag", True)),
        ("xs=[1, 2]", ("xs", [1, 2])),
        ("s= x ", ("s", " x ")),
    ],
)
def test_parse_parameter(text: str, expected: tuple):
    assert parse_parameter(text) == expected


@pytest.mark.parametrize("text", ["epochs", "=3", "2x=1"])
def test_parse_parameter_errors(text: str):
    with pytest.raises(ParameterError, match="name=value"):
        parse_parameter(text)


def test_injection_checks_names_and_types(tmp_path: Path):
    path = _nb(tmp_path)
    nb = nbformat.read(path, as_version=4)
    assert inject_parameters(nb, {"epochs": 3, "lr": 1, "name": 7, "opt": "x"}, path=path) == 2
    assert nb.cells[2].source.splitlines()[1:] == [
        "epochs = 3",
        "lr = 1.0",
        "name = '7'",
        "opt = 'x'",
    ]
    assert nb.cells[2].metadata["tags"] == [INJECTED_TAG]
    # injecting again replaces the old injected cell
    inject_parameters(nb, {"epochs": 4}, path=path)
    assert sum(INJECTED_TAG in c.metadata.get("tags", []) for c in nb.cells) == 1
    with pytest.raises(
        ParameterError, match=r"'batch' is not set in the parameters cell \(cell 2\)"
    ):
        inject_parameters(nb, {"batch": 3}, path=path)
    with pytest.raises(ParameterError, match=r"epochs='many'.*sets epochs = 2 \(int\)"):
        inject_parameters(nb, {"epochs": "many"}, path=path)
    with pytest.raises(ParameterError, match="flag=1"):
        inject_parameters(nb, {"flag": 1}, path=path)


def test_no_parameters_cell(tmp_path: Path):
    path = write_notebook(tmp_path / "n.ipynb", [code("x = 1")])
    with pytest.raises(ParameterError, match="no cell is tagged 'parameters'"):
        run_notebook(path, {"x": 2})
    assert not (tmp_path / "n.run.ipynb").exists()


def test_run_with_parameters_in_a_real_kernel(tmp_path: Path, capfd: pytest.CaptureFixture[str]):
    path = _nb(tmp_path, "import os\nprint(os.getcwd())")
    before = path.read_text()
    assert main(["run", str(path), "-p", "epochs=5", "-p", "name=b"]) == 0
    captured = capfd.readouterr()  # the kernel's own stderr included (file descriptor 2)
    assert "IPKernelApp" not in captured.err  # ipykernel's TCP start-up warning is not shown
    out = tmp_path / "p.run.ipynb"
    assert f"wrote {out}" in captured.out
    assert "[3/5] injected parameters" in captured.err
    executed = read_notebook(out)
    texts = ["".join(o.get("text", "")) for c in executed.cells for o in c.outputs]
    assert "b:5:0.1:False:None\n" in texts
    assert f"{tmp_path}\n" in texts  # the kernel ran in the notebook's folder
    assert all(c.execution_count for c in executed.code_cells)
    assert path.read_text() == before  # the input is never changed


def test_failing_cell_is_named_and_copy_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    path = _nb(tmp_path, "1 / 0")
    with pytest.raises(NotebookRunError, match=r"cell 4 failed: ZeroDivisionError") as info:
        run_notebook(path, {"epochs": 1}, tmp_path / "out.ipynb")
    assert info.value.cell == 4 and info.value.output == tmp_path / "out.ipynb"
    assert (tmp_path / "out.ipynb").exists()
    assert main(["run", str(path), "-q"]) == 1
    assert "cell 4 failed: ZeroDivisionError" in capsys.readouterr().err


def test_output_cannot_replace_the_notebook(tmp_path: Path):
    path = _nb(tmp_path)
    with pytest.raises(ParameterError, match="would replace the notebook"):
        run_notebook(path, output=path)


def _result(text: str, count: int) -> dict:
    return {
        "output_type": "execute_result",
        "execution_count": count,
        "metadata": {},
        "data": {"text/plain": text},
    }


def test_a_failed_run_clears_what_did_not_run_and_promote_refuses_the_copy(tmp_path: Path):
    """issue 29 item 4: cells after the failure keep no outputs from an earlier session."""
    from labkit.promote import PromoteError, promote

    cells = [
        code("x = 1", 7, outputs=[]),
        code("y = x / 0", 8),
        code("z = 2\nz", 41, outputs=[_result("2", 41)]),  # the author's old session
        markdown("done"),
    ]
    path = write_notebook(tmp_path / "s.ipynb", cells)
    with pytest.raises(
        NotebookRunError, match=r"cell 2 failed: ZeroDivisionError: division by zero"
    ):
        run_notebook(path, output=tmp_path / "s.run.ipynb")
    copy = read_notebook(tmp_path / "s.run.ipynb")
    assert [c.execution_count for c in copy.code_cells] == [1, 2, None]
    assert copy.code_cells[2].outputs == ()
    record = copy.metadata["labkit"]["run"]
    assert record["status"] == "failed" and record["cell"] == 2
    with pytest.raises(PromoteError) as info:
        promote(copy.path, dry_run=True)
    assert info.value.errors[0].message.startswith(
        "s.run.ipynb is the copy of a `labkit run` that failed (cell 2 failed: ZeroDivisionError"
    )
    assert info.value.errors[0].cell == 2


def test_counts_below_a_cell_above_after_a_gap_are_warned(tmp_path: Path):
    from labkit.promote import promote

    cells = [code("a = 1", 1), code("b = a", 2), code("c = b", 30), code("d = b", 3)]
    done = promote(write_notebook(tmp_path / "g.ipynb", cells), dry_run=True)
    stale = [w for w in done.warnings if "predate the last kernel start" in w]
    assert stale == [
        "cell 4 (In [3]) ran before cell 3 (In [30]) above it, and the counts have gaps: its "
        "outputs (or those above) may predate the last kernel start; Restart & Run All, save, "
        "and promote again"
    ]


def test_a_timeout_names_the_cell_and_the_limit(tmp_path: Path):
    path = _nb(tmp_path, "import time\ntime.sleep(60)")
    with pytest.raises(NotebookRunError) as info:
        run_notebook(path, timeout=3)
    assert "cell 4 ran past the time limit of 3 s per cell (--timeout)" in str(info.value)
    assert info.value.cell == 4


def test_a_dead_kernel_names_the_running_cell(tmp_path: Path):
    path = _nb(tmp_path, "import os\nos._exit(1)", "never = 1")
    with pytest.raises(NotebookRunError) as info:
        run_notebook(path, timeout=60)
    assert "the kernel died while cell 4 ran" in str(info.value)
    copy = read_notebook(tmp_path / "p.run.ipynb")
    assert copy.code_cells[-1].execution_count is None


def test_infinite_values_are_injected_as_float_calls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = _nb(tmp_path)
    assert main(["run", str(path), "-q", "-p", "lr=1e999", "-p", "epochs=3"]) == 0
    executed = read_notebook(tmp_path / "p.run.ipynb")
    assert 'lr = float("inf")' in executed.cells[2].source
    texts = "".join(o.get("text", "") for c in executed.cells for o in c.outputs)
    assert "a:3:inf:False:None" in texts


def test_an_unknown_kernel_names_the_installed_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    path = _nb(tmp_path)
    assert main(["run", str(path), "--kernel", "nope"]) == 1
    err = capsys.readouterr().err
    assert "no Jupyter kernel named 'nope' is installed" in err and "python3" in err
    assert "Traceback" not in err and not (tmp_path / "p.run.ipynb").exists()
