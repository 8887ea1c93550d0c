"""record_recipe writes the Recipe where promote reads it: a cell output, in a real kernel."""

from __future__ import annotations

from pathlib import Path

from labkit.optimize import Recipe
from labkit.promote import read_notebook, record_recipe, recorded_recipe, run_notebook
from labkit.promote.recipe_record import RECIPE_MIME
from tests.promote._notebooks import code, write_notebook


def test_outside_a_kernel_it_does_nothing():
    assert record_recipe(Recipe(precision="bf16-mixed")) is False


def test_recorded_in_the_cell_and_deferred_from_callbacks(tmp_path: Path):
    path = write_notebook(
        tmp_path / "r.ipynb",
        [
            code("from labkit.optimize import Recipe\nfrom labkit.promote import record_recipe"),
            code("record_recipe(Recipe(channels_last=True), source='test')"),
            # as from a widget callback: held until the next cell runs
            code("record_recipe(Recipe(precision='bf16-mixed'), defer=True)"),
            code("x = 1"),
        ],
    )
    nb = read_notebook(run_notebook(path, timeout=120))
    outputs = [[o for o in c.outputs if RECIPE_MIME in o.get("data", {})] for c in nb.cells]
    assert [len(o) for o in outputs] == [0, 1, 0, 1]
    assert outputs[1][0]["data"][RECIPE_MIME]["channels_last"] is True
    assert outputs[1][0]["metadata"][RECIPE_MIME] == {"source": "test"}
    assert outputs[1][0]["data"]["text/plain"] == "labkit recipe: channels_last"
    found, cell = recorded_recipe(nb.cells)
    assert Recipe.from_dict(found) == Recipe(precision="bf16-mixed") and cell.number == 4
