"""Fault table, promote: a call that changes a module is kept (issue 35, item 7).

``model.to(device)`` and ``model.double()`` move and convert an ``nn.Module`` in place;
promote used to drop them as an "expression without effect" and a "displayed result", as
if they were on a tensor, and the script failed with ``mat1 and mat2 must have the same
dtype``. The same calls on names the notebook binds only to tensors stay left out.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from labkit.promote import analyze, promote, read_notebook
from tests.promote._notebooks import code, write_notebook

_MODULE_REPR = "Linear(in_features=2, out_features=1, bias=True)"


def _result(count: int, text: str) -> dict:
    return {
        "output_type": "execute_result",
        "execution_count": count,
        "metadata": {},
        "data": {"text/plain": text},
    }


CELLS = [
    code('device = "cpu"', 1, tags=("parameters",)),
    code("import torch\nfrom torch import nn\ntorch.manual_seed(0)", 2),
    code("model = nn.Linear(2, 1)\nmodel.to(device)\nmodel.eval()", 3),
    code("model.double()", 4, outputs=[_result(4, _MODULE_REPR)]),
    code(
        "x = torch.ones(3, 2, dtype=torch.float64, device=device)\nw = torch.ones(2)\n"
        "w.double()\nx.cpu().float().numpy()",
        5,
        outputs=[_result(5, "array(...)")],
    ),
    code("y = model(x)\nprint(y.dtype, y.device.type, tuple(y.shape), model.training)", 6),
]


def _kept(nb: Path) -> set[str]:
    return {
        s.source.strip()
        for plan in analyze(read_notebook(nb)).plans
        for s in plan.statements
        if s.role == "code"
    }


def test_calls_that_change_a_module_are_kept_and_tensor_conversions_are_not(
    tmp_path: Path,
) -> None:
    nb = write_notebook(tmp_path / "dtype.ipynb", CELLS)
    kept = _kept(nb)
    for call in ("model.to(device)", "model.eval()", "model.double()"):
        assert call in kept, call
    # the same method names on what the notebook binds only to tensors change nothing
    assert "w.double()" not in kept and "x.cpu().float().numpy()" not in kept
    reasons = {
        s.source.strip(): s.reason
        for plan in analyze(read_notebook(nb)).plans
        for s in plan.statements
    }
    assert reasons["w.double()"] == "expression without effect"
    assert reasons["x.cpu().float().numpy()"] == "displayed result"


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_the_promoted_script_runs_with_the_dtype_and_device_it_was_given(
    tmp_path: Path, device: str
) -> None:
    nb = write_notebook(tmp_path / "dtype.ipynb", CELLS)
    script = promote(nb).script
    done = subprocess.run(
        [sys.executable, str(script), "--device", device],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == f"torch.float64 {device} (3, 1) False"


def test_a_module_call_inside_a_left_out_statement_is_refused_but_a_plotted_tensor_is_not(
    tmp_path: Path,
) -> None:
    from labkit.promote import PromoteError

    head = code("import torch\nfrom torch import nn\nimport matplotlib.pyplot as plt", 1)
    model = code("model = nn.Linear(2, 1)\nlosses = model(torch.ones(4, 2))", 2)
    plotted = code("plt.plot(losses.cpu())\nplt.plot(model.weight.detach().cpu().numpy())", 3)
    nb = write_notebook(tmp_path / "p.ipynb", [head, model, plotted])
    promote(nb, dry_run=True)  # a plot takes arrays: .cpu() there is on data
    shown = code("display(model.eval())", 3)
    nb = write_notebook(tmp_path / "d.ipynb", [head, model, shown])
    with pytest.raises(PromoteError) as info:
        promote(nb, dry_run=True)
    assert "calls model.eval(), which may draw random numbers or change state" in str(
        info.value.errors[0].message
    )
