import json

import pytest

from labkit.optimize import Recipe, RecipeError


def test_default_repr_and_label():
    assert repr(Recipe()) == "Recipe()"
    assert Recipe().label == "fp32"
    assert Recipe().is_default


def test_repr_shows_only_changes():
    r = Recipe(precision="bf16-mixed", checkpoint=("layers.*",), channels_last=True)
    assert repr(r) == "Recipe(precision='bf16-mixed', checkpoint=('layers.*',), channels_last=True)"
    assert r.label == "bf16-mixed + ckpt(layers.*) + channels_last"


@pytest.mark.parametrize(
    "recipe",
    [
        Recipe(),
        Recipe(precision="16-mixed", compile="default", matmul_precision="high"),
        Recipe(quantization="int8-dynamic", fuse_conv_bn=True),
        Recipe(quantization="int8-qat", checkpoint=("a.b", "Block")),
    ],
)
def test_round_trip(recipe):
    assert Recipe.from_dict(recipe.to_dict()) == recipe
    assert Recipe.from_json(recipe.to_json()) == recipe
    data = json.loads(recipe.to_json())
    assert data["schema"] == "labkit.recipe" and data["version"] == 1


def test_frozen_and_replace():
    r = Recipe()
    with pytest.raises(AttributeError):
        r.precision = "bf16-mixed"  # type: ignore[misc]
    r2 = r.replace(precision="bf16-mixed")
    assert r2.precision == "bf16-mixed" and r.precision == "32"
    assert r2.changes() == {"precision": "bf16-mixed"}


def test_coercions():
    assert Recipe(checkpoint="layers.0").checkpoint == ("layers.0",)
    assert Recipe(checkpoint=["a", "b"]).checkpoint == ("a", "b")
    assert Recipe(precision=32).precision == "32"
    assert Recipe(quantization="none").quantization is None


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"precision": "bf16"}, "Recipe.precision must be one of '32', 'bf16-mixed', '16-mixed'"),
        ({"quantization": "int4"}, "Recipe.quantization must be one of"),
        ({"compile": "fast"}, "Recipe.compile must be one of"),
        ({"compile": True}, "Recipe.compile must be one of"),
        ({"matmul_precision": "low"}, "Recipe.matmul_precision"),
        ({"checkpoint": ("",)}, "Recipe.checkpoint must be a tuple"),
        ({"checkpoint": (3,)}, "Recipe.checkpoint must be a tuple"),
        ({"channels_last": "yes"}, "Recipe.channels_last must be True or False"),
        ({"quantization": "int8-dynamic", "precision": "16-mixed"}, "use precision='32' or"),
    ],
)
def test_bad_values_name_the_field(kwargs, needle):
    with pytest.raises(RecipeError, match=None) as err:
        Recipe(**kwargs)
    assert needle in str(err.value)


def test_unknown_fields():
    with pytest.raises(RecipeError, match=r"unknown Recipe field\(s\) \['precison'\]"):
        Recipe.from_dict({"precison": "bf16-mixed"})
    with pytest.raises(RecipeError, match="unknown Recipe field"):
        Recipe().replace(amp=True)
    with pytest.raises(RecipeError, match="not valid JSON"):
        Recipe.from_json("{")
    with pytest.raises(RecipeError, match="newer than this labkit"):
        Recipe.from_json(json.dumps({"version": 99}))
    with pytest.raises(RecipeError, match="needs a dict"):
        Recipe.from_dict(["precision"])  # type: ignore[arg-type]
