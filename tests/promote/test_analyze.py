"""Reading notebooks for promotion: magics, exploration, tags, execution order (no kernel)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from labkit.promote import (
    Cell,
    analyze,
    check,
    promote,
    read_notebook,
    recorded_recipe,
    render_script,
    strip_magics,
)
from labkit.promote.recipe_record import RECIPE_MIME
from tests.promote._notebooks import code, markdown, numbered, write_notebook

HEAD = "import torch\nimport labkit\nfrom torch import nn"
MODEL = "model = nn.Linear(4, 1)\ndata = torch.utils.data.TensorDataset(torch.randn(8, 4))"
LAB = "lab = labkit.Lab(model, data, loss=nn.functional.mse_loss)"
FIT = "run = lab.fit(max_epochs=2, seed=0)"


def _roles(path: Path) -> dict[str, str]:
    a = analyze(read_notebook(path))
    return {s.source: s.role for s in a.statements}


@pytest.mark.parametrize(
    ("source", "stripped"),
    [
        ("%matplotlib inline\nx = 1", ("%matplotlib inline",)),
        ("!pip install foo\nx = 1", ("!pip install foo",)),
        ("files = !ls\nx = 1", ("files = !ls",)),
        ("model?\nx = 1", ("model?",)),
        ("for i in range(2):\n    %time f(i)\nx = 1", ("%time f(i)",)),
    ],
)
def test_strip_magics(source: str, stripped: tuple[str, ...]):
    code_, removed, _, reason = strip_magics(source)
    assert removed == stripped and not reason
    ast.parse(code_)  # what is left is Python, with line numbers kept
    assert len(code_.splitlines()) == len(source.splitlines())


def test_cell_magics():
    assert strip_magics("%%bash\nls")[3] == "cell magic %%bash"
    code_, removed, _, reason = strip_magics("%%time\nx = 1")
    assert code_.strip() == "x = 1" and removed == ("%%time",) and not reason


def test_exploration_is_dropped_and_training_kept(tmp_path: Path):
    nb = write_notebook(
        tmp_path / "nb.ipynb",
        [
            code(HEAD + "\nimport matplotlib.pyplot as plt", 1),
            markdown("# notes"),
            code(MODEL + "\nmodel", 2),
            code("t = labkit.trace(model, torch.ones(2, 4))\nprint(t.summary())", 3),
            code("plt.plot([1, 2])", 4),
            code("fig, ax = plt.subplots()\nax.plot([1])", 5),
            code("torch.manual_seed(0)", 6, tags=("explore",)),
            code("debug = 1", 7, tags=("keep",)),
            code(LAB + "\nlab.trace()\nlab", 8),
            code(FIT, 9),
        ],
    )
    roles = _roles(nb)
    assert roles["model"] == "explore"
    assert roles["t = labkit.trace(model, torch.ones(2, 4))"] == "explore"
    assert roles["print(t.summary())"] == "explore"
    assert roles["plt.plot([1, 2])"] == "explore"
    assert roles["ax.plot([1])"] == "explore"
    assert roles["torch.manual_seed(0)"] == "explore"
    assert roles["debug = 1"] == "code"
    assert roles["lab.trace()"] == "explore"
    assert roles[FIT] == "fit"
    assert roles["import matplotlib.pyplot as plt"] == "explore-import"
    result = promote(nb, dry_run=True)
    assert "plt" not in result.source and "matplotlib" not in result.source
    assert "debug = 1" in result.source
    ast.parse(result.source)


def test_execution_order_is_followed(tmp_path: Path):
    # the kernel ran cell 3 (the data) before cell 2 (the model that reads it)
    nb = write_notebook(
        tmp_path / "nb.ipynb",
        [
            code(HEAD, 1),
            code("model = nn.Linear(n, 1)", 3),
            code("n = 4\ndata = torch.utils.data.TensorDataset(torch.randn(8, n))", 2),
            code(LAB, 4),
            code(FIT, 5),
        ],
    )
    result = promote(nb, dry_run=True)
    assert result.source.index("n = 4") < result.source.index("model = nn.Linear(n, 1)")
    assert any("out of notebook order" in w for w in result.warnings)


def test_cells_never_run_are_reported_and_left_out(tmp_path: Path):
    nb = write_notebook(
        tmp_path / "nb.ipynb",
        [*numbered(HEAD, MODEL, LAB, FIT), code("unused = 1", None)],
    )
    result = promote(nb, dry_run=True)
    assert "cell 5 was never run; it is left out" in result.warnings
    assert "unused" not in result.source


def test_code_after_fit_goes_into_main(tmp_path: Path):
    nb = write_notebook(
        tmp_path / "nb.ipynb", numbered(HEAD, MODEL, LAB, FIT, "final = run.losses[-1]")
    )
    source = promote(nb, dry_run=True).source
    main = source[source.index("def main(") :]
    assert "global final, run" in main and "    final = run.losses[-1]" in main
    assert "    run = _fit_from_args(lab, argv, description=__doc__, **_fit_kwargs)" in main
    assert "'max_epochs': 2," in main and "'seed': 0," in main


def test_recorded_recipe_goes_into_the_script(tmp_path: Path):
    recipe = {"precision": "bf16-mixed", "checkpoint": ["0"]}
    output = {
        "output_type": "display_data",
        "metadata": {},
        "data": {RECIPE_MIME: recipe, "text/plain": "labkit recipe"},
    }
    cells = numbered(HEAD, MODEL, LAB)
    cells.append(code(FIT, 4, outputs=[output]))
    nb = write_notebook(tmp_path / "nb.ipynb", cells)
    found = recorded_recipe(read_notebook(nb).cells)
    assert found is not None and found[0] == recipe and found[1].number == 4
    analysis = analyze(read_notebook(nb))
    source = render_script(analysis, script_name="nb.py", recipe=recipe, recipe_source="cell 4")
    assert "LABKIT_RECIPE = {'precision': 'bf16-mixed', 'checkpoint': ['0']}" in source
    assert "lab.recipe = _Recipe.from_dict(LABKIT_RECIPE)" in source


def test_repr_of_plain_data(tmp_path: Path):
    nb = write_notebook(tmp_path / "nb.ipynb", numbered(HEAD, MODEL, LAB, FIT))
    notebook = read_notebook(nb)
    assert repr(notebook) == f"Notebook({str(nb)!r}, cells=4, code=4)"
    assert repr(notebook.cells[0]) == (
        "Cell(number=1, code, In [1], 'import torch\\nimport labkit\\n...')"
    )
    assert repr(Cell(number=2, cell_type="code", source="x", tags=("keep",))) == (
        "Cell(number=2, code, In [ ], 'x', tags=['keep'])"
    )
    analysis = analyze(notebook)
    assert repr(analysis) == (
        "Analysis('nb.ipynb', cells run=4, kept=4, never run=0, lab.fit in cell 4 (In [4]))"
    )
    assert repr(analysis.plans[0]) == "CellPlan(cell 1 (In [1]), 3 statements, kept)"
    assert repr(analysis.fit) == f"Statement(cell 4 (In [4]), line 1, fit, {FIT!r})"
    assert check(analysis) == []
    result = promote(nb, dry_run=True)
    assert repr(result) == f"Promoted({str(nb)!r} -> 'None', warnings=0)"
