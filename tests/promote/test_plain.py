"""Any notebook: a plain PyTorch loop (no Lab) is promoted into main(), its ``parameters``
cell becomes command-line options, and the script prints the notebook's losses exactly."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from labkit.promote import promote, read_notebook
from labkit.promote.plain import parameters_of
from tests.promote._notebooks import code, numbered, write_notebook
from tests.promote.conftest import run_script

LOOP_CELLS = [
    "import torch\nfrom torch import nn\nimport torch.nn.functional as F",
    # parameters (tagged): typed options
    'lr = 0.05\nsteps = 12\nseed = 0\nname = "loop"\nshuffle = True\nwidths = [8, 8]',
    # data and model; ';' joins statements that must each run once
    "torch.manual_seed(seed); x = torch.randn(64, 4)\n"
    "y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])\n"
    "model = nn.Sequential(nn.Linear(4, widths[0]), nn.Tanh(), nn.Linear(widths[1], 1))\n"
    "model",
    # the plain loop: draws indices from the global RNG every step
    "opt = torch.optim.SGD(model.parameters(), lr=lr)\n"
    "for step in range(steps):\n"
    "    i = torch.randint(0, 64, (16,)); j = torch.randperm(16) if shuffle else None\n"
    "    opt.zero_grad(); loss = F.mse_loss(model(x[i]), y[i]); loss.backward(); opt.step()\n"
    '    print(f"{name} step {step} loss {loss.item():.10f}")',
    # a displayed result (dropped) and a print (an effect: kept)
    "loss\nprint(model)",
]


def _printed(nb_path: Path, cell_number: int) -> str:
    cell = read_notebook(nb_path).cells[cell_number - 1]
    return "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")


@pytest.mark.slow
def test_plain_loop_prints_the_notebook_losses(tmp_path: Path):
    from labkit.promote import run_notebook

    cells = [
        code(src, None, tags=("parameters",) if i == 2 else ())
        for i, src in enumerate(LOOP_CELLS, 1)
    ]
    notebook = write_notebook(tmp_path / "loop.ipynb", cells)
    executed = run_notebook(notebook, {"lr": 0.1}, timeout=300)  # injected after cell 2
    notebook_lines = _printed(executed, 5)  # cell 4 moved down by the injected cell
    assert notebook_lines.count("loop step") == 12
    model_lines = _printed(executed, 6)
    assert model_lines.startswith("Sequential(")

    result = promote(executed, tmp_path / "loop.py")
    source = result.source
    ast.parse(source)
    assert "    print(model)\n" in source and "    loss\n" not in source
    assert source.count("torch.manual_seed(seed)") == 1 and source.count("x = torch.randn") == 1

    printed = run_script(tmp_path / "loop.py", cwd=tmp_path)
    assert printed == notebook_lines + model_lines  # CPU, fp32, same seed: the same digits

    # the parameters are options typed from the values; the injected lr is the default
    fewer = run_script(tmp_path / "loop.py", "--steps", "3", "--name", "cli", cwd=tmp_path)
    assert fewer.splitlines()[:4] == [
        line.replace("loop step", "cli step") for line in notebook_lines.splitlines()[:3]
    ] + ["Sequential("]
    faster = run_script(tmp_path / "loop.py", "--steps", "2", "--lr", "0.3", cwd=tmp_path)
    first, second = faster.splitlines()[:2]
    assert first == notebook_lines.splitlines()[0]  # same start, then a bigger step
    assert second != notebook_lines.splitlines()[1]
    shown = run_script(tmp_path / "loop.py", "--help", cwd=tmp_path)
    for flag in ("--lr", "--steps", "--seed", "--name", "--shuffle", "--no-shuffle", "--widths"):
        assert flag in shown, flag


def test_parameters_are_typed_from_values(tmp_path: Path):
    nb = write_notebook(
        tmp_path / "p.ipynb",
        [
            code("import os", 1),
            code(LOOP_CELLS[1] + "\ndevice = os.getcwd()", 2, tags=("parameters",)),
            code("lr = 1", 3, tags=("injected-parameters",)),
            code("total = steps * lr", 4),
        ],
    )
    from labkit.promote.analysis import analyze
    from labkit.promote.checks import kept_statements

    params, after, problems = parameters_of(kept_statements(analyze(read_notebook(nb))))
    kinds = {p.name: (p.kind, p.value) for p in params}
    assert kinds == {
        "lr": ("float", 1),
        "steps": ("int", 12),
        "seed": ("int", 0),
        "name": ("str", "loop"),
        "shuffle": ("bool", True),
        "widths": ("literal", [8, 8]),
    }
    assert after is not None and after.source == "lr = 1"  # applied after the injection
    assert [p.name for p in problems] == ["device"]  # not a literal: no option, a warning
    result = promote(nb, tmp_path / "p.py")
    assert any("device is not a literal value" in w for w in result.warnings)
    # the script runs and takes the options
    (tmp_path / "p.py").write_text(
        result.source.replace(
            'if __name__ == "__main__":',
            'def _show():\n    print(total, lr)\n\nif __name__ == "__main__":',
        ).replace("    main()", "    main()\n    _show()")
    )
    assert run_script(tmp_path / "p.py", cwd=tmp_path).split() == ["12", "1"]
    assert run_script(tmp_path / "p.py", "--lr", "0.5", "--steps", "4", cwd=tmp_path).split() == [
        "2.0",
        "0.5",
    ]


def test_semicolon_statement_runs_once_in_the_script(tmp_path: Path):
    nb = write_notebook(
        tmp_path / "s.ipynb",
        numbered(
            "lr = 0.01\nlr *= 10; tag = 1",
            "import functools\n@functools.cache\ndef scale(v):\n    return v * 2\n"
            'note = """keep;\n  this"""; s = scale(lr)',
            'with open("out.json", "w") as f:\n    import json; json.dump([lr, s, note], f)',
        ),
    )
    promote(nb, tmp_path / "s.py")
    run_script(tmp_path / "s.py", cwd=tmp_path)
    lr, s, note = json.loads((tmp_path / "out.json").read_text())
    assert lr == pytest.approx(0.1) and s == pytest.approx(0.2) and note == "keep;\n  this"


def test_star_import_and_future_stay_at_module_level(tmp_path: Path):
    nb = write_notebook(
        tmp_path / "m.ipynb",
        numbered(
            "from __future__ import annotations\nfrom math import *",
            "def area(r: float) -> float:\n    return pi * r ** 2\nvalue = sqrt(area(1) / pi)",
            'open("value.txt", "w").write(repr(value))',
        ),
    )
    source = promote(nb, tmp_path / "m.py").source
    assert source.index("from math import *") < source.index("def main(")
    run_script(tmp_path / "m.py", cwd=tmp_path)
    assert (tmp_path / "value.txt").read_text() == "1.0"
