"""labkit.plan(recipe=...) takes a Recipe (or any PlanRecipe); anything else fails first,
naming what to pass."""

from __future__ import annotations

import pytest
import torch

import labkit
from labkit.optimize import Recipe
from labkit.plan import PlanRecipe


def test_a_recipe_is_a_plan_recipe() -> None:
    assert isinstance(Recipe(precision="bf16-mixed"), PlanRecipe)
    assert not isinstance({"precision": "bf16-mixed"}, PlanRecipe)


@pytest.mark.parametrize(
    ("recipe", "names"),
    [({"precision": "bf16-mixed"}, "Recipe.from_dict"), ("bf16-mixed", "str")],
    ids=["dict", "str"],
)
def test_a_recipe_that_is_not_one_names_the_fix(recipe: object, names: str) -> None:
    model = torch.nn.Linear(4, 2)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(TypeError, match=r"labkit\.optimize\.Recipe") as err:
        labkit.plan(model, torch.Size([3, 4]), recipe=recipe)  # type: ignore[arg-type]
    assert names in str(err.value)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
