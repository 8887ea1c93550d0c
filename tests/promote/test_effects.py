"""Every effect is kept (issue 29, items 1 and 2): print, logging, writes and calls stay; only
call-free (or pure) bare expressions are display-only; ``show_results`` prints displayed
results; a left-out statement hiding a random draw or a state change is refused; the report
lists what was left out, by cell and line, grouped by reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labkit.cli import main
from labkit.promote import PromoteError, analyze, promote, read_notebook
from labkit.promote.report import promotion_report
from tests.promote._notebooks import code, write_notebook


def _result(count: int, text: str) -> dict:
    return {
        "output_type": "execute_result",
        "execution_count": count,
        "metadata": {},
        "data": {"text/plain": text},
    }


LECTURE = [
    code("%matplotlib inline\nimport logging\nimport torch\nimport matplotlib.pyplot as plt", 1),
    code("torch.manual_seed(0)\nw = torch.randn(3)\nw", 2, outputs=[_result(2, "tensor([...])")]),
    code(
        "losses = []\nfor i in range(3):\n    losses.append(float((w * i).sum()))\n"
        "print(f'final {losses[-1]:.4f}')\nlogging.warning('done')\nlosses[-1]",
        3,
    ),
    code("plt.plot(losses)\nplt.show()", 4),
    code("fig, ax = plt.subplots()\nax.plot(losses)\nax.set_title('x')\nfig.savefig('l.png')", 5),
    code("len(losses)\nw.shape", 6),
    code("a, b = 1, 2\na, b", 7),
    code("w.sum();", 8),
    code("torch.manual_seed(1)", 9, outputs=[_result(9, "<torch._C.Generator at 0x7f00>")]),
    code(
        "sample = torch.multinomial(torch.ones(3), 1)\nsample.item()",
        10,
        outputs=[_result(10, "2")],
    ),
]


def _lines(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines()]


def test_prints_logging_writes_and_calls_are_kept(tmp_path: Path) -> None:
    nb = write_notebook(tmp_path / "lec.ipynb", LECTURE)
    done = promote(nb, dry_run=True)
    lines = _lines(done.source)
    for kept in (
        "print(f'final {losses[-1]:.4f}')",
        "logging.warning('done')",
        "fig.savefig('l.png')",
        "fig, ax = plt.subplots()",
        "ax.plot(losses)",
        "ax.set_title('x')",
        "torch.manual_seed(1)",
        "import matplotlib.pyplot as plt",
        "sample = torch.multinomial(torch.ones(3), 1)",
    ):
        assert kept in lines, kept
    for dropped in (
        "w",
        "losses[-1]",
        "plt.plot(losses)",
        "plt.show()",
        "len(losses)",
        "w.shape",
        "a, b",
        "w.sum();",
        "w.sum()",
        "sample.item()",
    ):
        assert dropped not in lines, dropped
    ast.parse(done.source)


def test_show_results_prints_what_the_notebook_displayed(tmp_path: Path) -> None:
    nb = write_notebook(tmp_path / "lec.ipynb", LECTURE)
    lines = _lines(promote(nb, dry_run=True, show_results=True).source)
    for shown in (
        "print(w)",
        "print(losses[-1])",
        "print(w.shape)",
        "print((a, b))",
        "print(sample.item())",
    ):
        assert shown in lines, shown
    assert "print(len(losses))" not in lines  # not the cell's last expression: not displayed
    assert "print(w.sum())" not in lines  # ';' hides it in the notebook
    assert "print(torch.manual_seed(1))" not in lines  # an object's address: not a result
    chosen = _lines(promote(nb, dry_run=True, show_results=["losses[-1]"]).source)
    assert "print(losses[-1])" in chosen and "print(w)" not in chosen


def test_a_left_out_statement_that_draws_random_numbers_is_refused(tmp_path: Path) -> None:
    cells = [
        code("import torch\nfrom torch import nn\nimport matplotlib.pyplot as plt", 1),
        code("model = nn.Linear(2, 2)\nx = torch.ones(1, 2)", 2),
        code("display(torch.randn(2))", 3),
        code("plt.imshow(model(x).detach())", 4),
        code("plt.plot(torch.tensor([1.0, 2.0]).view(-1).tolist())", 5),
        code("y = model(x)", 6),
    ]
    nb = write_notebook(tmp_path / "r.ipynb", cells)
    with pytest.raises(PromoteError) as info:
        promote(nb, dry_run=True)
    errors = [p.message for p in info.value.errors]
    assert len(errors) == 2, errors
    assert errors[0].startswith(
        "cell 3 (In [3]) line 1: 'display(torch.randn(2))' is left out of the script "
        "(display() call), but it calls torch.randn(), which draws random numbers"
    )
    assert "tag cell 3 'explore' to leave it out knowingly" in errors[0]
    assert errors[1].startswith("cell 4 (In [4]) line 1: 'plt.imshow(model(x).detach())'")
    assert "calls model(), which may draw random numbers or change state" in errors[1]
    # tagged explore: left out knowingly
    cells[2] = code("display(torch.randn(2))", 3, tags=("explore",))
    cells[3] = code("plt.imshow(model(x).detach())", 4, tags=("explore",))
    done = promote(write_notebook(tmp_path / "r.ipynb", cells), dry_run=True)
    assert "torch.randn(2)" not in done.source and "y = model(x)" in done.source


def test_the_report_lists_what_was_left_out_by_cell_and_line(tmp_path: Path) -> None:
    nb = write_notebook(tmp_path / "lec.ipynb", [*LECTURE, code("unused = 1", None)])
    report = promotion_report(analyze(read_notebook(nb)))
    groups = {reason: [(d.number, d.line) for d in items] for reason, items in report.groups}
    assert groups == {
        "IPython magic or shell escape": [(1, 1)],
        "displayed result": [(2, 3), (3, 6), (6, 2), (7, 2), (10, 2)],
        "plot call": [(4, 1), (4, 2)],
        "expression without effect": [(6, 1), (8, 1)],
    }
    assert [(d.number, d.reason) for d in report.skipped] == [(11, "never run")]
    assert report.counts()["displayed result"] == 5
    text = report.text()
    assert "  plot call (2)\n    cell 4 (In [4]) line 1: plt.plot(losses)\n" in text
    assert "displayed result (5; --show-results prints them)" in text
    doc = ast.get_docstring(ast.parse(promote(nb, dry_run=True).source)) or ""
    assert "displayed result: 5, plot call: 2, expression without effect: 2, cells skipped: 1" in (
        " ".join(doc.split())
    )


def test_cli_prints_the_report_and_quiet_silences_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nb = write_notebook(tmp_path / "lec.ipynb", LECTURE)
    assert main(["promote", str(nb), "--show-result", "w", "--show-result", "losses[-1]"]) == 0
    captured = capsys.readouterr()
    assert "labkit promote:   plot call (2)" in captured.err
    assert "labkit promote:   results printed by the script (2)" in captured.err
    assert "labkit promote:     cell 2 (In [2]) line 3: print(w)" in captured.err
    assert captured.out.startswith("wrote ")
    assert main(["promote", str(nb), "--force", "--quiet"]) == 0
    assert capsys.readouterr().err == ""
