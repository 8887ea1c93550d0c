"""The promoted script does what the notebook did: same per-step losses, same Recipe,
a checkpoint that loads into the notebook's model."""

from __future__ import annotations

import ast

import pytest
import torch
from torch import nn

from labkit.promote import read_notebook
from labkit.promote.execute import INJECTED_TAG
from tests.promote.conftest import RECIPE_TOGGLES, Trained, read_run, run_script

pytestmark = pytest.mark.slow


def test_labkit_run_injected_the_parameters(trained: Trained):
    nb = read_notebook(trained.executed)
    injected = [c for c in nb.cells if INJECTED_TAG in c.tags]
    assert len(injected) == 1 and injected[0].number == 3  # right after the parameters cell
    assert "epochs = 2" in injected[0].source
    assert trained.run["status"] == "finished"
    assert not any(c.tags for c in read_notebook(trained.notebook).cells if INJECTED_TAG in c.tags)


def test_script_is_standalone_python_without_exploration(trained: Trained):
    source = trained.script.read_text()
    ast.parse(source)
    assert source.startswith("#!/usr/bin/env python\n")
    for gone in ("OptimizePanel", "labkit.trace", "%time", "\nmodel\n", "panel"):
        assert gone not in source, gone
    assert "def main(argv" in source and 'if __name__ == "__main__":' in source
    # the command line is labkit's fit options (generated from FitOptions)
    shown = run_script(trained.script, "--help", cwd=trained.folder)
    for flag in (
        "--max-epochs",
        "--devices",
        "--strategy",
        "--num-nodes",
        "--precision",
        "--seed",
        "--ckpt-path",
        "--logdir",
        "--resume",
        "--limit-batches",
    ):
        assert flag in shown, flag
    assert "(here: 2)" in shown  # the notebook's max_epochs=epochs, injected as 2


def test_script_reproduces_the_notebook_losses_and_recipe(trained: Trained):
    run_script(trained.script, "--logdir", "runs/script", cwd=trained.folder)
    script_run = read_run(trained.folder / "runs" / "script")
    nb_losses = [s["loss"] for s in trained.run["steps"]]
    sc_losses = [s["loss"] for s in script_run["steps"]]
    assert len(nb_losses) == 6  # 2 epochs x 3 batches
    assert sc_losses == pytest.approx(nb_losses, abs=1e-6, rel=0)
    # the toggles changed only in the panel reached the script's fit
    assert script_run["config"]["recipe"]["checkpoint"] == RECIPE_TOGGLES["checkpoint"]
    assert script_run["config"]["recipe"] == trained.run["config"]["recipe"]
    assert script_run["config"]["max_epochs"] == 2 and script_run["config"]["seed"] == 0

    # the script's checkpoint loads into the notebook's model and equals its weights
    from labkit import Lab

    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    Lab(model, loss=nn.functional.mse_loss).load(
        trained.folder / "runs" / "script" / "checkpoints" / "last.ckpt"
    )
    notebook_state = torch.load(trained.folder / "notebook_model.pt", weights_only=True)
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(tensor, notebook_state[name], atol=1e-6, rtol=0)
    # code after the training call ran too
    assert (trained.folder / "notebook_model.pt").exists()


def test_the_parameters_cell_values_are_script_options(trained: Trained):
    shown = run_script(trained.script, "--help", cwd=trained.folder)
    assert "--epochs EPOCHS" in shown and "epochs in the notebook: 2" in shown
    assert "--lr LR" in shown and "lr in the notebook: 0.1" in shown
    # max_epochs=epochs in the training call and lr=lr in the Lab follow the options
    run_script(
        trained.script,
        "--epochs",
        "1",
        "--lr",
        "0.05",
        "--logdir",
        "runs/params",
        cwd=trained.folder,
    )
    run = read_run(trained.folder / "runs" / "params")
    assert len(run["steps"]) == 3 and run["config"]["max_epochs"] == 1  # 1 epoch x 3 batches
    assert run["config"]["lr"] == 0.05


def test_check_runs_one_batch_before_writing(trained: Trained, capsys: pytest.CaptureFixture):
    from labkit.cli import main

    out = trained.folder / "checked.py"
    assert main(["promote", str(trained.executed), "-o", str(out), "--check"]) == 0
    assert (
        "(checked: trained one batch (--max-epochs 1 --limit-batches 1))" in capsys.readouterr().out
    )
    assert out.read_text() == trained.script.read_text().replace("train.py", "checked.py")


def test_check_failure_writes_nothing(tmp_path, capsys: pytest.CaptureFixture):
    from labkit.cli import main
    from tests.promote._notebooks import numbered, write_notebook
    from tests.promote.test_analyze import FIT, HEAD, LAB, MODEL

    nb = write_notebook(
        tmp_path / "nb.ipynb", numbered(HEAD, MODEL, "rows = open('data.csv').read()", LAB, FIT)
    )
    assert main(["promote", str(nb), "--check"]) == 1
    err = capsys.readouterr().err
    assert "--check: the promoted script failed (exit 1)" in err and "data.csv" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.ipynb"]
