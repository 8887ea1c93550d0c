"""A plan against the measured step: peak and categories, FLOPs (FlopCounterMode)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import labkit
from labkit.optimize import Recipe, apply
from labkit.trace._dispatch import EXTRA_FLOP_FORMULAS
from tests.memory.conftest import assert_clean
from tests.plan.models import CNN, GPT, Encoder

OPTIMIZERS = {
    "SGD": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "Adam": lambda ps: torch.optim.Adam(ps),
    "AdamW": lambda ps: torch.optim.AdamW(ps, weight_decay=0.1),
}


def _lm_loss(out: torch.Tensor) -> torch.Tensor:
    target = torch.arange(out.shape[0] * out.shape[1], device=out.device) % out.shape[-1]
    return F.cross_entropy(out.flatten(0, 1), target)


def _case(name: str):
    torch.manual_seed(0)
    if name == "encoder":
        return Encoder(), torch.randn(6, 12, 32), None
    if name == "cnn":
        return CNN(), torch.randn(4, 3, 16, 16), None
    if name == "gat":
        from labkit.gnn import GAT
        from labkit.gnn.datasets import fake

        g = fake(120, 4, num_features=16, avg_degree=4.0)
        return GAT(16, 8, 4, heads=4), (g.x, g.edge_index), None
    return GPT(), torch.randint(0, 100, (3, 24)), _lm_loss


def _flops(model, batch, loss) -> int:
    # labkit's extra formulas (CPU attention, which torch's counter leaves at 0) included
    with FlopCounterMode(display=False, custom_mapping=EXTRA_FLOP_FORMULAS) as fc:
        out = model(*batch) if isinstance(batch, tuple) else model(batch)
        (loss(out) if loss is not None else out.sum()).backward()
    model.zero_grad(set_to_none=True)
    return fc.get_total_flops()


# PyG 2.8 calls torch.jit.script at import (the GAT case); torch 2.13 deprecates it
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize("opt", list(OPTIMIZERS))
@pytest.mark.parametrize("name", ["encoder", "cnn", "gpt", "gat"])
def test_predicted_step_matches_the_measured_one(name: str, opt: str) -> None:
    model, batch, loss = _case(name)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    plan = labkit.plan(model, batch, loss=loss, optimizer=OPTIMIZERS[opt])
    # the plan touched nothing: same weights and buffers, no gradients, no hooks
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert all(p.grad is None for p in model.parameters())
    assert_clean(model)
    flops = _flops(model, batch, loss)
    measured = labkit.memory(model, batch, loss=loss, optimizer=OPTIMIZERS[opt](model.parameters()))
    for what, (pred, real, err) in plan.compare(measured).items():
        assert abs(err) <= 0.05, f"{what}: predicted {pred}, measured {real}"
    assert plan.meta.peak_phase == measured.meta.peak_phase
    assert plan.meta.peak_where == measured.meta.peak_where
    assert plan.total_flops == flops
    # per module, forward and backward, the same FLOPs as the measured trace
    real_rows = {n.key: (n.flops_fwd, n.flops_bwd) for n in measured.trace.nodes}
    plan_rows = {n.key: (n.flops_fwd, n.flops_bwd) for n in plan.trace.nodes}
    assert plan_rows == real_rows


def test_a_meta_model_and_meta_batch_plan_like_the_real_ones() -> None:
    torch.manual_seed(0)
    real = GPT()
    with torch.device("meta"):
        meta = GPT()
    idx = torch.randint(0, 100, (3, 24))
    opt = OPTIMIZERS["AdamW"]
    a = labkit.plan(real, idx, loss=_lm_loss, optimizer=opt)
    b = labkit.plan(meta, idx.to("meta"), loss=_lm_loss, optimizer=opt)
    assert (a.peak_bytes, a.meta.peak_by_category, a.total_flops) == (
        b.peak_bytes,
        b.meta.peak_by_category,
        b.total_flops,
    )
    assert b.meta.device == "cpu"
    assert all(p.is_meta for p in meta.parameters())  # the meta model stays as it was


def test_a_shape_stands_for_a_float32_batch() -> None:
    model, batch, _ = _case("cnn")
    a = labkit.plan(model, torch.Size(batch.shape))
    b = labkit.plan(model, batch)
    assert a.peak_bytes == b.peak_bytes and a.meta.peak_by_category == b.meta.peak_by_category


def test_an_optimizer_instance_is_rebuilt_with_its_state() -> None:
    model, batch, _ = _case("cnn")
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(batch).sum().backward()
    opt.step()  # state exists before the planned step, as in the measured one
    opt.zero_grad(set_to_none=True)
    state = {id(p): {k: v.clone() for k, v in s.items()} for p, s in opt.state.items()}
    plan = labkit.plan(model, batch, optimizer=opt)
    for p, s in opt.state.items():
        assert all(torch.equal(state[id(p)][k], v) for k, v in s.items())
    measured = labkit.memory(model, batch, optimizer=opt)
    assert plan.compare(measured)["peak"][2] == pytest.approx(0.0, abs=0.01)
    assert plan.meta.start_bytes == measured.meta.start_bytes
    assert plan.meta.peak_by_category["optimizer"] == measured.meta.peak_by_category["optimizer"]


@pytest.mark.parametrize(
    "recipe",
    [
        Recipe(precision="bf16-mixed"),
        Recipe(checkpoint=("blocks.*",)),
        Recipe(precision="bf16-mixed", checkpoint=("blocks.*",)),
    ],
    ids=lambda r: r.label,
)
def test_recipes_predict_the_peak_of_the_applied_model(recipe: Recipe) -> None:
    model, batch, loss = _case("gpt")
    opt = OPTIMIZERS["AdamW"]
    plan = labkit.plan(model, batch, loss=loss, optimizer=opt, recipe=recipe)
    work = apply(model, recipe)
    measured = labkit.memory(work, batch, loss=loss, optimizer=opt(work.parameters()))
    pred, real, err = plan.compare(measured)["peak"]
    assert abs(err) <= 0.05, f"{recipe.label}: predicted {pred}, measured {real}"
    assert plan.peak_bytes < labkit.plan(model, batch, loss=loss, optimizer=opt).peak_bytes
