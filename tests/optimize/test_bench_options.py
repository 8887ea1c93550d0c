"""compare() is a Bench used once: both take BenchOptions' settings, written once (their
signatures and Args are generated from its fields)."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

from labkit.optimize import Bench, BenchOptions, Recipe, compare

FIELDS = [f.name for f in dataclasses.fields(BenchOptions)]


@pytest.mark.parametrize("call", [compare, Bench], ids=["compare", "Bench"])
def test_signature_and_docs_list_every_setting(call: object) -> None:
    params = inspect.signature(call).parameters  # type: ignore[arg-type]
    for name in FIELDS:
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[name].default == BenchOptions.__dataclass_fields__[name].default
        assert f"{name}: {BenchOptions.help(name)[:30]}" in " ".join(call.__doc__.split())  # type: ignore[union-attr]
    assert "{bench_options}" not in call.__doc__  # type: ignore[operator]


def test_options_or_keywords_give_the_same_bench() -> None:
    model, x = torch.nn.Linear(4, 2), torch.randn(3, 4)
    by_options = Bench(model, x, BenchOptions(mode="inference", steps=4, budget_s=1.0))
    by_keywords = Bench(model, x, mode="inference", steps=4, budget_s=1.0)
    assert by_options.options == by_keywords.options
    assert repr(by_options) == repr(by_keywords)
    assert repr(by_options.options) == "BenchOptions(mode='inference', steps=4, budget_s=1.0)"
    both = Bench(model, x, BenchOptions(mode="inference"), steps=4)  # keywords override
    assert (both.options.mode, both.options.steps) == ("inference", 4)


def test_an_unknown_setting_names_the_closest_one() -> None:
    model, x = torch.nn.Linear(4, 2), torch.randn(3, 4)
    with pytest.raises(TypeError, match=r"compare\(\) got an unexpected .* 'stpes'.*'steps'"):
        compare(model, x, Recipe(), stpes=3)
    with pytest.raises(TypeError, match=r"Bench\(\) takes keyword arguments .* got function"):
        Bench(model, x, lambda out: out.sum())  # type: ignore[arg-type]
