"""Several training processes: DDP over gloo on CPU, launched from a notebook kernel."""

from __future__ import annotations

import os
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from labkit.train import DDPWorkerError, Lab
from labkit.train._launch import plan
from tests.train._helpers import LOSS, datasets, mlp

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

NOTEBOOK_CELLS = [
    "import torch, torch.nn.functional as F\n"
    "from torch import nn\n"
    "from torch.utils.data import TensorDataset\n"
    "import labkit\n"
    "torch.manual_seed(0)\n"
    "x = torch.randn(256, 8); y = (x.sum(1) > 0).long()\n"
    "class Net(nn.Module):  # defined in the notebook: cannot be pickled by reference\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.body = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))\n"
    "    def forward(self, x):\n"
    "        return self.body(x)\n"
    "lab = labkit.Lab(Net(), (TensorDataset(x[:192], y[:192]), TensorDataset(x[192:], y[192:])),\n"
    "                 loss=F.cross_entropy, lr=1e-2, batch_size=16, logdir=LOGDIR)",
    "run = lab.fit(max_epochs=2, devices=2, accelerator='cpu', dashboard=True)",
    "import json\n"
    "print(json.dumps({'status': run.status, 'launch': run.config['launch'],\n"
    "    'steps': [s['step'] for s in run.steps], 'epochs': len(run.epochs),\n"
    "    'dash_step': lab.dashboard.stats['step'],\n"
    "    'dash_world': lab.dashboard.stats['world_size'],\n"
    "    'dash_status': lab.dashboard.status,\n"
    "    'dash_points': len(lab.dashboard.series['train_loss']['x']),\n"
    "    'val': 'val_loss' in lab.dashboard.series}))",
]


def test_ddp_two_processes_in_a_notebook(tmp_path):
    nb = nbformat.v4.new_notebook()
    cells = [f"LOGDIR = {str(tmp_path / 'run')!r}", *NOTEBOOK_CELLS]
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env_path}" if env_path else str(ROOT)
    try:
        NotebookClient(
            nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
        ).execute()
    finally:
        os.environ["PYTHONPATH"] = env_path
    import json

    out = json.loads(nb.cells[-1].outputs[-1]["text"])
    assert out["status"] == "finished" and out["launch"] == "fork"
    # 192 samples / 2 ranks / 16 per batch = 6 steps per epoch, seen from rank 0
    assert out["steps"] == list(range(1, 13)) and out["epochs"] == 2
    assert out["dash_step"] == 12 and out["dash_world"] == 2 and out["dash_status"] == "finished"
    assert out["dash_points"] == 12 and out["val"]
    # the widget was displayed in the notebook
    shown = [
        o
        for o in nb.cells[2].outputs
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    assert shown


class DieOnRank1(mlp().__class__):
    """A Sequential that kills (or fails) its process on rank 1 at the third forward."""

    def __init__(self, how: str) -> None:
        super().__init__(*mlp())
        self.how = how
        self.calls = 0

    def forward(self, x):  # type: ignore[override]
        self.calls += 1
        if os.environ.get("LOCAL_RANK") == "1" and self.calls == 3 and self.training:
            if self.how == "kill":
                os.kill(os.getpid(), 9)
            raise RuntimeError("rank 1 broke on purpose")
        return super().forward(x)


@pytest.mark.parametrize("how", ["raise", "kill"])
def test_dead_worker_fails_fast_naming_rank(tmp_path, how):
    lab = Lab(DieOnRank1(how), datasets(512), loss=LOSS, batch_size=8, logdir=tmp_path)
    start = time.monotonic()
    with pytest.raises(DDPWorkerError) as info:
        lab.fit(
            max_epochs=3,
            devices=2,
            accelerator="cpu",
            dashboard=False,
            dry_run=False,
            ddp_timeout=20,
            trainer_kwargs={"enable_progress_bar": False},
        )
    took = time.monotonic() - start
    assert took < 300, f"took {took:.0f} s"  # a hang guard only
    # fast = reported by the launcher when rank 1 ended, not by rank 0 timing out later
    assert info.value.rank == 1 and str(info.value).startswith("DDP worker rank 1 ")
    assert "Timed out" not in str(info.value) and "did not arrive" not in str(info.value)
    if how == "raise":
        assert "rank 1 broke on purpose" in str(info.value)
    else:
        assert "SIGKILL" in str(info.value)
    assert lab.last_run.status == "failed"


def test_plan_modes():
    assert plan(devices=1, strategy="auto", num_nodes=1).mode == "inline"
    p = plan(devices=2, strategy="auto", num_nodes=1)
    assert p.mode == "fork" and p.processes == 2
    assert repr(p) == (
        "Plan(mode='fork', processes=2, reason='2 processes forked from this one (ddp_notebook)')"
    )
    assert plan(devices=2, strategy="auto", num_nodes=1, launch="subprocess").mode == "subprocess"
    with pytest.raises(ValueError, match="torchrun"):
        plan(devices=2, strategy="auto", num_nodes=2)


def test_subprocess_launch_trains_notebook_style_model(tmp_path):
    """The path taken when CUDA is already initialised: a fresh process, cloudpickled Lab."""

    class Local(mlp().__class__):  # a class that only exists here, like one in a notebook
        pass

    model = Local(*mlp())
    before = [p.detach().clone() for p in model.parameters()]
    lab = Lab(model, datasets(), loss=LOSS, batch_size=32, logdir=tmp_path)
    run = lab.fit(max_epochs=1, devices=2, accelerator="cpu", launch="subprocess", dashboard=False)
    assert run.status == "finished" and run.config["launch"] == "subprocess"
    assert [s["step"] for s in run.steps] == [1, 2]
    assert any(not (a == b).all() for a, b in zip(before, model.parameters(), strict=True))


def test_fit_leaves_the_rendezvous_environment_as_it_was(tmp_path, monkeypatch):
    """Lightning's fork launcher writes MASTER_PORT into this process; kept, the next fit (and
    every kernel or script started from here) reused it and failed with EADDRINUSE while
    anything still held that port (CI: 14 DDP tests failed after the first one)."""
    for key in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NODE_RANK"):
        monkeypatch.delenv(key, raising=False)
    lab = Lab(mlp(), datasets(64), loss=LOSS, batch_size=16, logdir=tmp_path / "a")
    run = lab.fit(
        max_epochs=1,
        devices=2,
        accelerator="cpu",
        dashboard=False,
        trainer_kwargs={"enable_progress_bar": False},
    )
    assert run.status == "finished"
    assert not {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE"} & set(os.environ)


def test_rendezvous_env_keeps_what_the_user_set(monkeypatch):
    from labkit.train._launch import Plan, rendezvous_env

    monkeypatch.setenv("MASTER_PORT", "29511")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    with rendezvous_env(Plan("fork", 2, "test")):
        os.environ["MASTER_PORT"], os.environ["MASTER_ADDR"] = "40000", "127.0.0.1"
    assert os.environ["MASTER_PORT"] == "29511" and "MASTER_ADDR" not in os.environ
    with rendezvous_env(Plan("inline", 1, "test")):  # one process: Lightning writes nothing
        os.environ["MASTER_ADDR"] = "127.0.0.1"
    assert os.environ.pop("MASTER_ADDR") == "127.0.0.1"
