"""Deployment targets (torch.export, ONNX Runtime) measured by compare like any recipe."""

import inspect
import json

import pytest
import torch
from torch import nn

from labkit.optimize import Recipe, RecipeError, apply, compare
from labkit.optimize._deploy import onnx_drift
from labkit.optimize.drift import layer_drift
from labkit.optimize.export import ExportError, exported

pytest.importorskip("onnxruntime", reason="the export extra: pip install 'labkit[export]'")


def encoder() -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


class Gate(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:  # data-dependent control flow
            return x * 2
        return x


class TwoIssues(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            x = x * 2
        n = int(x.abs().max())
        return x[:n]


class Eig(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.eigvalsh(x @ x.mT)  # no ONNX conversion for eigh


class Blocked(nn.Module):
    def __init__(self, tail: nn.Module) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.tail = tail

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tail(self.proj(x))


@pytest.fixture(scope="module")
def encoder_cmp():
    x = torch.randn(4, 10, 32)
    recipes = [Recipe(export="torch.export"), Recipe(export="onnxruntime")]
    return compare(
        encoder(), x, recipes, mode="inference", steps=2, warmup=1, batch_sizes=(1, 6), target=None
    )


def test_exports_run_with_fp32_deviation_and_per_batch_latency(encoder_cmp):
    base, ep, ort = encoder_cmp.results
    for r in (ep, ort):
        assert r.error is None, r.error
        assert r.rel < 1e-4 and r.cosine > 0.99999  # fp32 export: same numbers as eager
        assert r.drift_path is None  # no layer past the 1e-2 tolerance
        assert r.export_time > 0 and r.step_time > 0
        assert [b["batch_size"] for b in r.per_batch] == [1, 6]
        assert all(b["error"] is None and b["step_time"] > 0 for b in r.per_batch)
        assert any("batch dimension dynamic" in n for n in r.notes)
    assert any(n.startswith("ONNX: ") and "CPUExecutionProvider" in n for n in ort.notes)
    assert [b["speedup"] for b in base.per_batch] == [1.0, 1.0]
    for r in (ep, ort):  # each size's speedup with its interval over its 2 rounds
        for b in r.per_batch:
            assert b["speedup_low"] <= b["speedup"] <= b["speedup_high"]
            assert b["within_noise"] == (b["speedup_low"] <= 1.0 <= b["speedup_high"])
    json.dumps(encoder_cmp.to_dict())  # plain data, per-batch rows included
    text = encoder_cmp.summary()
    assert "export" in text.splitlines()[1].split()
    assert "latency per batch" in text and "batch 6" in text


def test_onnx_layer_drift_lines_up_with_module_paths():
    model = encoder()
    x = torch.randn(2, 10, 32)
    cand = apply(model, Recipe(export="onnxruntime"))
    assert repr(exported(cand)) == "ExportedForward(onnxruntime, not exported yet)"
    cand(x)
    assert repr(exported(cand)).startswith("ExportedForward(onnxruntime, exported in ")
    rows = onnx_drift(model, exported(cand), (x,), {})
    paths = [r.path for r in rows]
    assert {"layers.0.linear1", "layers.0.linear2", "layers.1.norm2", ""} <= set(paths)
    assert all(r.rel < 1e-5 for r in rows), [(r.path, r.rel) for r in rows if r.rel >= 1e-5]
    # a path the ONNX nodes map to is a real module, in the eager call order
    eager = [r.path for r in layer_drift(model, model, x)]
    assert paths == [p for p in eager if p in set(paths)]


@pytest.mark.parametrize("target", ["torch.export", "onnxruntime"])
def test_data_dependent_branch_names_construct_module_and_line(target, capsys):
    torch.manual_seed(0)
    model = Blocked(Gate()).eval()
    cmp = compare(
        model,
        torch.randn(4, 8),
        [Recipe(export=target), Recipe(precision="bf16-mixed")],
        mode="inference",
        steps=1,
        warmup=0,
        progress=False,  # a progress line after 2 s on a slow machine is not the exporter's dump
    )
    err = cmp.result(target).error
    assert err.startswith(f"ExportError: {target} could not export the model: data-dependent ")
    assert "in module 'tail' (Gate) at " in err
    line = inspect.getsourcelines(Gate.forward)[1] + 1
    assert err.endswith(f"test_export.py:{line}: if x.sum() > 0:  # data-dependent control flow")
    assert "Traceback" not in err and "\n" not in err
    assert cmp.result("bf16-mixed").error is None  # the other recipes still run
    # the exporter's own dump of the partial graph and its exportdb log stay out of the output
    assert capsys.readouterr().err == ""


def test_op_without_onnx_conversion_is_named():
    torch.manual_seed(0)
    model = Blocked(Eig()).eval()
    cand = apply(model, Recipe(export="onnxruntime"))
    with pytest.raises(ExportError) as err:
        cand(torch.randn(4, 8))
    assert err.value.module == "tail" and err.value.module_type == "Eig"
    assert str(err.value).startswith(
        "onnxruntime could not export the model: no ONNX conversion for operator "
        "aten._linalg_eigh.default in module 'tail' (Eig) at "
    )
    # torch.export itself handles it
    ok = apply(model, Recipe(export="torch.export"))
    x = torch.randn(4, 8)
    assert torch.allclose(ok(x), model(x), rtol=1e-4, atol=1e-5)


def test_export_recipes_are_inference_only(mlp, x):
    with pytest.raises(RecipeError, match="export combines with fuse_conv_bn and channels_last"):
        Recipe(export="onnxruntime", precision="bf16-mixed")
    r = Recipe(export="torch.export", fuse_conv_bn=True)
    assert r.label == "fuse_conv_bn + torch.export" and Recipe.from_json(r.to_json()) == r
    cmp = compare(
        mlp, x, Recipe(export="torch.export"), steps=1, warmup=0, memory=False, target=None
    )
    assert "labkit.compare(..., mode='inference')" in cmp.result("torch.export").error
    assert (
        "model.eval()" in apply(mlp.train(), Recipe(export="torch.export"))._labkit_applied.notes[0]
    )


def test_draft_export_lists_every_issue():
    torch.manual_seed(0)
    cand = apply(Blocked(TwoIssues()).eval(), Recipe(export="torch.export"))
    with pytest.raises(ExportError) as err:
        cand(torch.randn(4, 8))
    first = inspect.getsourcelines(TwoIssues.forward)[1] + 1
    assert err.value.issues == (
        f"data-dependent value at line {first}: if x.sum() > 0:",
        f"data-dependent value at line {first + 2}: n = int(x.abs().max())",
    )
    assert "; torch.export's draft export found 2 issues: " in str(err.value)


def test_exporter_mute_drops_only_the_exporting_threads_writes():
    import io
    import sys
    import threading

    from labkit.optimize.export import _quiet_exporters

    before, sink = sys.stderr, io.StringIO()
    sys.stderr = sink
    try:
        with _quiet_exporters():
            print("from the exporting thread", file=sys.stderr)
            other = threading.Thread(target=lambda: print("from another", file=sys.stderr))
            other.start()
            other.join()
        print("after", file=sys.stderr)
    finally:
        sys.stderr = before
    assert sink.getvalue() == "from another\nafter\n"


def test_hf_causal_lm_cache_in_the_output_is_named_with_the_fix():
    from tests.realworld.models import hf_llama

    case = hf_llama()
    model, ids = case.model.eval(), case.kwargs["input_ids"]
    recipes = {
        "plain": Recipe(export="torch.export"),
        "no cache": Recipe(export="torch.export", export_kwargs={"use_cache": False}),
    }
    cmp = compare(
        model,
        {"input_ids": ids},
        recipes,
        mode="inference",
        steps=1,
        warmup=0,
        memory=False,
        target=None,
    )
    err = cmp.result("plain").error
    assert err.startswith(
        "ExportError: torch.export could not export the model: the output holds a "
        "transformers.cache_utils.DynamicCache at out['"
    )
    assert "use_cache=False" in err and "export_kwargs={'use_cache': False}" in err
    assert "logits" in err and "\n" not in err
    row = cmp.result("no cache")
    assert row.error is None and row.rel < 1e-4 and row.cosine > 0.9999
    assert any("every call gets use_cache=False" in n for n in row.notes)


def test_export_kwargs_are_validated_and_round_trip():
    r = Recipe(export="onnxruntime", export_kwargs={"use_cache": False})
    assert r.export_kwargs == (("use_cache", False),) and r.label == "onnxruntime(use_cache=False)"
    assert Recipe.from_json(r.to_json()) == r and r.to_dict()["export_kwargs"] == {
        "use_cache": False
    }
    assert repr(r) == "Recipe(export='onnxruntime', export_kwargs={'use_cache': False})"
    with pytest.raises(RecipeError, match=r"set export='torch\.export' or 'onnxruntime' too"):
        Recipe(export_kwargs={"use_cache": False})
    with pytest.raises(RecipeError, match="must be a dict of keyword name -> plain value"):
        Recipe(export="torch.export", export_kwargs={"cache": [1, 2]})
