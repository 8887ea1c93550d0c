"""Lab.fit and the optimize panel's Apply record their Recipe in the notebook, so the
promoted script trains with the Recipe the notebook trained with (in a real kernel)."""

from __future__ import annotations

import ast
from pathlib import Path

from labkit.optimize import Recipe
from labkit.promote import promote, read_notebook, run_notebook
from labkit.promote.recipe_record import RECIPE_MIME
from tests.promote._notebooks import code, write_notebook

PANEL = Recipe(channels_last=True)  # applied in the panel, then replaced by Lab(recipe=...)
FIT = Recipe(precision="bf16-mixed", checkpoint=("0",))

CELLS = [
    "import torch\nfrom torch import nn\nimport labkit\nfrom labkit.optimize import Recipe\n"
    "from labkit.panels import OptimizePanel",
    "torch.manual_seed(0)\nx = torch.randn(32, 4)\ny = x.sum(1, keepdim=True)\n"
    "data = torch.utils.data.TensorDataset(x, y)\n"
    "model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))",
    # Apply without on_apply: the panel records the Recipe itself
    f"panel = OptimizePanel(model, x[:4], recipe=Recipe.from_dict({PANEL.to_dict()!r}))\n"
    "_ = panel.apply()",
    f"lab = labkit.Lab(model, (data, data), loss=nn.functional.mse_loss, "
    f"recipe=Recipe.from_dict({FIT.to_dict()!r}), batch_size=16)",
    'run = lab.fit(max_epochs=1, seed=0, logdir="runs/nb", dashboard=False)',
    "print(run.status)",
]


def _recipes(cell) -> list[tuple[dict, dict]]:
    return [
        (o["data"][RECIPE_MIME], o.get("metadata", {}).get(RECIPE_MIME, {}))
        for o in cell.outputs
        if RECIPE_MIME in o.get("data", {})
    ]


def test_fit_and_panel_record_the_recipe_and_promote_writes_it(tmp_path: Path):
    notebook = write_notebook(tmp_path / "train.ipynb", [code(s) for s in CELLS])
    executed = run_notebook(notebook, timeout=180)
    cells = read_notebook(executed).cells
    assert "finished" in "".join(o.get("text", "") for o in cells[5].outputs)

    ((panel_dict, panel_meta),) = _recipes(cells[2])
    assert Recipe.from_dict(panel_dict) == PANEL and panel_meta == {"source": "optimize panel"}
    ((fit_dict, fit_meta),) = _recipes(cells[4])
    assert Recipe.from_dict(fit_dict) == FIT and fit_meta == {"source": "Lab.fit"}
    assert [len(_recipes(c)) for c in cells] == [0, 0, 1, 0, 1, 0]

    script = promote(executed, tmp_path / "train.py").script
    assert script is not None
    tree = ast.parse(script.read_text())
    (literal,) = [
        n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "LABKIT_RECIPE"
    ]
    assert Recipe.from_dict(ast.literal_eval(literal)) == FIT
