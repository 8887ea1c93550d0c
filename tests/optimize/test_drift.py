import copy

import torch
from torch import nn

from labkit.optimize import LayerDrift, Recipe, apply, layer_drift
from labkit.optimize.drift import deviation, first_drift, fp16_risks


def test_identical_models_do_not_drift(mlp, x):
    rows = layer_drift(mlp, copy.deepcopy(mlp), x)
    assert [r.path for r in rows] == [
        "blocks.0.0",
        "blocks.0.1",
        "blocks.0",
        "blocks.1.0",
        "blocks.1.1",
        "blocks.1",
        "blocks",
        "head",
        "",
    ]
    assert all(r.max_abs == 0 and r.rel == 0 for r in rows)
    assert first_drift(rows, 1e-6) is None


def test_first_drifting_layer_is_found(mlp, x):
    broken = copy.deepcopy(mlp)
    with torch.no_grad():
        broken.blocks[1][0].weight.mul_(1.5)
    rows = layer_drift(mlp, broken, x)
    hit = first_drift(rows, 1e-3)
    assert hit is not None and hit.path == "blocks.1.0" and hit.type == "Linear"
    assert next(r for r in rows if r.path == "blocks.0.0").rel == 0
    assert repr(hit).startswith("LayerDrift(path='blocks.1.0', type='Linear', max_abs=")


def test_bf16_drift_and_hooks_removed(mlp, x):
    fast = apply(mlp, Recipe(precision="bf16-mixed"))
    rows = layer_drift(mlp, fast, x)
    assert first_drift(rows, 1e-3).path == "blocks.0.0"
    assert all(r.rel < 0.02 and r.finite for r in rows)
    assert all(not m._forward_hooks for m in (*mlp.modules(), *fast.modules()))


def test_deviation_and_fp16_risk():
    a = torch.tensor([1.0, 2.0, 2.0])
    assert deviation(a, a) == (0.0, 0.0, 1.0)
    max_abs, rel, cos = deviation(a, torch.tensor([1.0, 2.0, 2.3]))
    assert abs(max_abs - 0.3) < 1e-6 and abs(rel - 0.1) < 1e-6 and cos > 0.99
    big = LayerDrift("attn.scores", "Linear", 0.0, 0.0, 1.0, 7.0e4)
    bad = LayerDrift("head", "Linear", 0.0, 0.0, 1.0, 1.0, finite=False)
    assert fp16_risks([big, bad]) == [
        "fp16 overflow risk in attn.scores (Linear): fp32 output reaches 7e+04, "
        "above fp16's max 65504",
        "head (Linear) produced inf/NaN under fp16",
    ]
    assert bad.drifts(1.0)


def test_fp16_overflow_is_noted_by_compare():
    from labkit.optimize import compare

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
    with torch.no_grad():
        model[0].weight.mul_(1e6)
    cmp = compare(
        model,
        torch.randn(4, 8),
        Recipe(precision="16-mixed"),
        steps=1,
        warmup=0,
        mode="inference",
        memory=False,
        target=None,
    )
    notes = cmp.result("16-mixed").notes
    assert any(n.startswith("fp16 overflow risk in 0 (Linear)") for n in notes), notes
