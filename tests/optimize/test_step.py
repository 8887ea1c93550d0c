import pytest
import torch
from torch import nn

from labkit.optimize import Recipe, apply
from labkit.optimize.step import RecipeStep


def test_fp16_step_goes_through_scaler_step_and_update(mlp, x):
    recipe = Recipe(precision="16-mixed")
    model = apply(mlp, recipe)
    step = RecipeStep(model, recipe, mode="train", loss=lambda out: out.float().sum() * 1e35)
    assert repr(step) == "RecipeStep(16-mixed, mode='train', SGD, GradScaler)"
    before = {k: v.clone() for k, v in model.state_dict().items()}
    scale = step.scaler.get_scale()
    step(x, seed=0)
    # the scaled loss overflows: scaler.step skips the update, scaler.update halves the scale
    assert step.scaler.get_scale() == scale / 2
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # a finite step moves the weights and keeps the scale
    step.loss_fn = lambda out: out.float().mean()
    _, value = step(x, seed=0)
    assert isinstance(value, float) and step.scaler.get_scale() == scale / 2
    assert not torch.equal(before["head.weight"], model.head.weight)


def test_fp32_step_equals_a_hand_written_sgd_step(mlp, x):
    ref = apply(mlp)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    ref(x).float().mean().backward()
    opt.step()
    step = RecipeStep(apply(mlp), Recipe(), mode="train", lr=0.1)
    assert step.scaler is None
    step(x)
    assert torch.equal(step.model.head.weight, ref.head.weight)


def test_inference_step_and_hold_random():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5)).train()
    step = RecipeStep(model, Recipe(), mode="inference")
    x = torch.randn(4, 8)
    held, _ = step(x, hold_random=True)
    assert torch.equal(held, model[0](x))  # dropout off, Linear as it is
    drawn, _ = step(x, seed=1)
    assert (drawn == 0).any() and model[1].training  # restored after the held step


def test_bad_mode(mlp):
    with pytest.raises(ValueError, match=r"RecipeStep\(mode=...\) must be one of"):
        RecipeStep(mlp, Recipe(), mode="eval")
