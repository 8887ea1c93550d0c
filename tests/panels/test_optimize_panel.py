"""OptimizePanel from Python: recipe binding, validation, background measure, apply."""

import threading

import pytest
import torch

from labkit.optimize import Recipe
from labkit.panels import OptimizePanel
from tests.optimize.conftest import MLP


@pytest.fixture
def mlp() -> MLP:
    torch.manual_seed(0)
    return MLP()


class Lab:
    recipe = Recipe()


def test_recipe_round_trip_and_repr(mlp):
    panel = OptimizePanel(mlp, torch.randn(4, 32))
    assert panel.recipe == Recipe()
    panel.recipe = Recipe(precision="bf16-mixed", checkpoint=("blocks.*",))
    assert panel.recipe_state["precision"] == "bf16-mixed"
    assert panel.recipe_state["checkpoint"] == ["blocks.*"]
    assert repr(panel) == (
        "OptimizePanel(recipe=Recipe(precision='bf16-mixed', checkpoint=('blocks.*',)), "
        "mode='train', model=MLP)"
    )
    names = [f["name"] for f in panel.choices["fields"]]
    assert sorted(names) == sorted(Recipe().to_dict())  # a control for every Recipe field
    quant = next(f for f in panel.choices["fields"] if f["name"] == "quantization")
    assert quant["options"][0]["value"] == "none" and quant["modes"] == ["train", "inference"]
    defaults = {f["name"]: f["default"] for f in panel.choices["fields"]}
    assert defaults == {
        **Recipe().to_dict(),
        "quantization": "none",
        "compile": "none",
        "export": "none",
    }


def test_front_end_state_is_validated(mlp):
    panel = OptimizePanel(mlp, torch.randn(4, 32), recipe=Recipe(precision="bf16-mixed"))
    # what the browser sends when a dropdown changes
    panel.recipe_state = {**panel.recipe_state, "quantization": "int8-dynamic"}
    assert panel.recipe.quantization == "int8-dynamic" and panel.error == ""
    panel.recipe_state = {**panel.recipe_state, "precision": "fp8"}
    assert "Recipe.precision must be one of" in panel.error
    assert panel.recipe == Recipe(precision="bf16-mixed", quantization="int8-dynamic")


def test_measure_runs_in_background_and_apply(mlp):
    lab = Lab()
    got = []
    panel = OptimizePanel(
        mlp.eval(),
        torch.randn(4, 32),
        mode="inference",
        steps=2,
        warmup=0,
        target=lab,
        on_apply=got.append,
        drift=False,
        memory=False,
    )
    panel.recipe = Recipe(quantization="int8-weight-only")
    test_thread, gate, updates = threading.get_ident(), threading.Event(), []

    def hold(change):  # the worker waits here at its first progress update until released
        if threading.get_ident() != test_thread:
            updates.append(change["new"])
            gate.wait(timeout=60)

    panel.observe(hold, "progress")
    thread = panel.measure()
    # measure() returned while the work cannot finish (it must pass the gate): background
    assert panel.running and thread.is_alive()
    gate.set()
    thread.join(timeout=120)
    assert updates and updates[-1] == 1.0  # progress came from the worker thread
    assert not panel.running and panel.error == ""
    assert [r["label"] for r in panel.results] == ["fp32", "int8-weight-only"]
    assert panel.results[1]["speedup"] > 0 and panel.progress == 1.0
    assert panel.comparison.result("int8-weight-only").cosine > 0.99
    assert panel.apply() == Recipe(quantization="int8-weight-only")
    assert lab.recipe == panel.recipe and got == [panel.recipe]
    assert panel.applied_label == "int8-weight-only"


def test_bad_input():
    with pytest.raises(ValueError, match="needs a model and a batch"):
        OptimizePanel().measure()
    with pytest.raises(ValueError, match="must be 'train' or 'inference'"):
        OptimizePanel(mode="eval")
    with pytest.raises(TypeError, match="needs an object with a 'recipe' attribute"):
        OptimizePanel(target=object())
    with pytest.raises(TypeError, match=r"panel\.recipe must be a Recipe"):
        OptimizePanel().recipe = {"precision": "32"}


def test_budget_ends_the_rounds_and_rows_show_the_spread(mlp):
    import statistics

    from labkit.panels._measure_budget import spread

    with pytest.raises(ValueError, match="budget_s"):
        OptimizePanel(mlp, torch.randn(4, 32), budget_s=0)
    x = torch.randn(4, 32)
    panel = OptimizePanel(
        mlp.eval(),
        x,
        mode="inference",
        recipe=Recipe(channels_last=True),
        budget_s=0.3,
        warmup=0,
        drift=False,
        memory=False,
    )
    panel.measure().join(timeout=120)
    assert panel.error == "", panel.error
    cmp = panel.comparison
    assert cmp.budget_s == 0.3 and cmp.ended_by in ("target", "budget")
    assert cmp.ended_by in panel.status or "budget" in panel.status or "within" in panel.status
    for row, result in zip(panel.results, panel.comparison.results, strict=True):
        times = sorted(result.step_times)
        assert row["step_n"] == len(times) >= cmp.steps
        assert row["step_median"] == pytest.approx(statistics.median(times))
        q = statistics.quantiles(times, n=4, method="inclusive")
        assert (row["step_q1"], row["step_q3"]) == pytest.approx((q[0], q[2]))
        assert row["step_q1"] <= row["step_median"] <= row["step_q3"]
    assert spread([]) == {"step_median": None, "step_q1": None, "step_q3": None, "step_n": 0}


@pytest.mark.parametrize(
    ("mode", "loss", "label"),
    [
        ("train", None, "objective (no loss given: mean of the outputs)"),
        ("train", lambda out: out.sum(), "loss (your loss)"),
        ("inference", None, ""),
    ],
)
def test_loss_column_says_what_it_holds(mlp, mode, loss, label):
    assert OptimizePanel(mlp, torch.randn(4, 32), mode=mode, loss=loss).loss_label == label


def test_rows_accumulate_across_measure_with_one_baseline_and_clear(mlp):
    panel = OptimizePanel(
        mlp, torch.randn(4, 32), steps=3, warmup=0, drift=False, memory=False, speedup_target=None
    )
    panel.recipe = Recipe(precision="bf16-mixed")
    panel.measure().join(timeout=120)
    base_first = panel.comparison.result("fp32").first_call
    panel.recipe = Recipe(checkpoint=("blocks.*",))
    panel.measure().join(timeout=120)
    assert panel.error == "", panel.error
    assert [r["label"] for r in panel.results] == ["fp32", "bf16-mixed", "ckpt(blocks.*)"]
    assert panel.comparison.result("fp32").first_call == base_first  # measured once
    row = panel.results[2]
    assert row["rounds"] == 3 and row["speedup_low"] <= row["speedup"] <= row["speedup_high"]
    panel.clear()
    assert panel.results == [] and panel.status == "cleared"
    panel.mode = "inference"  # another mode: another baseline
    panel.measure().join(timeout=120)
    assert [r["label"] for r in panel.results] == ["fp32", "ckpt(blocks.*)"]
    assert panel.comparison.mode == "inference"


def test_the_next_suggestion_is_advise_in_figures_and_can_be_measured():
    from labkit.panels._optimize_fields import suggestion_text
    from tests.optimize.conftest import TinyTransformer

    torch.manual_seed(0)
    model = TinyTransformer(d=16, n_blocks=4)
    panel = OptimizePanel(
        model,
        torch.randn(4, 16, 16),
        steps=2,
        warmup=0,
        drift=False,
        memory=False,
        speedup_target=None,
    )
    panel.measure().join(timeout=120)
    trace, found = panel._advice["train"]
    first = found[0].recipe()
    assert panel.suggestion.endswith(": Measure it") and panel._suggested == first
    # 4 blocks hold nearly all saved activations: a checkpointing suggestion, in figures
    ck = next(s for s in found if "checkpoint" in s.change)
    text = suggestion_text(ck, trace)
    assert (
        text.startswith("checkpointing Block (blocks.")
        and "+1 more) would cut the peak by ~" in text
    )
    rows = {r["path"]: r for r in trace.rows()}
    saved = sum(rows[p]["saved_bytes"] for p in ck.where)
    from labkit._format import fmt_bytes

    assert f"~{fmt_bytes(saved)} at ~+" in text
    panel.measure_suggestion().join(timeout=120)
    assert panel.recipe == first
    assert [r["label"] for r in panel.results] == ["fp32", first.label]
    assert first.label not in panel.suggestion  # measured: the next one, or none
