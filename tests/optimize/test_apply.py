import contextlib
import copy

import pytest
import torch
from torch import nn

from labkit.optimize import Recipe, RecipeError, _cpu, applied, apply, grad_scaler, is_compiled
from tests.optimize.conftest import MLP, state_equal


def test_original_untouched_and_paths_kept(mlp, x):
    before = copy.deepcopy(mlp)
    fast = apply(mlp, Recipe(precision="bf16-mixed", checkpoint=("blocks.*",)))
    assert fast is not mlp
    assert state_equal(mlp, before)
    assert "forward" not in mlp.__dict__
    assert [p for p, _ in fast.named_modules()] == [p for p, _ in mlp.named_modules()]
    assert list(fast.state_dict()) == list(mlp.state_dict())


def test_default_recipe_is_a_plain_copy(mlp, x):
    fast = apply(mlp)
    assert applied(fast).steps == ()
    assert torch.equal(fast(x), mlp(x))


@pytest.mark.parametrize(
    ("precision", "dtype"), [("bf16-mixed", torch.bfloat16), ("16-mixed", torch.float16)]
)
def test_autocast_dtype_inside_regions(mlp, x, precision, dtype):
    fast = apply(mlp, Recipe(precision=precision))
    seen = {}
    for path, mod in fast.named_modules():
        if isinstance(mod, nn.Linear):
            mod.register_forward_hook(lambda m, i, o, path=path: seen.__setitem__(path, o.dtype))
    out = fast(x)
    assert set(seen.values()) == {dtype}
    assert out.dtype == dtype
    assert mlp(x).dtype == torch.float32  # original unchanged
    assert not torch.is_autocast_enabled("cpu")  # context left after the call
    assert applied(fast).ok


def test_grad_scaler_only_for_fp16():
    assert grad_scaler(Recipe()) is None
    assert grad_scaler(Recipe(precision="bf16-mixed")) is None
    assert isinstance(grad_scaler(Recipe(precision="16-mixed")), torch.amp.GradScaler)


@pytest.mark.parametrize("kind", ["int8-dynamic", "int8-weight-only"])
def test_int8_quantized_types(mlp, x, kind):
    mlp.eval()
    q = apply(mlp, Recipe(quantization=kind))
    types = {type(m.weight).__name__ for m in q.modules() if isinstance(m, nn.Linear)}
    assert types == {"Int8Tensor"}
    assert all(type(m.weight) is nn.Parameter for m in mlp.modules() if isinstance(m, nn.Linear))
    assert applied(q).notes == [f"quantization: 3 of 3 Linear layers quantized ({kind})"]
    with torch.no_grad():
        ref, out = mlp(x), q(x)
    # documented bound: int8 per-channel weights (and per-token activations) keep the
    # relative L2 error of this MLP's output under 3%
    assert (out - ref).norm() / ref.norm() < 0.03


def test_qat_fake_quantizes_and_trains(mlp, x):
    q = apply(mlp, Recipe(quantization="int8-qat"))
    assert {type(m).__name__ for m in q.modules()} >= {"FakeQuantizedLinear"}
    q(x).sum().backward()
    assert all(p.grad is not None for p in q.parameters())
    assert "3 of 3 Linear layers fake-quantized for QAT" in applied(q).notes[0]


def test_int8_dynamic_in_training_mode_is_skipped_and_unchanged(mlp, x):
    q = apply(mlp, Recipe(quantization="int8-dynamic"))
    (step,) = applied(q).skipped
    assert "training mode" in step.note and "int8-qat" in step.note
    assert state_equal(q, mlp)
    assert torch.equal(q(x), mlp(x))


def test_partial_quantization_counted():
    enc = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(16, 2, 32, batch_first=True), 2, enable_nested_tensor=False
    ).eval()
    q = apply(enc, Recipe(quantization="int8-dynamic"))
    note = applied(q).notes[0]
    assert note.startswith("quantization: 4 of 6 Linear layers quantized (int8-dynamic)")
    assert "layers.0.self_attn.out_proj (NonDynamicallyQuantizableLinear)" in note


def test_checkpointing_recomputes_seen_by_hook_counts(mlp, x):
    def count_calls(model):
        calls = {}
        for path, mod in model.named_modules():
            mod.register_forward_hook(
                lambda *a, path=path: calls.__setitem__(path, calls.get(path, 0) + 1)
            )
        model(x).sum().backward()
        return calls

    plain = count_calls(apply(mlp))
    ck = apply(mlp, Recipe(checkpoint=("blocks.0",)))
    assert applied(ck).steps[0].paths == ("blocks.0",)
    calls = count_calls(ck)
    assert plain["blocks.0.0"] == 1 and calls["blocks.0.0"] == 2  # recomputed in backward
    assert calls["blocks.1.0"] == 1  # not checkpointed
    assert calls["blocks.0"] == 1  # the wrapped module itself is called once
    with torch.no_grad():  # no recomputation without gradients
        assert torch.equal(ck(x), mlp(x))


def test_checkpoint_grads_match(mlp, x):
    ck = apply(mlp, Recipe(checkpoint=("Sequential",)))
    # outermost match only: "blocks", not its nested Sequentials
    assert applied(ck).steps[0].paths == ("blocks",)
    ref = apply(mlp)
    ck(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for (n, a), (_, b) in zip(ck.named_parameters(), ref.named_parameters(), strict=False):
        assert torch.allclose(a.grad, b.grad, atol=1e-6), n


@pytest.mark.parametrize("held", [False, True], ids=["plain", "dropout-held"])
def test_checkpoint_takes_a_gradient_penalty(mlp, x, held):
    # WGAN-GP style: grad of the output w.r.t. the input with create_graph=True, then a
    # backward through it: checkpoint recomputes twice (this raised AttributeError before)
    from labkit.optimize._random import held_randomness

    def penalty_grads(model):
        inp = x.clone().requires_grad_(True)
        with held_randomness(model) if held else contextlib.nullcontext():
            (g,) = torch.autograd.grad(model(inp).sum(), inp, create_graph=True)
            g.pow(2).sum().backward()
        return {n: p.grad for n, p in model.named_parameters()}

    ck = penalty_grads(apply(mlp, Recipe(checkpoint=("blocks.*",))))
    ref = penalty_grads(apply(mlp))
    assert ck.keys() == ref.keys()
    assert ref["blocks.0.0.weight"] is not None and ref["head.bias"] is None  # no say in it
    for n, g in ref.items():
        assert (g is None and ck[n] is None) or torch.allclose(ck[n], g, atol=1e-6), n


def test_checkpoint_glob_and_missing(mlp):
    ck = apply(mlp, Recipe(checkpoint=("blocks.*",)))
    step = applied(ck).steps[0]
    assert step.applied and step.paths == ("blocks.0", "blocks.1")
    # a pattern that matches nothing is refused, even beside one that matches
    for patterns, bad in [(("blocks.*", "nope"), "nope"), (("layers.*",), "layers.*")]:
        with pytest.raises(RecipeError) as err:
            apply(mlp, Recipe(checkpoint=patterns))
        assert f"no module matches {bad!r}" in str(err.value)
        assert "paths look like: blocks (Sequential)" in str(err.value)
    assert "forward" not in mlp.blocks[0].__dict__  # the user's model untouched
    # a module named by two patterns counts for both (class name first, then its path)
    both = apply(mlp, Recipe(checkpoint=("Sequential", "blocks.0")))
    assert applied(both).steps[0].paths == ("blocks",)


def test_checkpoint_typo_names_nearest_paths(mlp):
    with pytest.raises(RecipeError) as err:
        apply(mlp, Recipe(checkpoint=("blocks.O", "Sequental")))
    msg = str(err.value)

    def nearest(pattern: str) -> list[str]:
        return msg.split(f"{pattern!r} (nearest: ")[1].split(")")[0].split(", ")

    assert "blocks.0" in nearest("blocks.O") and "head" not in nearest("blocks.O")
    assert nearest("Sequental")[0] == "Sequential"


def test_channels_last(convnet):
    img = torch.randn(2, 3, 8, 8)
    cl = apply(convnet, Recipe(channels_last=True))
    assert cl.features[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert not convnet.features[0].weight.is_contiguous(memory_format=torch.channels_last)
    out = cl.features[0](img)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert torch.allclose(cl(img), convnet(img), atol=1e-5)
    assert applied(cl).notes == ["channels_last: 2 4-D weights stored channels-last"]


def test_channels_last_without_conv_reports_why(mlp):
    out = apply(mlp, Recipe(channels_last=True))
    (skip,) = applied(out).skipped
    assert "no 4-D weights" in skip.note
    assert state_equal(out, mlp)


def test_fuse_conv_bn(convnet):
    convnet.eval()
    img = torch.randn(2, 3, 8, 8)
    fused = apply(convnet, Recipe(fuse_conv_bn=True))
    assert [type(m).__name__ for m in fused.features] == ["Conv2d", "Identity", "ReLU"] * 2
    assert applied(fused).notes == [
        "fuse_conv_bn: 2 of 2 BatchNorm layers folded into their convolution"
    ]
    assert torch.allclose(fused(img), convnet(img), atol=1e-5)
    assert isinstance(convnet.features[1], nn.BatchNorm2d)


def test_fuse_in_training_mode_reports_why(convnet):
    out = apply(convnet, Recipe(fuse_conv_bn=True))
    (skip,) = applied(out).skipped
    assert "training mode" in skip.note and "model.eval()" in skip.note
    assert state_equal(out, convnet)


def test_matmul_precision_restored(mlp, x):
    fast = apply(mlp, Recipe(matmul_precision="medium"))
    seen = []
    fast.head.register_forward_hook(lambda *a: seen.append(torch.get_float32_matmul_precision()))
    fast(x)
    assert seen == ["medium"]
    assert torch.get_float32_matmul_precision() == "highest"


def test_quantization_without_linears_reports_why(convnet):
    only_conv = nn.Sequential(nn.Conv2d(3, 4, 3)).eval()
    out = apply(only_conv, Recipe(quantization="int8-dynamic"))
    (skip,) = applied(out).skipped
    assert skip.note == "no nn.Linear layers to quantize"
    assert state_equal(out, only_conv)


def test_strict_raises(mlp):
    with pytest.raises(RecipeError, match="channels_last could not apply: no 4-D weights"):
        apply(mlp, Recipe(channels_last=True), strict=True)


def test_bad_input(mlp):
    with pytest.raises(TypeError, match=r"apply\(\) needs a torch.nn.Module, got str"):
        apply("model", Recipe())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"recipe must be a labkit\.optimize\.Recipe"):
        apply(mlp, "bf16")  # type: ignore[arg-type]
    with pytest.raises(RecipeError, match=r"Recipe\.precision must be one of"):
        apply(mlp, {"precision": "bf16"})
    with pytest.raises(ValueError, match=r"was not made by labkit\.optimize\.apply"):
        applied(mlp)


def test_applied_repr(mlp):
    r = applied(apply(mlp, Recipe(precision="bf16-mixed", channels_last=True)))
    # the precision line adds a warning on a CPU without native bf16: the same test passes
    # on either kind of CPU, and checks the warning where it applies
    slow = "; no native bf16 on this CPU (no AVX512-BF16/AMX): expect it slower than fp32"
    slow = "" if _cpu.native_bf16() else slow
    assert repr(r).splitlines() == [
        "Applied(bf16-mixed + channels_last: 1 applied, 1 skipped)",
        "  skip channels_last: no 4-D weights (Conv2d) to reorder; "
        "channels_last would change nothing",
        "  ok   precision: forward runs under torch.autocast('cpu', dtype=bfloat16)" + slow,
    ]
    assert repr(apply(mlp, Recipe(precision="bf16-mixed")).forward) == (
        "RecipeForward(device_type='cpu', autocast='bfloat16', "
        "matmul_precision='highest', compile=None)"
    )


@pytest.mark.parametrize("native", [True, False])
def test_bf16_note_on_either_cpu(mlp, monkeypatch, native):
    # the probe stands in for the two kinds of CPU; the doctest of apply() matches both
    monkeypatch.setattr(_cpu, "native_bf16", lambda: native)
    (note,) = applied(apply(mlp, Recipe(precision="bf16-mixed"))).notes
    assert note.startswith("precision: forward runs under torch.autocast('cpu', dtype=bfloat16)")
    assert ("no native bf16 on this CPU" in note) == (not native)


@pytest.mark.slow
def test_compiled_model(x):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 16), nn.ReLU(), nn.Linear(16, 4)).eval()
    fast = apply(model, Recipe(compile="default"))
    assert is_compiled(fast) and not is_compiled(apply(model))
    torch._dynamo.reset()
    from torch._dynamo.utils import counters

    counters.clear()
    with torch.no_grad():
        out = fast(x)
        ref = model(x)
    assert counters["stats"]["unique_graphs"] >= 1
    assert torch.allclose(out, ref, atol=1e-5)
    assert "compiled lazily" in applied(fast).notes[0]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("precision", ["16-mixed", "bf16-mixed"])
def test_cuda_autocast_and_scaler(precision):
    model = MLP().cuda()
    x = torch.randn(8, 32, device="cuda")
    fast = apply(model, Recipe(precision=precision))
    assert fast.head.weight.device.type == "cuda"
    out = fast(x)
    assert out.dtype == (torch.float16 if precision == "16-mixed" else torch.bfloat16)
    scaler = grad_scaler(Recipe(precision=precision), "cuda")
    opt = torch.optim.SGD(fast.parameters(), lr=0.1)
    loss = out.float().pow(2).mean()
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    else:
        loss.backward()
        opt.step()


def test_checkpoint_forward_repr(mlp):
    ck = apply(mlp, Recipe(checkpoint=("head",)))
    assert repr(ck.head.forward) == "CheckpointForward(path='head')"


def test_deepcopy_of_an_applied_model_runs_the_copy(mlp, x):
    for recipe in (
        Recipe(precision="bf16-mixed", checkpoint=("blocks.0",)),
        Recipe(compile="default"),
    ):
        fast = apply(mlp, recipe)
        twin = copy.deepcopy(fast)
        assert twin.forward.fn.__self__ is twin
        assert twin.blocks[0].forward.fn.__self__ is twin.blocks[0] if recipe.checkpoint else True
        assert twin.forward is not fast.forward and repr(twin.forward) == repr(fast.forward)
    fast = apply(mlp, Recipe(precision="bf16-mixed"))
    twin = copy.deepcopy(fast)
    with torch.no_grad():
        twin.head.bias.add_(1.0)
        assert not torch.equal(twin(x), fast(x))


def test_qat_trained_model_converts_to_int8(mlp, x):
    qat = apply(mlp, Recipe(quantization="int8-qat"))
    opt = torch.optim.SGD(qat.parameters(), lr=0.01)
    for _ in range(2):
        opt.zero_grad()
        qat(x).pow(2).mean().backward()
        opt.step()
    again = apply(qat, Recipe(quantization="int8-qat"))
    assert applied(again).skipped[0].note == "the model is already prepared for QAT"
    qat.eval()
    int8 = apply(qat, Recipe(quantization="int8-dynamic"))
    assert applied(int8).notes == [
        "quantization: 3 QAT layers converted to Linear, then 3 of 3 Linear layers quantized "
        "(int8-dynamic)"
    ]
    assert {type(m).__name__ for m in int8.modules()} >= {"Linear"}
    assert "FakeQuantizedLinear" not in {type(m).__name__ for m in int8.modules()}
    with torch.no_grad():
        ref, out = qat(x), int8(x)
    assert (out - ref).norm() / ref.norm() < 0.03  # int8 bound, as for a float model
