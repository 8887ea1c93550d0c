"""PyG layers whose shapes depend on float values: the plan says so and changes nothing.

``dropout_edge`` keeps the edges where ``torch.rand(E) >= p`` and ``TopKPooling`` keeps
the nodes of the highest (learned) scores, then the edges among them: how many edges the
next layer sees depends on random or learned floating-point values, which fake tensors do
not have (IndexValues copies integer and boolean tensors only). The plan stops there with
a PlanError naming the op and the module, leaves the model, its ``.grad`` and the global
RNG as they were, and ``labkit.memory`` (a real step) measures what torch's MemTracker does
from the same RNG state.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit.plan.errors import PlanError
from tests.plan._memtracker import memtracker_peak
from tests.realworld.models import _graph, _graphs, _pyg_nn


class DropEdgeGCN(nn.Module):
    """GCN with ``dropout_edge`` and ``dropout_node`` in forward (DropEdge)."""

    def __init__(self, in_channels: int, classes: int) -> None:
        super().__init__()
        pyg = _pyg_nn().nn
        self.conv1 = pyg.GCNConv(in_channels, 16)
        self.conv2 = pyg.GCNConv(16, classes)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
        from torch_geometric.utils import dropout_edge, dropout_node

        kept, _ = dropout_edge(edge_index, p=0.3, training=self.training)
        x = self.conv1(x, kept).relu()
        kept, _, _ = dropout_node(edge_index, p=0.2, training=self.training)
        return self.conv2(x, kept)


class TopKNet(nn.Module):
    """GraphConv, TopKPooling (half the nodes of each graph), GraphConv, mean pooling."""

    def __init__(self) -> None:
        super().__init__()
        pyg = _pyg_nn().nn
        self.conv1 = pyg.GraphConv(8, 16)
        self.pool = pyg.TopKPooling(16, ratio=0.5)
        self.conv2 = pyg.GraphConv(16, 16)
        self.head = nn.Linear(16, 3)

    def forward(
        self, x: torch.Tensor, edge_index: torch.Tensor, batch: torch.Tensor
    ) -> torch.Tensor:
        x = self.conv1(x, edge_index).relu()
        x, edge_index, _, batch, _, _ = self.pool(x, edge_index, None, batch)
        x = self.conv2(x, edge_index).relu()
        return self.head(_pyg_nn().nn.global_mean_pool(x, batch))


def _dropedge() -> tuple[nn.Module, tuple[torch.Tensor, ...], object, str]:
    data = _graph(None, 0)
    torch.manual_seed(0)
    model = DropEdgeGCN(data.num_features, int(data.y.max()) + 1)

    def loss(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(out[data.train_mask], data.y[data.train_mask])

    return model, (data.x, data.edge_index), loss, "DropEdgeGCN.forward"


def _topk() -> tuple[nn.Module, tuple[torch.Tensor, ...], object, str]:
    data = _graphs(0, 6, 12, 8)
    torch.manual_seed(0)
    y = data.y.clone()
    return TopKNet(), (data.x, data.edge_index, data.batch), lambda o: F.cross_entropy(o, y), "pool"


CASES = {"dropout-edge-node": _dropedge, "topk-pooling": _topk}


def _state(model: nn.Module) -> dict[str, object]:
    out: dict[str, object] = {k: v.clone() for k, v in model.state_dict().items()}
    for k, p in model.named_parameters():
        out[f"grad {k}"] = None if p.grad is None else p.grad.clone()
        out[f"requires_grad {k}"] = p.requires_grad
    out["training"] = [m.training for m in model.modules()]
    out["rng"] = torch.get_rng_state()
    return out


def _same(a: dict[str, object], b: dict[str, object]) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(v, b[k]) if isinstance(v, torch.Tensor) else v == b[k] for k, v in a.items()
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_shape_from_float_values_stops_the_plan_and_changes_nothing(name: str) -> None:
    model, args, loss, where = CASES[name]()
    model(*args).sum().backward()  # the user's loop ran before: .grad exist
    before = _state(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    with pytest.raises(PlanError, match=r"aten\.nonzero") as err:
        labkit.plan(model, args, loss=loss, optimizer=opt, progress=False)
    assert where in str(err.value)
    assert _same(_state(model), before) and not opt.state


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_real_step_measures_what_memtracker_does_from_the_same_rng(name: str) -> None:
    model, args, loss, _ = CASES[name]()
    torch.manual_seed(3)
    before = _state(model)
    measured = labkit.memory(
        model, args, loss=loss, optimizer=torch.optim.Adam(model.parameters()), progress=False
    )
    assert _same(_state(model), before)
    torch.manual_seed(3)
    ref = memtracker_peak(model, torch.optim.Adam(model.parameters()), args, loss)
    assert measured.peak_bytes == ref
