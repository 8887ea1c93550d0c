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


class _TwoHeads(nn.Module):
    """Two floating-point outputs of different sizes, so a sum and a mean differ."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(4, 7)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.a(x), self.b(x) * 3


def test_compare_and_trace_train_the_same_default_loss():
    """No loss given: a RecipeStep (compare, tune) and labkit.trace back-propagate the same
    loss, so their gradients agree."""
    import copy

    import labkit

    torch.manual_seed(0)
    model, x = _TwoHeads(), torch.randn(5, 4)
    traced = copy.deepcopy(model)
    labkit.trace(traced, x, keep_step=True, repeat=0, progress=False)
    step = RecipeStep(copy.deepcopy(model), Recipe(), mode="train", lr=0.0)
    _, value = step(x)
    with torch.no_grad():
        a, b = model(x)
    assert value == pytest.approx(float(a.mean() + b.mean()))
    for (name, p), q in zip(traced.named_parameters(), step.model.parameters(), strict=True):
        assert p.grad is not None and q.grad is not None, name
        torch.testing.assert_close(p.grad, q.grad, msg=name)
