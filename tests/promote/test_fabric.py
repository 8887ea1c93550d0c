"""``labkit promote --fabric``: a plain loop put on Lightning Fabric runs on one process like
the notebook, on two CPU processes (gloo) with a falling loss, and an unrecognizable loop
is refused naming its cell and line."""

from __future__ import annotations

import ast
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.promote import PromoteError, promote
from tests.promote._notebooks import numbered, write_notebook
from tests.promote.conftest import run_script
from tests.promote.test_analyze import FIT, HEAD, LAB, MODEL

IMPORTS = (
    "import torch\nfrom torch import nn\nfrom torch.utils.data import DataLoader, TensorDataset"
)
PARAMS = "lr = 0.05\nepochs = 3"
DATA = (
    "torch.manual_seed(0); x = torch.randn(256, 4)\n"
    "y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])\n"
    "loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)\n"
    "model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))\n"
    "opt = torch.optim.SGD(model.parameters(), lr=lr)"
)
LOOP = (
    "for epoch in range(epochs):\n"
    "    total = 0.0\n"
    "    for xb, yb in loader:\n"
    "        opt.zero_grad(); loss = nn.functional.mse_loss(model(xb), yb)\n"
    "        loss.backward(); opt.step()\n"
    "        total += loss.item()\n"
    "    print(f'epoch {epoch} loss {total / len(loader):.8f}')"
)


def _notebook(tmp_path: Path, *cells: str) -> Path:
    return write_notebook(tmp_path / "loop.ipynb", numbered(*cells, tags={2: ("parameters",)}))


def test_rewrite_adds_only_what_fabric_needs(tmp_path: Path):
    source = promote(_notebook(tmp_path, IMPORTS, PARAMS, DATA, LOOP), dry_run=True,
                     fabric=True).source  # fmt: skip
    ast.parse(source)
    assert "    fabric.launch()" in source
    assert "    model, opt = fabric.setup(model, opt)  # labkit promote --fabric" in source
    assert "    loader = fabric.setup_dataloaders(loader)  # labkit promote --fabric" in source
    assert "fabric.backward(loss); opt.step()" in source and "loss.backward()" not in source
    for flag in (
        "'--devices'",
        "'--strategy'",
        "'--accelerator'",
        "'--num-nodes'",
        "'--precision'",
    ):
        assert flag in source
    # without --fabric the same notebook is a plain script
    plain = promote(tmp_path / "loop.ipynb", dry_run=True).source
    assert "fabric" not in plain and "loss.backward(); opt.step()" in plain


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        (  # manual update: no torch.optim optimizer
            (IMPORTS, PARAMS, DATA.replace("opt = torch.optim.SGD(model.parameters(), lr=lr)",
                                           "w = 1"),
             "for xb, yb in loader:\n    loss = model(xb).sum()\n    loss.backward()"),
            "cell 4 (In [4]) line 1: no `opt = torch.optim.<Optimizer>(model.parameters()",
        ),
        (  # tensors indexed by hand: no DataLoader
            (IMPORTS, PARAMS, DATA.replace("loader = DataLoader", "pairs = list"),
             "for i in range(3):\n    loss = model(x[i]).sum()\n    loss.backward()"),
            "cell 4 (In [4]) line 1: the loop does not iterate a `DataLoader`",
        ),
        (  # a DataLoader exists, the loop iterates something else
            (IMPORTS, PARAMS, DATA, "for xb in [x]:\n    loss = model(xb).sum()\n"
             "    loss.backward()"),
            "cell 4 (In [4]) line 1: the loop does not iterate a DataLoader (loader)",
        ),
        ((IMPORTS, "x = 1"), "no `loss.backward()` in the kept code"),
    ],
)  # fmt: skip
def test_unrecognizable_loop_is_refused(tmp_path: Path, cells: tuple[str, ...], message: str):
    with pytest.raises(PromoteError) as err:
        promote(_notebook(tmp_path, *cells), dry_run=True, fabric=True)
    assert message in str(err.value)


def test_fabric_refuses_a_lab_notebook(tmp_path: Path):
    nb = write_notebook(tmp_path / "lab.ipynb", numbered(HEAD, MODEL, LAB, FIT))
    with pytest.raises(PromoteError, match=r"--fabric rewrites plain PyTorch loops; cell 4"):
        promote(nb, dry_run=True, fabric=True)


@pytest.mark.slow
def test_fabric_script_one_process_matches_and_two_processes_learn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    nb = _notebook(tmp_path, IMPORTS, PARAMS, DATA, LOOP)
    promote(nb, tmp_path / "plain.py")
    promote(nb, tmp_path / "fab.py", fabric=True)
    plain = run_script(tmp_path / "plain.py", cwd=tmp_path)
    one = run_script(tmp_path / "fab.py", "--accelerator", "cpu", cwd=tmp_path)
    epochs = [line for line in one.splitlines() if line.startswith("epoch ")]
    assert epochs == plain.splitlines()  # one CPU process, fp32: the same digits

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # two processes on a small machine
    two = run_script(tmp_path / "fab.py", "--accelerator", "cpu", "--devices", "2",
                     "--strategy", "ddp", "--epochs", "4", cwd=tmp_path)  # fmt: skip
    assert "distributed_backend=gloo" in two
    # each rank prints its own lines (its half of the data); their output may share a line
    found = re.findall(r"epoch (\d+) loss (\d+\.\d{8})", two)
    assert len(found) == 8, two  # 4 epochs x 2 ranks
    by_epoch: dict[int, list[float]] = {}
    for epoch, loss in found:
        by_epoch.setdefault(int(epoch), []).append(float(loss))
    first, last = sum(by_epoch[0]) / 2, sum(by_epoch[3]) / 2
    assert last < first / 4, (first, last)

    # under torchrun the same script joins torchrun's processes: the same per-rank losses
    port = str(_free_port())
    torchrun = [str(Path(sys.executable).with_name("torchrun")), "--nproc-per-node", "2",
                "--master-addr", "127.0.0.1", "--master-port", port]  # fmt: skip
    done = subprocess.run(
        [*torchrun, "fab.py", "--accelerator", "cpu", "--devices", "2", "--strategy", "ddp",
         "--epochs", "4"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    under_torchrun = re.findall(r"epoch (\d+) loss (\d+\.\d{8})", done.stdout + done.stderr)
    assert sorted(under_torchrun) == sorted(found)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
