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


# the loop as lecture code writes it: a device, clipping, a validation loss per epoch
DEVICE_PARAMS = "lr = 0.05\nepochs = 3\ndevice = 'cpu'"
VAL_DATA = DATA.replace(
    "loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)",
    "loader = DataLoader(TensorDataset(x[:192], y[:192]), batch_size=32, shuffle=True)\n"
    "val_loader = DataLoader(TensorDataset(x[192:], y[192:]), batch_size=32)",
).replace("nn.Linear(16, 1))", "nn.Linear(16, 1)).to(device)")
VAL_LOOP = (
    "for epoch in range(epochs):\n"
    "    total = 0.0\n"
    "    for xb, yb in loader:\n"
    "        xb, yb = xb.to(device), yb.to(device)\n"
    "        opt.zero_grad(); loss = nn.functional.mse_loss(model(xb), yb)\n"
    "        loss.backward()\n"
    "        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
    "        opt.step()\n"
    "        total += loss.item()\n"
    "    val_loss = 0.0\n"
    "    with torch.no_grad():\n"
    "        for xb, yb in val_loader:\n"
    "            val_loss += nn.functional.mse_loss(model(xb), yb).item() / len(val_loader)\n"
    "    print(f'epoch {epoch} loss {total / len(loader):.8f} val {val_loss:.8f}')"
)


def _notebook(tmp_path: Path, *cells: str) -> Path:
    return write_notebook(tmp_path / "loop.ipynb", numbered(*cells, tags={2: ("parameters",)}))


def test_rewrite_adds_only_what_fabric_needs(tmp_path: Path):
    source = promote(
        _notebook(tmp_path, IMPORTS, PARAMS, DATA, LOOP), dry_run=True, fabric=True
    ).source
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
            (
                IMPORTS,
                PARAMS,
                DATA.replace("opt = torch.optim.SGD(model.parameters(), lr=lr)", "w = 1"),
                "for xb, yb in loader:\n    loss = model(xb).sum()\n    loss.backward()",
            ),
            "cell 4 (In [4]) line 1: no `opt = torch.optim.<Optimizer>(model.parameters()",
        ),
        (  # tensors indexed by hand: no DataLoader
            (
                IMPORTS,
                PARAMS,
                DATA.replace("loader = DataLoader", "pairs = list"),
                "for i in range(3):\n    loss = model(x[i]).sum()\n    loss.backward()",
            ),
            "cell 4 (In [4]) line 1: the loop does not iterate a `DataLoader`",
        ),
        (  # a DataLoader exists, the loop iterates something else
            (
                IMPORTS,
                PARAMS,
                DATA,
                "for xb in [x]:\n    loss = model(xb).sum()\n    loss.backward()",
            ),
            "cell 4 (In [4]) line 1: the loop does not iterate a DataLoader (loader)",
        ),
        ((IMPORTS, "x = 1"), "no `loss.backward()` in the kept code"),
    ],
)
def test_unrecognizable_loop_is_refused(tmp_path: Path, cells: tuple[str, ...], message: str):
    with pytest.raises(PromoteError) as err:
        promote(_notebook(tmp_path, *cells), dry_run=True, fabric=True)
    assert message in str(err.value)


def test_rank_zero_prints_clipping_devices_and_the_val_loss(tmp_path: Path):
    source = promote(
        _notebook(tmp_path, IMPORTS, DEVICE_PARAMS, VAL_DATA, VAL_LOOP), dry_run=True, fabric=True
    ).source
    ast.parse(source)
    lines = [line.strip() for line in source.splitlines()]
    assert "fabric.print(f'epoch {epoch} loss {total / len(loader):.8f} val {val_loss:.8f}')" in (
        lines
    )
    assert "print(f'epoch" not in source.replace("fabric.print(f'epoch", "")
    assert "fabric.clip_gradients(model, opt, max_norm=1.0)" in lines
    assert "xb, yb = fabric.to_device(xb), fabric.to_device(yb)" in lines
    assert "val_loader = fabric.setup_dataloaders(val_loader)  # labkit promote --fabric" in lines
    # reduced once, after the evaluation loop (not after 'val_loss = 0.0', not per batch)
    reduce = "val_loss = _mean_over_processes(val_loss)  # labkit promote --fabric"
    assert lines.count(reduce) == 1
    assert source.index("val_loss += ") < source.index(reduce) < source.index("fabric.print(")
    assert "def _mean_over_processes(value):" in source


def test_clipping_another_model_is_refused(tmp_path: Path):
    loop = VAL_LOOP.replace("clip_grad_norm_(model.parameters()", "clip_grad_norm_(params")
    data = VAL_DATA + "\nparams = list(model.parameters())"
    nb = _notebook(tmp_path, IMPORTS, DEVICE_PARAMS, data, loop)
    with pytest.raises(PromoteError, match=r"cell 4 \(In \[4\]\) line 1: clip the gradients of"):
        promote(nb, dry_run=True, fabric=True)


def test_fabric_refuses_a_lab_notebook(tmp_path: Path):
    nb = write_notebook(tmp_path / "lab.ipynb", numbered(HEAD, MODEL, LAB, FIT))
    with pytest.raises(PromoteError, match=r"--fabric rewrites plain PyTorch loops; cell 4"):
        promote(nb, dry_run=True, fabric=True)


@pytest.mark.slow
def test_fabric_script_one_process_matches_and_two_processes_learn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    nb = _notebook(tmp_path, IMPORTS, DEVICE_PARAMS, VAL_DATA, VAL_LOOP)
    promote(nb, tmp_path / "plain.py")
    promote(nb, tmp_path / "fab.py", fabric=True)
    plain = run_script(tmp_path / "plain.py", cwd=tmp_path)
    one = run_script(tmp_path / "fab.py", "--accelerator", "cpu", cwd=tmp_path)
    epochs = [line for line in one.splitlines() if line.startswith("epoch ")]
    assert epochs == plain.splitlines()  # one CPU process, fp32: the same digits

    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # two processes on a small machine
    (tmp_path / "count_threads.py").write_text(COUNT_THREADS_AT_EXIT)
    two = run_script(
        tmp_path / "count_threads.py",
        "fab.py",
        "--accelerator",
        "cpu",
        "--devices",
        "2",
        "--strategy",
        "ddp",
        "--epochs",
        "4",
        cwd=tmp_path,
    )
    assert "distributed_backend=gloo" in two
    # rank 0 reaches interpreter shutdown with no thread left but Python's own (Lightning's
    # daemon child-process observer): the process group's gloo threads were joined while the
    # interpreter was whole; left to shutdown they once aborted a rank that trained fine
    os_threads, py_threads = map(
        int, re.findall(r"threads at exit: (\d+) os, (\d+) python", two)[0]
    )
    assert os_threads == py_threads, two
    # rank 0 prints (its half of the data's loss, the val loss over both ranks' halves)
    found = re.findall(r"epoch (\d+) loss (\d+\.\d{8}) val (\d+\.\d{8})", two)
    assert [int(e) for e, _, _ in found] == [0, 1, 2, 3], two  # once per epoch, not per rank
    first, last = float(found[0][2]), float(found[3][2])
    assert last < first * 0.8, (first, last)

    # under torchrun the same script joins torchrun's processes: the same per-rank losses
    port = str(_free_port())
    torchrun = [
        str(Path(sys.executable).with_name("torchrun")),
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        port,
    ]
    done = subprocess.run(
        [
            *torchrun,
            "fab.py",
            "--accelerator",
            "cpu",
            "--devices",
            "2",
            "--strategy",
            "ddp",
            "--epochs",
            "4",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    under_torchrun = re.findall(
        r"epoch (\d+) loss (\d+\.\d{8}) val (\d+\.\d{8})", done.stdout + done.stderr
    )
    assert under_torchrun == found


# runs a script as ``python script.py args`` would, and counts the process's threads (the
# kernel's and Python's) from an exit handler registered first, so it runs last
COUNT_THREADS_AT_EXIT = """
import atexit, os, runpy, sys, threading

def _count():
    tasks = len(os.listdir("/proc/self/task"))
    print(f"threads at exit: {tasks} os, {threading.active_count()} python", file=sys.stderr)

atexit.register(_count)
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
