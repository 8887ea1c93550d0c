"""A Lab notebook's parameters cell becomes the promoted script's options, beside the fit
options; a name that is also a fit option stays a fit option only."""

from __future__ import annotations

import ast

from labkit.promote import promote
from tests.promote._notebooks import numbered, write_notebook
from tests.promote.conftest import run_script

CELLS = [
    "import torch\nfrom torch import nn\nimport labkit",
    "seed = 3\nhidden = 8\nuse_bias = True\nsizes = [4, 1]",
    "torch.manual_seed(0)\nx = torch.randn(32, 4)\ny = x.sum(1, keepdim=True)\n"
    "train = torch.utils.data.TensorDataset(x, y)",
    "model = nn.Sequential(nn.Linear(sizes[0], hidden, bias=use_bias), nn.Tanh(), "
    "nn.Linear(hidden, sizes[1]))\n"
    "lab = labkit.Lab(model, train, loss=nn.functional.mse_loss, batch_size=16)",
    'lab.fit(max_epochs=1, seed=seed, logdir="runs/nb", dashboard=False)',
    "with open('seen.txt', 'w') as f:\n"
    "    f.write(f'HIDDEN {hidden} BIAS {use_bias} SIZES {sizes} SEED {seed}')",
]


def test_parameters_are_options_and_a_fit_option_name_is_left_to_fit(tmp_path):
    nb = write_notebook(tmp_path / "nb.ipynb", numbered(*CELLS, tags={2: ("parameters",)}))
    script = tmp_path / "nb.py"
    promote(nb, script)
    source = script.read_text()
    ast.parse(source)
    assert "# %% cell 2 (In [2]): parameters (command-line options override them)" in source
    shown = run_script(script, "--help", cwd=tmp_path)
    for flag in ("--hidden HIDDEN", "--use-bias, --no-use-bias", "--sizes SIZES", "--seed SEED"):
        assert flag in shown, flag
    assert shown.count("--seed") == 2  # once in usage, once in the list: the fit option only
    run_script(
        script,
        "--hidden",
        "4",
        "--no-use-bias",
        "--sizes",
        "[4, 1]",
        "--seed",
        "5",
        "--logdir",
        "runs/s",
        cwd=tmp_path,
    )
    # the parameters changed the model; --seed went to the fit (the notebook's seed stays)
    seen = (tmp_path / "seen.txt").read_text()
    assert seen == "HIDDEN 4 BIAS False SIZES [4, 1] SEED 3"
    assert model_width(tmp_path / "runs" / "s") == 4


def model_width(logdir):
    import torch

    state = torch.load(logdir / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]
    weights = [v for k, v in state.items() if k.endswith("0.weight")]
    assert not any(k.endswith("0.bias") for k in state), sorted(state)  # --no-use-bias
    return weights[0].shape[0]
