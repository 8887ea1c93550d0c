"""Rolled blocks tell the truth: every call of a rolled block is found, with its own figures."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import labkit
from labkit.trace.roll import instance_levels
from labkit.views import GraphView
from labkit.views._payload import graph_payload, instance_metrics


class Mlp(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(torch.relu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.mlp = Mlp(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.ln(x))


class Tiny(nn.Module):
    """A GPT-shaped stack: six identical blocks, each with two heads of two layers."""

    def __init__(self, d: int = 8, n: int = 6) -> None:
        super().__init__()
        self.emb = nn.Linear(d, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(n))
        self.out = nn.Linear(d, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.emb(x)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return labkit.trace(Tiny(), torch.randn(3, 8))


def test_each_call_knows_its_block_and_place(tiny):
    levels = instance_levels(tiny)
    by_name = {tiny.nodes[i].name: lv for i, lv in levels.items()}
    head = next(n.id for n in tiny.nodes if n.name == "blocks.0")
    assert by_name["blocks.4.mlp"] == [(head, 4, 6)]
    assert by_name["blocks.0.mlp.fc"] == [(head, 0, 6)]
    assert "emb" not in by_name and "out" not in by_name
    # unrolled: no levels for that block
    assert instance_levels(tiny, frozenset({"blocks.0-5"})) == {}


def test_payload_sends_every_instance_with_its_own_figures(tiny):
    g = graph_payload(tiny)
    inst = g["instances"]
    e = inst["name"].index("blocks.4.mlp")
    drawn = g["name"][inst["node"][e]]
    assert drawn == "blocks.0.mlp"  # the box that shows it
    entry, call = inst["where"][e]
    assert g["rolled"][entry][1:] == [6, "blocks.0-5"] and call == 4
    figures = instance_metrics(tiny, g)
    # one call's parameters: Linear(8, 32) + Linear(32, 8), by arithmetic
    assert figures["params"][e] == (8 * 32 + 32) + (32 * 8 + 8)
    # one call's FLOPs (forward + backward) as torch's FlopCounterMode counts that module
    torch.manual_seed(0)
    model, x = Tiny(), torch.randn(3, 8)
    with FlopCounterMode(display=False) as counter:
        model(x).sum().backward()
    reference = sum(counter.get_flop_counts()["Tiny.blocks.4.mlp"].values())
    assert figures["flops"][e] == pytest.approx(reference, rel=1e-3)
    # the drawn box sums the six calls: six times one call (identical blocks)
    k = g["name"].index("blocks.0.mlp")
    view = GraphView(tiny)
    assert view.metrics["params"][k] == 6 * figures["params"][e]
    assert view.instance_metrics == figures


def test_unroll_a_block_and_all_survives_updates(tiny):
    view = GraphView(tiny)
    assert "blocks.4.mlp" not in view.graph["name"]
    view.unrolled = ["blocks.0-5"]
    assert "blocks.4.mlp" in view.graph["name"] and view.graph["rolled"] == []
    assert view.graph["instances"]["name"] == []
    view.update(tiny)
    view.flush()
    assert view.unrolled == ["blocks.0-5"] and "blocks.4.mlp" in view.graph["name"]
    view.unrolled = []
    assert "blocks.4.mlp" not in view.graph["name"]
    view.rolled = False
    assert "blocks.4" in view.graph["name"] and not view.graph["rolled"]
    assert view.visible().boxes  # the Python rules follow the same choice
    assert "blocks.4" in {tiny.nodes[i].name for i in view.visible().groups + view.visible().boxes}


def test_break_marks_follow_an_unrolled_block(tiny):
    view = GraphView(tiny, breaks=[{"module": "blocks.4.mlp", "reason": "print()"}])
    ids = {n.name: n.id for n in tiny.nodes}
    assert set(view.marks) == {str(ids["blocks.0.mlp"])}  # rolled: on the box that shows it
    view.unrolled = ["blocks.0-5"]
    assert set(view.marks) == {str(ids["blocks.4.mlp"])}  # drawn call by call: its own call
    assert str(ids["blocks.4.mlp"]) in {str(i) for i in view.graph["ids"]}
