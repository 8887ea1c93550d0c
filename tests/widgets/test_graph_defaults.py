"""What a graph opens with: library layers collapsed at the default depth."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import labkit
from labkit.trace.graph import default_expanded
from labkit.widgets import GraphView
from labkit.widgets._payload import library_layer


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
    cfg = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=32, max_position_embeddings=16)  # fmt: skip
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
    assert convs and all(library_layer(n.type) for n in convs)
    view = GraphView(t)
    boxes = view.visible().boxes
    assert all(n.id in boxes for n in convs), [n.name for n in convs]
    assert len(boxes) < 12  # the convs' ~60 ops stay inside them


def test_library_layer_names():
    for name in ("GATConv", "GATv2Conv", "GCNConv", "MultiheadAttention", "BertSelfAttention",
                 "GPT2Attention", "LlamaSdpaAttention"):  # fmt: skip
        assert library_layer(name), name
    for name in ("Conv2d", "Conv1d", "Linear", "Block", "Sequential", "AttentionPool"):
        assert not library_layer(name), name
