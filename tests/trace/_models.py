"""Tiny models covering what the recorder must handle; shared by the trace tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, d_in: int = 8, hidden: int = 16, d_out: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


class ResCNN(nn.Module):
    def __init__(self, c: int = 8, blocks: int = 3, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.blocks = nn.Sequential(*[Block(c) for _ in range(blocks)])
        self.head = nn.Linear(c, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Encoder(nn.Module):
    def __init__(self, d: int = 16, layers: int = 2) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=32, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.out = nn.Linear(d, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.encoder(x).mean(1))


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(6, 8, batch_first=True)
        self.gru = nn.GRU(8, 8, batch_first=True)
        self.head = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.lstm(x)
        h, _ = self.gru(h)
        return self.head(h[:, -1])


class Branchy(nn.Module):
    """Data-dependent control flow: the graph depends on the input."""

    def __init__(self) -> None:
        super().__init__()
        self.pos = nn.Linear(4, 4)
        self.neg = nn.Linear(4, 4)
        self.loop = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pos(x) if x.sum() > 0 else self.neg(x)
        for _ in range(int(x.shape[0])):
            x = torch.tanh(self.loop(x))
        return x


class Tied(nn.Module):
    """Weight sharing: one Linear called twice, and an embedding tied to the output layer."""

    def __init__(self, vocab: int = 20, d: int = 8) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.mix = nn.Linear(d, d)
        self.out = nn.Linear(d, vocab, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.emb(tokens)
        h = self.mix(torch.relu(self.mix(h)))
        return self.out(h)


class Interrupting(nn.Module):
    """Raises KeyboardInterrupt after one child call, as a user pressing Ctrl-C would."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.lin(x)
        raise KeyboardInterrupt


@dataclass
class Batch:
    image: torch.Tensor
    extra: torch.Tensor


class Pair(NamedTuple):
    logits: torch.Tensor
    features: torch.Tensor


class Structured(nn.Module):
    """Keyword, dict, tuple and dataclass inputs; dict and named-tuple outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, batch: Batch, pair: tuple, *, scale: dict) -> dict:
        h = self.a(batch.image) + self.b(batch.extra) * scale["w"]
        h = h + pair[0] - pair[1]
        return {"out": Pair(h.sum(-1), h), "aux": [h.mean()]}


def structured_inputs() -> tuple[tuple, dict]:
    b = Batch(torch.randn(3, 4), torch.randn(3, 4))
    return (b, (torch.randn(3, 4), torch.randn(3, 4))), {"scale": {"w": torch.randn(3, 4)}}


def zoo() -> dict[str, tuple[nn.Module, tuple, dict]]:
    """name -> (model, args, kwargs) with fixed seeds."""
    torch.manual_seed(0)
    args_s, kwargs_s = structured_inputs()
    return {
        "mlp": (MLP(), (torch.randn(5, 8),), {}),
        "rescnn": (ResCNN(), (torch.randn(2, 3, 12, 12),), {}),
        "transformer": (Encoder(), (torch.randn(2, 5, 16),), {}),
        "recurrent": (Recurrent(), (torch.randn(2, 7, 6),), {}),
        "branchy": (Branchy(), (torch.randn(3, 4),), {}),
        "tied": (Tied(), (torch.randint(0, 20, (2, 5)),), {}),
        "structured": (Structured(), args_s, kwargs_s),
    }


def gat_model() -> tuple[nn.Module, tuple, dict]:
    from torch_geometric.datasets import KarateClub
    from torch_geometric.nn import GATConv

    class GAT(nn.Module):
        def __init__(self, d_in: int, classes: int) -> None:
            super().__init__()
            self.conv1 = GATConv(d_in, 8, heads=2)
            self.conv2 = GATConv(16, classes, heads=1)

        def forward(self, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
            return self.conv2(F.elu(self.conv1(x, edge_index)), edge_index)

    torch.manual_seed(0)
    data = KarateClub()[0]
    return GAT(data.num_features, 4), (data.x, data.edge_index), {}
