"""Recipe precision reaches the Trainer: bf16-mixed trains on CPU under autocast, and the
checkpoint carries the Recipe back."""

from __future__ import annotations

import math

import torch

from labkit.optimize import Recipe
from labkit.train import Lab
from labkit.train.checkpoint import load_checkpoint, recipe_of
from tests.train._helpers import LOSS, datasets, mlp


def test_bf16_mixed_fit_on_cpu(tmp_path):
    model = mlp()
    seen: list[tuple[bool, torch.dtype, torch.dtype]] = []

    def hook(module, args, out):  # copied with the model by the Recipe's apply
        seen.append((module.training, args[0].dtype, out.dtype))

    model[0].register_forward_hook(hook)
    recipe = Recipe(precision="bf16-mixed")
    lab = Lab(model, datasets(64), loss=LOSS, recipe=recipe, batch_size=16, logdir=tmp_path)
    run = lab.fit(max_epochs=1, seed=0, dashboard=False, dry_run=False)

    assert run.status == "finished"
    assert len(run.losses) == 3 and all(math.isfinite(x) for x in run.losses)
    train = [s for s in seen if s[0]]
    assert len(train) == 3
    # fp32 inputs, bf16 outputs: the Linear ran under CPU autocast
    assert all(x == torch.float32 and out == torch.bfloat16 for _, x, out in train), train
    assert all(p.dtype == torch.float32 for p in lab.model.parameters())  # master weights

    ckpt = load_checkpoint(tmp_path / "checkpoints" / "last.ckpt")
    assert Recipe.from_dict(recipe_of(ckpt)) == recipe
    assert run.config["recipe"] == recipe.to_dict()
