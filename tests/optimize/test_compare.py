import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from labkit.optimize import Comparison, Recipe, compare


@pytest.fixture
def target():
    torch.manual_seed(2)
    return torch.randint(0, 4, (8,))


def test_train_compare(mlp, x, target):
    cmp = compare(
        mlp,
        x,
        [Recipe(precision="bf16-mixed"), Recipe(checkpoint=("blocks.*",))],
        loss=lambda out: F.cross_entropy(out, target),
        steps=3,
        warmup=1,
        val=(x, target),
        tolerance=1e-3,
        target=None,
    )
    assert isinstance(cmp, Comparison)
    assert [r.label for r in cmp.results] == ["fp32", "bf16-mixed", "ckpt(blocks.*)"]
    base, bf16, ck = cmp.results
    assert base.speedup == 1.0 and base.max_abs == 0.0 and base.cosine == pytest.approx(1.0)
    for r in cmp.results:
        assert r.error is None
        assert len(r.step_times) == 3 and r.step_time > 0 and r.throughput > 0
        assert len(r.losses) == 3  # the controlled pass: loss_steps=3 from the start weights
        assert r.peak_memory and r.peak_memory > 0
        assert r.val_metric is not None and 0 <= r.val_metric <= 1
    # documented bounds: bf16 autocast keeps this MLP's outputs within 2% (relative L2)
    # and the loss after 3 SGD steps within 2% of fp32
    assert bf16.rel < 0.02 and bf16.cosine > 0.999
    assert bf16.loss == pytest.approx(base.loss, rel=0.02)
    assert bf16.drift_path == "blocks.0.0"  # the first Linear is the first bf16 op
    # checkpointing changes no number
    assert ck.max_abs == 0.0 and ck.losses == base.losses and ck.drift_path is None
    assert cmp.metric == "accuracy" and cmp.batch_size == 8


def test_summary_and_repr(mlp, x):
    cmp = compare(
        mlp, x, Recipe(precision="bf16-mixed"), steps=2, warmup=0, memory=False, target=None
    )
    text = cmp.summary()
    lines = text.splitlines()
    assert lines[0] == "compare (train, 2 steps after 0 warm-up, device cpu, drift tolerance 0.01)"
    assert lines[1].split() == [
        "recipe",
        "step",
        "speedup",
        "samples/s",
        "FLOP/s",
        "compile",
        "break-even",
        "peak",
        "mem",
        "max",
        "abs",
        "rel",
        "cosine",
        "loss",
        "first",
        "drift",
    ]
    assert lines[3].startswith("fp32") and lines[4].startswith("bf16-mixed")
    assert "- no loss given: training steps minimise the mean of the outputs" in text
    assert "- bf16-mixed: precision: forward runs under torch.autocast('cpu'" in text
    assert repr(cmp).startswith("Comparison(mode='train', steps=2, fp32: 1.00x, bf16-mixed: ")
    df = cmp.to_pandas()
    assert list(df.index) == ["fp32", "bf16-mixed"] and "speedup" in df.columns
    assert cmp.to_dict()["results"][1]["label"] == "bf16-mixed"
    assert cmp.result("bf16-mixed").recipe == Recipe(precision="bf16-mixed").to_dict()
    with pytest.raises(KeyError, match="no recipe labelled 'int8'"):
        cmp.result("int8")


def test_inference_int8_and_skipped_toggle(mlp, x):
    mlp.eval()
    cmp = compare(
        mlp,
        x,
        {"int8": Recipe(quantization="int8-dynamic"), "cl": Recipe(channels_last=True)},
        mode="inference",
        steps=2,
        warmup=0,
        target=None,
    )
    q = cmp.result("int8")
    assert "quantization: 3 of 3 Linear layers quantized (int8-dynamic)" in q.notes
    assert any("weights: " in n and "vs" in n for n in q.notes)  # weight bytes instead of peak
    assert q.rel < 0.03  # documented int8 bound (see test_apply)
    cl = cmp.result("cl")
    assert cl.notes[0].startswith("channels_last: no 4-D weights")
    assert cl.max_abs == 0.0  # the skipped toggle left the model as it was


def test_checkpointing_saves_memory():
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 64)) for _ in range(4)]
    model = nn.Sequential(*blocks)
    x = torch.randn(512, 64)
    cmp = compare(
        model, x, Recipe(checkpoint=("Sequential",)), steps=1, warmup=0, drift=False, target=None
    )
    # outermost match only: the root is never selected, so the 4 blocks are checkpointed
    base, ck = cmp.results
    assert ck.notes[0].startswith("checkpoint: 4 modules recompute in backward")
    assert ck.peak_memory < base.peak_memory


def test_a_recipe_that_fails_is_reported_not_raised(mlp, x):
    def bad_loss(out):
        return out.sum() if out.dtype == torch.float32 else out.sum().reshape(1, 1).expand(2, 2)

    cmp = compare(
        mlp, x, Recipe(precision="bf16-mixed"), loss=bad_loss, steps=1, warmup=0, target=None
    )
    r = cmp.result("bf16-mixed")
    assert r.error is not None and "loss must return a scalar tensor, got (2, 2)" in r.error
    assert "bf16-mixed: ERROR" in cmp.summary()


def test_a_long_error_is_one_line_in_the_summary(mlp, x):
    def bad_loss(out):
        if out.dtype != torch.float32:
            raise RuntimeError("the first line names it\nsecond line\nthird line")
        return out.sum()

    cmp = compare(
        mlp, x, Recipe(precision="bf16-mixed"), loss=bad_loss, steps=1, warmup=0, target=None
    )
    assert cmp.result("bf16-mixed").error.endswith("second line\nthird line")  # all kept
    line = "- bf16-mixed: ERROR RuntimeError: the first line names it (+2 lines: "
    assert line + "cmp.result('bf16-mixed').error)" in cmp.summary().splitlines()
    assert "second line" not in cmp.summary()


def test_progress_callback(mlp, x):
    seen = []
    compare(
        mlp,
        x,
        [],
        steps=1,
        warmup=0,
        memory=False,
        progress=lambda f, m: seen.append((f, m)),
        target=None,
    )
    assert seen[0] == (0.0, "applying recipes") and seen[-1] == (1.0, "done")
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(seen))


@pytest.mark.parametrize(
    ("kwargs", "error", "needle"),
    [
        ({"mode": "eval"}, ValueError, "compare(mode=...) must be one of ('train', 'inference')"),
        ({"steps": 0}, ValueError, "compare(steps=...) must be an int >= 1"),
        ({"warmup": -1}, ValueError, "compare(warmup=...) must be an int >= 0"),
        ({"tolerance": 0}, ValueError, "compare(tolerance=...) must be > 0"),
        ({"recipes": "bf16"}, TypeError, "compare(recipes=...) must be a Recipe"),
        ({"recipes": {"a": "bf16"}}, TypeError, "recipe 'a' is a str, not a labkit.optimize"),
        ({"batch": 3}, TypeError, "compare(batch=...) must be a tensor"),
        ({"metric": "accuracy"}, ValueError, "compare(metric=...) needs val=(inputs, targets)"),
        ({"val": (1, 2, 3)}, ValueError, "compare(val=...) must be a pair"),
        ({"baseline": "fp32"}, TypeError, "compare(baseline=...) must be a Recipe"),
        ({"target": 0}, ValueError, "compare(target=...) must be between 0 and 1 (0.03: +-3%)"),
        ({"budget_s": -1}, ValueError, "compare(budget_s=...) must be > 0 seconds"),
    ],
)
def test_bad_input(mlp, x, kwargs, error, needle):
    args = {"batch": x, "recipes": [Recipe(precision="bf16-mixed")]}
    args.update(kwargs)
    batch, recipes = args.pop("batch"), args.pop("recipes")
    with pytest.raises(error) as err:
        compare(mlp, batch, recipes, **args)
    assert needle in str(err.value)


def test_not_a_module(x):
    with pytest.raises(TypeError, match=r"compare\(\) needs a torch\.nn\.Module as model, got str"):
        compare("mlp", x, [])


@pytest.mark.slow
def test_compile_time_and_break_even(x):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
    cmp = compare(
        model, x, Recipe(compile="default"), mode="inference", steps=3, warmup=1, target=None
    )
    r = cmp.result("compile")
    assert r.error is None
    assert r.compile_time is not None and r.compile_time > 0
    assert r.first_call > r.step_time
    assert r.break_even is None or r.break_even > 0
    assert r.max_abs < 1e-4  # compiled fp32 matches eager closely
    assert any("measured on the eager model" in n for n in r.notes)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
# inductor warns (UserWarning) that TF32 is available but off; torch's advice, not a fault
@pytest.mark.filterwarnings("ignore:TensorFloat32 tensor cores:UserWarning")
def test_cuda_compare_fp16_bf16_compile():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 256), nn.GELU(), nn.Linear(256, 10)).cuda()
    x = torch.randn(64, 256, device="cuda")
    recipes = [
        Recipe(precision="16-mixed"),
        Recipe(precision="bf16-mixed"),
        Recipe(compile="default"),
    ]
    cmp = compare(model, x, recipes, steps=5, warmup=2, target=None)
    print(cmp.summary())
    for r in cmp.results:
        assert r.error is None, r.error
        assert r.peak_memory and r.peak_memory > 0
    assert cmp.result("16-mixed").rel < 0.02
    assert cmp.result("bf16-mixed").rel < 0.03
    assert cmp.result("compile").compile_time > 0
    assert all(-1 <= r.cosine <= 1 for r in cmp.results)


def test_fp16_training_uses_a_grad_scaler(mlp, x, target):
    cmp = compare(
        mlp,
        x,
        Recipe(precision="16-mixed"),
        loss=lambda out: F.cross_entropy(out, target),
        steps=2,
        warmup=0,
        memory=False,
        drift=False,
    )
    base, half = cmp.results
    assert half.error is None
    assert any("GradScaler" in n for n in half.notes)
    # documented bound: fp16 autocast keeps this MLP's loss within 2% of fp32 over 3 steps
    assert half.loss == pytest.approx(base.loss, rel=0.02)


def test_cpu_peak_memory_is_torchs_memtracker_plus_the_batch():
    # torch's dispatch-level MemTracker, run on the same step, is the reference; it does
    # not count the batch (made before it starts), labkit's tracker does
    from torch.distributed._tools.mem_tracker import MemTracker

    from labkit.optimize.apply import apply
    from labkit.optimize.step import RecipeStep

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 10))
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))

    def loss(out):
        return F.cross_entropy(out, y)

    for recipe in (Recipe(), Recipe(precision="bf16-mixed")):
        step = RecipeStep(apply(model, recipe), recipe, mode="train", loss=loss)
        ref = MemTracker()
        ref.track_external(step.model, step.opt)
        with ref:
            step(x, seed=0)
        peak = ref.get_tracker_snapshot("peak")
        expected = sum(v.get("Total", 0) for v in peak.values() if isinstance(v, dict))
        cmp = compare(model, x, recipe, loss=loss, steps=1, warmup=0, drift=False, target=None)
        assert cmp.results[-1].peak_memory == expected + x.numel() * 4, recipe.label


def test_int8_weight_only_peak_counts_the_dequantized_weight():
    pytest.importorskip("torchao")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 256)).eval()
    cmp = compare(
        model,
        torch.randn(4, 512),
        Recipe(quantization="int8-weight-only"),
        mode="inference",
        steps=1,
        warmup=0,
        drift=False,
        target=None,
    )
    base, q = cmp.results
    int8 = 512 * 1024 + 1024 * 256  # one byte per weight, scales and biases on top
    fp32 = 4 * (512 * 1024 + 1024 * 256)
    assert base.peak_memory >= fp32
    # torchao dequantizes the first layer's weight to float32 for its matmul on CPU: the
    # peak holds it beside the int8 weights, so it is far above the int8 weight bytes
    assert base.peak_memory > q.peak_memory >= int8 + 512 * 1024 * 4
    assert any(n.startswith("weights: ") for n in q.notes)


def test_compare_leaves_model_inputs_and_rng_as_they_were():
    import copy
    import random

    import numpy as np

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Dropout(0.2), nn.Linear(16, 4))
    model(torch.randn(4, 8)).sum().backward()  # .grad from an earlier step
    x = torch.randn(6, 8, requires_grad=True)
    x.grad = torch.ones_like(x)
    twin, twin_x = copy.deepcopy(model), x.detach().clone()
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        q.grad = p.grad.clone()  # deepcopy leaves a Parameter's .grad behind
    torch.manual_seed(123)
    random.seed(5)
    np.random.seed(7)
    rng = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    compare(
        model,
        x,
        [Recipe(precision="bf16-mixed"), Recipe(checkpoint=("1",))],
        steps=2,
        warmup=1,
        target=None,
    )
    assert torch.equal(torch.get_rng_state(), rng[0]) and random.getstate() == rng[1]
    assert (np.random.get_state()[1] == rng[2]).all()
    assert model.training == twin.training
    for (name, a), b in zip(model.state_dict().items(), twin.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    for p, q in zip(model.parameters(), twin.parameters(), strict=True):
        assert torch.equal(p.grad, q.grad)
    assert torch.equal(x.detach(), twin_x) and torch.equal(x.grad, torch.ones_like(x))


def test_speedups_carry_intervals_and_noise_is_not_ranked(mlp, x):
    cmp = compare(
        mlp,
        x,
        {"control": Recipe(), "bf16": Recipe(precision="bf16-mixed")},
        steps=6,
        warmup=1,
        memory=False,
        drift=False,
        target=None,
    )
    base = cmp.result("fp32")
    assert base.speedup == 1.0 and base.speedup_low is None and base.within_noise is None
    for r in cmp.results[1:]:
        assert r.rounds == 6 == len(r.step_times)
        assert r.speedup_low <= r.speedup <= r.speedup_high
        assert r.within_noise == (r.speedup_low <= 1.0 <= r.speedup_high)
        assert r.step_time_low <= r.step_time <= r.step_time_high
    assert [r.label for r in cmp.ranked()] == [
        r.label for r in sorted(cmp.results[1:], key=lambda r: -r.speedup) if not r.within_noise
    ]
    text = cmp.summary()
    assert "paired bootstrap over 6 rounds" in text and "fixed number of rounds" in text
    for r in cmp.results[1:]:
        shown = "(noise)" if r.within_noise else f"[{r.speedup_low:.2f}-{r.speedup_high:.2f}]"
        assert f"{r.speedup:.2f}x {shown}" in text


def test_rounds_end_at_the_target_or_the_budget(mlp, x):
    args = {"steps": 4, "warmup": 0, "memory": False, "drift": False}
    loose = compare(mlp, x, Recipe(precision="bf16-mixed"), target=0.999, budget_s=30, **args)
    assert loose.ended_by == "target" and len(loose.results[1].step_times) < 100
    tight = compare(mlp, x, Recipe(precision="bf16-mixed"), target=1e-6, budget_s=0.5, **args)
    assert tight.ended_by == "budget" and tight.target == 1e-6
    rounds = len(tight.results[1].step_times)  # 4 when the steps alone spent the budget
    title = f"{rounds} rounds (4 minimum)" if rounds > 4 else "4 steps"
    assert tight.summary().startswith(f"compare (train, {title} after 0 warm-up")
    assert loose.summary().startswith(f"compare (train, {loose._rounds_text()} after 0")
    assert "the 0.5 s budget ran out before every interval was within +-0%" in tight.summary()


def test_a_bench_measures_the_baseline_once_and_keeps_rows(mlp, x):
    from labkit.optimize import Bench

    bench = Bench(mlp, x, steps=3, warmup=0, memory=False, drift=False, target=None)
    first = bench.compare(Recipe(precision="bf16-mixed"))
    base_first_call = first.result("fp32").first_call
    second = bench.compare(Recipe(checkpoint=("blocks.*",)))
    assert [r.label for r in second.results] == ["fp32", "bf16-mixed", "ckpt(blocks.*)"]
    base = second.result("fp32")
    assert base.first_call == base_first_call  # not set up again
    assert len(base.step_times) == 6  # its rounds accumulate: 3 with each recipe
    assert second.result("ckpt(blocks.*)").rounds == 3  # paired with this call's rounds
    assert second.result("bf16-mixed") == first.result("bf16-mixed")
    bench.clear()
    assert [r.label for r in bench.comparison.results] == ["fp32"]
    assert repr(bench).startswith("Bench(MLP, mode='train', baseline='fp32', rows=0")


def test_a_speedup_within_noise_is_not_remembered_as_slower():
    from labkit.optimize.bench import MEASURED, _remember
    from labkit.optimize.comparison_result import RecipeResult

    recipe = Recipe(matmul_precision="medium")
    row = RecipeResult(
        "m", recipe.to_dict(), speedup=0.97, speedup_low=0.9, speedup_high=1.05, within_noise=True
    )
    _remember("train", "cpu", [row])
    assert MEASURED.pop(recipe.to_json())[0] == 1.0  # advise reads no difference


def _two_null_contexts():
    import contextlib

    return contextlib.nullcontext(), contextlib.nullcontext()


class _OwnCheckpoint(nn.Module):
    """Research code that checkpoints itself with a context_fn torch.compile rejects."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from torch.utils.checkpoint import checkpoint

        return checkpoint(self.lin, x, use_reentrant=False, context_fn=_two_null_contexts)


@pytest.mark.slow
def test_a_compile_failure_row_names_the_cause_and_the_module_not_the_wrapper():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), _OwnCheckpoint())
    cmp = compare(
        model,
        torch.randn(4, 8),
        Recipe(compile="default"),
        steps=1,
        warmup=0,
        memory=False,
        drift=False,
        target=None,
    )
    assert cmp.result("fp32").error is None  # eager runs it
    head = cmp.result("compile").error.splitlines()[0]
    assert not head.startswith(("BackendCompilerFailed", "InternalTorchDynamoError")), head
    assert "context_fn" in head, head
    assert "in module '1' (_OwnCheckpoint) at " in head and "test_compare.py:" in head, head
    line = next(ln for ln in cmp.summary().splitlines() if ln.startswith("- compile: ERROR"))
    assert head in line
