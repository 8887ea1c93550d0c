from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

import labkit
from tests.trace._models import Encoder, ResCNN, Tied

GOLDEN = Path(__file__).parent / "golden"
STABLE = ("type", "calls", "output", "params", "flops_fwd", "flops_bwd", "act")


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("LABKIT_UPDATE_GOLDEN"):
        path.write_text(text + "\n")
    assert text + "\n" == path.read_text(), f"{path} differs; LABKIT_UPDATE_GOLDEN=1 rewrites it"


@pytest.fixture(scope="module")
def cnn_trace() -> labkit.Trace:
    torch.manual_seed(0)
    return labkit.trace(ResCNN(), torch.randn(2, 3, 12, 12))


@pytest.mark.parametrize("depth", [0, 1, 2, None])
def test_summary_golden_rescnn(cnn_trace: labkit.Trace, depth: int | None) -> None:
    _check_golden(f"rescnn_depth_{depth}", cnn_trace.summary(depth=depth, columns=STABLE))


def test_summary_golden_rolled_transformer() -> None:
    torch.manual_seed(0)
    t = labkit.trace(Encoder(layers=3), torch.randn(2, 5, 16))
    _check_golden("transformer_rolled", t.summary(depth=3, columns=STABLE, rolled=True))


def test_summary_default_columns_include_times(cnn_trace: labkit.Trace) -> None:
    head = cnn_trace.summary(depth=0).splitlines()[0]
    assert head.split() == [
        "Module",
        "Type",
        "Calls",
        "Output",
        "Params",
        "FLOPs",
        "fwd",
        "FLOPs",
        "bwd",
        "Fwd",
        "Fwd",
        "IQR",
        "Bwd",
        "Bwd",
        "IQR",
        "Activations",
    ]
    with pytest.raises(ValueError, match=r"unknown summary columns \['speed'\]"):
        cnn_trace.summary(columns=("speed",))


def test_rows_are_plain_and_inclusive(cnn_trace: labkit.Trace) -> None:
    rows = {r["path"]: r for r in cnn_trace.rows()}
    root, blocks = rows[""], rows["blocks"]
    assert root["params"] == cnn_trace.total_params
    assert blocks["flops_fwd"] == sum(rows[f"blocks.{i}"]["flops_fwd"] for i in range(3))
    assert root["flops_fwd"] + root["flops_bwd"] == cnn_trace.total_flops
    assert rows["blocks.0.conv1"]["input_shapes"] == [[2, 8, 12, 12]]
    for r in rows.values():
        assert r["fwd_self_time"] <= r["fwd_time"] + 1e-12
        assert all(isinstance(v, (int, float, str, list)) for v in r.values())


def test_top_by_each_figure(cnn_trace: labkit.Trace) -> None:
    by_flops = cnn_trace.top(3, by="flops")
    assert [r["type"] for r in by_flops] == ["Conv2d"] * 3
    assert by_flops[0]["value"] >= by_flops[-1]["value"]
    assert cnn_trace.top(1, by="params")[0]["path"].endswith("conv1") or cnn_trace.top(
        1, by="params"
    )[0]["path"].endswith("conv2")
    assert len(cnn_trace.top(100, by="time")) <= len(cnn_trace.modules)
    with pytest.raises(ValueError, match="by must be one of"):
        cnn_trace.top(3, by="speed")


def test_to_pandas(cnn_trace: labkit.Trace) -> None:
    df = cnn_trace.to_pandas()
    assert df.loc["blocks.1.conv2", "type"] == "Conv2d"
    assert len(df) == len(cnn_trace.modules)


def test_shared_module_rows() -> None:
    t = labkit.trace(Tied(), torch.randint(0, 20, (2, 3)))
    text = t.summary(columns=("type", "calls", "params"))
    cells = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line[:2] == "  "}
    mix = sum(p.numel() for p in Tied().mix.parameters())  # 8 * 8 + 8, counted once
    assert cells["mix"] == ["Linear", "2", str(mix)]  # called twice, parameters once
    assert cells["out"] == ["Linear", "1", "0"]  # its weight is the embedding's
    rows = {r["path"]: r for r in t.rows()}
    assert rows["out"]["shared_params"] == 20 * 8 and rows["out"]["params"] == 0
