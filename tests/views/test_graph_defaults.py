"""What a graph opens with: library layers collapsed at the default depth."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import labkit
from labkit.trace.graph import default_expanded
from labkit.views import GraphView
from labkit.views._payload import library_layers


class WithAttention(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 2, batch_first=True)
        self.out = nn.Linear(d, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.attn(x, x, x)[0])


def _names(trace, ids):
    return {trace.nodes[i].name for i in ids}


def test_multihead_attention_is_one_box():
    torch.manual_seed(0)
    t = labkit.trace(WithAttention(), torch.randn(2, 3, 8))
    view = GraphView(t)
    assert "attn" in {t.nodes[i].name for i in view.visible().boxes}
    assert "" in _names(t, view.expanded)  # the model itself opens, whatever its name


def test_hugging_face_attention_opens_collapsed():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    t = labkit.trace(BertModel(cfg).eval(), input_ids=torch.randint(0, 50, (2, 6)))
    attn = [n for n in t.nodes if n.kind == "module" and n.type.endswith("Attention")]
    assert attn
    view = GraphView(t, depth=6)
    deep = _names(t, default_expanded(t, 6))
    assert {n.name for n in attn} & deep  # opened by depth alone, but for the rule
    assert not {n.name for n in attn} & _names(t, view.expanded)
    view.depth = 8
    assert not {n.name for n in attn} & _names(t, view.expanded)  # a depth change too
    first = attn[0].id
    view.expanded = [*view.expanded, first]
    assert first in view.visible().groups  # opened by hand


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_pyg_convs_open_collapsed():
    from labkit.gnn import GAT, karate

    torch.manual_seed(0)
    data = karate()
    t = labkit.trace(GAT(data.num_features, 4, 4, heads=2), data.x, data.edge_index)
    convs = [n for n in t.nodes if n.kind == "module" and n.type.endswith("Conv")]
    assert convs and all(n.id in library_layers(t) for n in convs)
    assert {t.module_by_path[n.module].library for n in convs} == {
        "torch_geometric.nn.conv.gat_conv"
    }
    view = GraphView(t)
    boxes = view.visible().boxes
    assert all(n.id in boxes for n in convs), [n.name for n in convs]
    assert len(boxes) < 12  # the convs' ~60 ops stay inside them


class MyAttention(nn.Module):
    """The user's own attention: named like a library's, but the user's code."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.q, self.k = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.q(x) @ self.k(x).transpose(1, 2), -1) @ x


class Mixed(nn.Module):
    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.mine = MyAttention(d)
        self.mlp = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d))
        self.mha = nn.MultiheadAttention(d, 2, batch_first=True)
        self.enc = nn.TransformerEncoderLayer(d, 2, 16, batch_first=True, dropout=0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.mlp(self.mine(x))
        return self.enc(x + self.mha(x, x, x)[0])


def test_library_layers_by_structure_not_by_name():
    torch.manual_seed(0)
    t = labkit.trace(Mixed().train(), torch.randn(2, 3, 8))
    calls = {n.name: n.id for n in t.nodes if n.kind == "module"}
    layers = {t.nodes[i].name for i in library_layers(t)}
    assert t.module_by_path["mine"].library == ""  # defined here, in the user's code
    assert t.module_by_path["mha"].library.startswith("torch.nn.")
    assert "mine" not in layers  # "...Attention", but the user's: opens by depth
    assert "mlp" not in layers  # the user's Sequential of torch layers: the user's structure
    assert "enc" in layers  # torch's encoder layer: its attention, norms and adds inside
    assert "enc.self_attn" in layers  # a library call inside a library call
    view = GraphView(t, depth=4)
    opened = _names(t, view.expanded)
    assert {"mine", "mlp"} <= opened and not {"enc", "enc.self_attn"} & opened
    assert calls["enc"] in view.visible().boxes
    # a trace from a file written before labkit recorded libraries: nothing is a layer
    old = t.replace(modules=tuple(dataclasses.replace(m, library="") for m in t.modules))
    assert library_layers(old) == set()


def test_tiny_gpt2_attention_and_blocks_open_collapsed():
    from transformers import GPT2Config, GPT2Model

    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=50, n_positions=16, n_embd=16, n_layer=2, n_head=2)
    t = labkit.trace(GPT2Model(cfg).eval(), input_ids=torch.randint(0, 50, (2, 6)))
    layers = {t.nodes[i].name for i in library_layers(t)}
    attn = {n.name for n in t.nodes if n.kind == "module" and n.type == "GPT2Attention"}
    assert attn and attn <= layers
    assert "h.0" in layers  # a block of two layers: one box
    view = GraphView(t, depth=8)
    assert "" in _names(t, view.expanded)  # the model itself opens
    assert not attn & _names(t, view.expanded)
