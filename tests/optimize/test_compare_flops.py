"""Every compare row states achieved FLOP/s: its step's FLOPs (as FlopCounterMode counts
them) over its measured median step time; MFU only where a device peak is known."""

from __future__ import annotations

import copy
import statistics

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from labkit._format import fmt_count
from labkit.optimize import Bench, Recipe, compare
from labkit.optimize.apply import apply
from labkit.optimize.step import RecipeStep

RECIPES = {
    "bf16": Recipe(precision="bf16-mixed"),
    "ckpt": Recipe(checkpoint=("blocks.*",)),  # recomputes the blocks' forward in backward
}


def _reference(model: torch.nn.Module, recipe: Recipe, x: torch.Tensor, mode: str) -> int:
    """FlopCounterMode's count of one step of ``recipe`` on a copy of ``model``."""
    step = RecipeStep(apply(copy.deepcopy(model), recipe), recipe, mode=mode)
    with FlopCounterMode(display=False) as counter:
        step(x, seed=0)
    return int(counter.get_total_flops())


def _check_rates(cmp, model, x, recipes) -> None:  # type: ignore[no-untyped-def]
    text = cmp.summary()
    head = text.splitlines()[1].split()
    assert "FLOP/s" in head and "MFU" not in head  # no device peak on a CPU
    for row in cmp.results:
        assert row.error is None, row.error
        assert row.flops == _reference(model, recipes[row.label], x, cmp.mode)
        assert row.step_time == statistics.median(row.step_times)
        assert row.flops_per_s == pytest.approx(row.flops / row.step_time, rel=1e-12)
        assert row.mfu is None and "no MFU on cpu" in row.utilization
        assert row.utilization.startswith(f"achieved {fmt_count(row.flops_per_s)}FLOP/s")
        line = next(ln for ln in text.splitlines() if ln.startswith(row.label + " "))
        assert f"{fmt_count(row.flops_per_s)}FLOP/s" in line
    assert f"- FLOP/s ({cmp.baseline}): achieved" in text


def test_every_train_row_has_its_flops_per_second(mlp, x):
    before = {k: v.clone() for k, v in mlp.state_dict().items()}
    cmp = compare(mlp, x, RECIPES, steps=3, warmup=1, budget_s=1.0, drift=False)
    _check_rates(cmp, mlp, x, {"fp32": Recipe(), **RECIPES})
    # checkpointing recomputes the blocks in backward: its own step's FLOPs, more of them
    assert cmp.result("ckpt").flops > cmp.result("fp32").flops
    assert "ckpt count other FLOPs" in cmp.flops_note()
    assert all(torch.equal(before[k], v) for k, v in mlp.state_dict().items())
    assert {"flops", "flops_per_s", "mfu", "utilization"} <= set(cmp.rows()[0])


def test_inference_flops_by_arithmetic(mlp, x):
    cmp = compare(
        mlp,
        x,
        {"bf16": RECIPES["bf16"]},
        mode="inference",
        steps=3,
        warmup=1,
        budget_s=1.0,
        drift=False,
        memory=False,
    )
    _check_rates(cmp, mlp, x, {"fp32": Recipe(), **RECIPES})
    # three Linear layers, 2 FLOPs per multiply-add: 2 * batch * (32*64 + 64*64 + 64*4)
    assert cmp.result("fp32").flops == 2 * 8 * (32 * 64 + 64 * 64 + 64 * 4)


def test_a_reused_baseline_restates_its_rate_over_its_grown_times(mlp, x):
    bench = Bench(
        mlp, x, mode="inference", steps=3, warmup=1, budget_s=1.0, drift=False, memory=False
    )
    first = bench.compare(RECIPES["bf16"]).result("fp32")
    again = bench.compare(Recipe(matmul_precision="medium")).result("fp32")
    assert len(again.step_times) > len(first.step_times) and again.flops == first.flops
    assert again.flops_per_s == pytest.approx(again.flops / again.step_time, rel=1e-12)
    assert f"median of {len(again.step_times)} timed steps" in again.utilization


def test_a_step_of_ops_without_a_formula_says_so(mlp, x):
    pytest.importorskip("torchao")
    cmp = compare(
        mlp.eval(),
        x,
        {"int8": Recipe(quantization="int8-dynamic")},
        mode="inference",
        steps=3,
        warmup=1,
        budget_s=1.0,
        drift=False,
        memory=False,
    )
    row = cmp.result("int8")
    assert row.error is None, row.error
    # torchao's dynamic int8 matmul (aten._int_mm) has no FlopCounterMode formula
    assert row.flops == 0 and row.flops_per_s is None and row.mfu is None
    assert "no FLOPs counted in int8's step" in row.utilization
    assert "_int_mm" in row.utilization
    line = next(ln for ln in cmp.summary().splitlines() if ln.startswith("int8 "))
    assert "FLOP/s" not in line
