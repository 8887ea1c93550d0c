"""Shared fixtures: a real training notebook, executed once by ``labkit run``, promoted once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.promote._notebooks import code, write_notebook

RECIPE_TOGGLES = {"checkpoint": ["0"]}  # set only through the optimize panel's state

TRAIN_CELLS = [
    # 1: imports
    "import torch\nfrom torch import nn\n\nimport labkit\n"
    "from labkit.promote import record_recipe\n"
    "from labkit.panels import OptimizePanel",
    # 2: parameters
    "epochs = 2\nlr = 0.1",
    # 3: data
    "torch.manual_seed(0)\nx = torch.randn(64, 4)\n"
    "y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])\n"
    "train = torch.utils.data.TensorDataset(x[:48], y[:48])\n"
    "val = torch.utils.data.TensorDataset(x[48:], y[48:])",
    # 4: model, then a display-only expression
    "model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))\nmodel",
    # 5: the Lab
    'lab = labkit.Lab(model, (train, val), loss=nn.functional.mse_loss, optimizer="sgd", '
    "lr=lr, batch_size=16)",
    # 6: the optimize panel: toggles changed in the widget only, applied to the Lab
    "panel = OptimizePanel(model, x[:16], target=lab, on_apply=record_recipe)\n"
    f"panel.recipe_state = {{**panel.recipe_state, **{RECIPE_TOGGLES!r}}}\n"
    "panel.apply()\npanel",
    # 7: exploration: a trace and a magic
    "%time t = labkit.trace(model, x[:2])\nt = labkit.trace(model, x[:2])\nt",
    # 8: the training call
    # (dashboard=False: the live dashboard is not what this test is about)
    'run = lab.fit(max_epochs=epochs, seed=0, logdir="runs/notebook", dashboard=False)',
    # 9: after training
    'torch.save(model.state_dict(), "notebook_model.pt")\nrun.losses[-1]',
]


@dataclass
class Trained:
    folder: Path
    notebook: Path
    executed: Path
    script: Path
    run: dict


def run_script(script: Path, *args: str, cwd: Path, timeout: float = 180) -> str:
    """``python script.py args`` in ``cwd``; fail the test with its output when it fails."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    done = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"{script.name} {args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def read_run(logdir: Path) -> dict:
    return json.loads((logdir / "run.json").read_text())


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Trained:
    """The training notebook, run by ``labkit run`` (a real kernel), then promoted."""
    from labkit.promote import promote, run_notebook

    folder = tmp_path_factory.mktemp("fidelity")
    cells = [
        code(src, None, tags=("parameters",) if i == 2 else ())
        for i, src in enumerate(TRAIN_CELLS, 1)
    ]
    notebook = write_notebook(folder / "train.ipynb", cells)
    executed = run_notebook(notebook, {"epochs": 2}, timeout=300)
    script = promote(executed, folder / "train.py").script
    assert script is not None
    return Trained(folder, notebook, executed, script, read_run(folder / "runs" / "notebook"))
