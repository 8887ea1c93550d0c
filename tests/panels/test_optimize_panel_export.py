"""OptimizePanel's export choices: mode switching, measuring exports, failures, Apply."""

import importlib.util
import inspect

import pytest
import torch
from torch import nn

from labkit.optimize import Recipe
from labkit.panels import OptimizePanel, _optimize_fields
from tests.optimize.conftest import MLP
from tests.optimize.test_export import Blocked, Gate  # an `if x.sum() > 0` in module 'tail'


class Lab:
    recipe = Recipe(precision="bf16-mixed")


def send(panel: OptimizePanel, kind: str) -> None:
    """What the front end's buttons send; a measure is waited for."""
    panel._on_custom(panel, {"type": kind}, None)
    if kind == "measure":
        panel._thread.join(timeout=180)


def choose(panel: OptimizePanel, **fields) -> None:
    """What the front end sets when a control changes (withField's dict)."""
    panel.recipe_state = {**panel.recipe_state, **fields}


@pytest.fixture
def mlp() -> MLP:
    torch.manual_seed(0)
    return MLP()


def test_export_choices_follow_what_is_installed(monkeypatch):
    export = next(f for f in _optimize_fields.fields() if f["name"] == "export")
    opts = {o["value"]: o for o in export["options"]}
    assert list(opts) == ["none", "torch.export", "onnxruntime"]
    assert export["modes"] == ["inference"] and export["sets_mode"] == "inference"
    installed = all(importlib.util.find_spec(m) for m in ("onnx", "onnxruntime", "onnxscript"))
    assert opts["onnxruntime"]["disabled"] is not installed
    # without onnxscript the option stays visible, disabled, saying what to install
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n: None if n == "onnxscript" else real(n)
    )
    gone = next(f for f in _optimize_fields.fields() if f["name"] == "export")["options"][2]
    assert gone["disabled"] and gone["label"] == "onnxruntime (not installed)"
    assert gone["title"].startswith("onnxscript not installed: pip install 'labkit[export]'")


def test_choosing_an_export_switches_to_inference_and_back(mlp):
    panel = OptimizePanel(mlp, torch.randn(4, 32), recipe=Recipe(precision="bf16-mixed"))
    assert panel.mode == "train" and "checkpoint" not in panel.locks
    assert "fusion is for inference" in panel.locks["fuse_conv_bn"]
    choose(panel, export="torch.export")  # bf16 does not combine with an export: reset
    assert panel.recipe == Recipe(export="torch.export") and panel.error == ""
    assert panel.mode == "inference"
    assert "precision reset to the default" in panel.notice
    assert "the panel switched to inference" in panel.notice
    assert panel.loss_label == ""  # inference without a loss
    locked = set(panel.locks)
    assert locked == {"precision", "quantization", "compile", "matmul_precision", "checkpoint"}
    assert "combines with channels_last and fuse_conv_bn only" in panel.locks["precision"]
    assert "inference has no backward" in panel.locks["checkpoint"]
    choose(panel, precision="16-mixed")  # refused with Recipe's reason, export kept
    assert "would not apply" in panel.error and panel.recipe == Recipe(export="torch.export")
    panel.mode = "train"  # what the mode select sends
    assert panel.recipe == Recipe() and "export reset to none" in panel.notice
    assert set(panel.locks) == {"fuse_conv_bn", "export_kwargs"}  # both inference-only
    panel.mode = "eval"
    assert panel.mode == "train" and "mode must be" in panel.error
    # a Recipe given with an export starts the panel in inference mode
    assert OptimizePanel(mlp, recipe=Recipe(export="torch.export")).mode == "inference"
    with pytest.raises(Exception, match="batch_sizes must be ints >= 1"):
        panel.batch_sizes = [0]


def test_measure_torch_export_from_the_page(mlp):
    x = torch.randn(8, 32)
    panel = OptimizePanel(
        mlp, x, steps=3, warmup=1, batch_sizes=[1, 16], memory=False, speedup_target=None
    )
    choose(panel, export="torch.export")
    send(panel, "measure")
    assert panel.error == "" and panel.measured_mode == "inference"
    base, row = panel.results
    assert row["label"] == "torch.export" and row["error"] is None
    # deviation against an independent export of the same model
    with torch.no_grad():
        eager = mlp.eval()(x)
        exported = torch.export.export(mlp, (x,)).module()(x)
    assert row["max_abs"] == pytest.approx(float((eager - exported).abs().max()), abs=1e-6)
    assert row["rel"] <= 1e-4 and row["cosine"] > 0.99999 and row["drift_path"] is None
    assert row["export_time"] > 0 and base["export_time"] is None
    times = panel.comparison.result("torch.export").step_times
    assert row["step_median"] == pytest.approx(sorted(times)[1]) and row["step_n"] == 3
    assert row["throughput"] == pytest.approx(8 / row["step_time"])
    for r in (base, row):
        assert [b["batch_size"] for b in r["per_batch"]] == [1, 16]
        for b in r["per_batch"]:
            assert b["error"] is None and b["throughput"] == pytest.approx(
                b["batch_size"] / b["step_time"]
            )
    assert any("batch dimension dynamic" in n for n in row["notes"])


def test_unexportable_model_gives_a_one_line_reason_row():
    torch.manual_seed(0)
    lab, got = Lab(), []
    recipe = Recipe(export="torch.export")
    panel = OptimizePanel(
        Blocked(Gate()),
        torch.randn(4, 8),
        recipe=recipe,
        steps=2,
        warmup=0,
        memory=False,
        target=lab,
        on_apply=got.append,
    )
    send(panel, "measure")
    assert panel.error == ""  # the measurement ran; the export row says what failed
    base, row = panel.results
    assert base["error"] is None and base["step_time"] > 0
    err = row["error"]
    assert err.startswith("ExportError: torch.export could not export the model: data-dependent")
    line = inspect.getsourcelines(Gate.forward)[1] + 1
    assert "in module 'tail' (Gate) at " in err and f"py:{line}: if x.sum() > 0:" in err
    assert "\n" not in err and "Traceback" not in err
    send(panel, "apply")  # Apply exports too: the same reason, in the panel's error line
    assert panel.error.startswith("ExportError: torch.export could not export the model")
    assert "\n" not in panel.error and panel.exported is None and got == []


def test_apply_export_gives_the_exported_model_and_leaves_the_lab(mlp):
    lab, got, x = Lab(), [], torch.randn(4, 32)
    panel = OptimizePanel(
        mlp, x, recipe=Recipe(export="torch.export"), target=lab, on_apply=got.append
    )
    assert mlp.training
    send(panel, "apply")
    assert panel.error == "" and got == [Recipe(export="torch.export")]
    assert lab.recipe == Recipe(precision="bf16-mixed")  # a Lab trains: not given an export
    assert "panel.exported holds the model exported by torch.export in " in panel.notice
    assert "target.recipe not changed" in panel.notice
    assert mlp.training  # the panel's model is left as it was
    assert panel.exported.forward.program is not None  # exported on Apply, not later
    with torch.no_grad():
        torch.testing.assert_close(panel.exported(x), mlp.eval()(x))


def test_measure_onnxruntime_row():
    pytest.importorskip("onnxruntime", reason="the export extra: pip install 'labkit[export]'")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    panel = OptimizePanel(
        model,
        torch.randn(8, 16),
        mode="inference",
        steps=2,
        warmup=0,
        memory=False,
        recipe=Recipe(export="onnxruntime"),
    )
    send(panel, "measure")
    assert panel.error == ""
    row = panel.results[1]
    assert row["label"] == "onnxruntime" and row["error"] is None
    assert row["rel"] <= 1e-4 and row["step_time"] > 0 and row["export_time"] > 0
    assert any(n.startswith("ONNX: ") and "CPUExecutionProvider" in n for n in row["notes"])
