"""A notebook's watched plain loop (``labkit.watch``), promoted: the script writes the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from labkit.cli import main
from labkit.promote import run_notebook
from tests.promote._notebooks import code, write_notebook
from tests.promote.conftest import read_run, run_script

CELLS = [
    "import torch\nfrom torch import nn\nimport torch.nn.functional as F\nimport labkit",
    # parameters (tagged): options of the script
    'lr = 0.05\nsteps = 9\nlogdir = "runs/notebook"',
    "torch.manual_seed(0)\nx = torch.randn(64, 4)\n"
    "y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])\n"
    "model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))",
    # the user's own loop, watched: two lines added
    "opt = torch.optim.SGD(model.parameters(), lr=lr)\n"
    "with labkit.watch(model, opt, logdir=logdir, dashboard=False, log_every=3) as run:\n"
    "    for step in range(steps):\n"
    "        i = torch.randint(0, 64, (16,))\n"
    "        opt.zero_grad(); loss = F.mse_loss(model(x[i]), y[i]); loss.backward(); opt.step()\n"
    "        run.step(loss=loss)",
    # displayed only (dropped by promote)
    "run.losses[-1]",
]


def _events(logdir: Path) -> list[dict]:
    return [json.loads(ln) for ln in (logdir / "events.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_promoted_watched_loop_writes_the_same_run(tmp_path: Path):
    cells = [
        code(src, None, tags=("parameters",) if i == 2 else ()) for i, src in enumerate(CELLS, 1)
    ]
    notebook = write_notebook(tmp_path / "loop.ipynb", cells)
    executed = run_notebook(notebook, timeout=300)
    assert main(["promote", str(executed), "-o", str(tmp_path / "loop.py")]) == 0
    source = (tmp_path / "loop.py").read_text()
    assert "labkit.watch(model, opt, logdir=logdir" in source and "run.step(loss=loss)" in source

    run_script(tmp_path / "loop.py", "--logdir", "runs/script", cwd=tmp_path)
    nb_run, script_run = read_run(tmp_path / "runs/notebook"), read_run(tmp_path / "runs/script")
    assert nb_run["status"] == script_run["status"] == "finished"
    assert nb_run["config"]["source"] == script_run["config"]["source"] == "loop"
    nb_losses = [s["loss"] for s in nb_run["steps"]]
    assert len(nb_losses) == 9
    assert [s["loss"] for s in script_run["steps"]] == nb_losses  # CPU, fp32, same seed
    assert nb_run["config"]["lr"] == script_run["config"]["lr"] == 0.05
    # the event streams agree too: the same kinds of event, the same steps' losses
    nb_events, script_events = (
        _events(tmp_path / "runs/notebook"),
        _events(tmp_path / "runs/script"),
    )
    assert [e["type"] for e in nb_events] == [e["type"] for e in script_events]
    assert [s["loss"] for e in script_events if e["type"] == "steps" for s in e["steps"]] == (
        nb_losses
    )
    for logdir in ("runs/notebook", "runs/script"):
        assert list((tmp_path / logdir / "tensorboard").glob("events.out.tfevents.*"))

    # an option of the script changes the run it writes, as the notebook's cell would
    run_script(tmp_path / "loop.py", "--logdir", "runs/short", "--steps", "4", cwd=tmp_path)
    assert [s["loss"] for s in read_run(tmp_path / "runs/short")["steps"]] == nb_losses[:4]
