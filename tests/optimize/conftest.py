"""Tiny models shared by the optimize tests."""

from __future__ import annotations

import pytest
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, d: int = 32, hidden: int = 64, classes: int = 4) -> None:
        super().__init__()
        self.blocks = nn.Sequential(
            nn.Sequential(nn.Linear(d, hidden), nn.GELU()),
            nn.Sequential(nn.Linear(hidden, hidden), nn.GELU()),
        )
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1),
            nn.BatchNorm2d(8),
            nn.ReLU(),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.features(x)).flatten(1))


@pytest.fixture(autouse=True)
def no_measured_speedups():
    """Each test starts with no speed-ups measured earlier in the process: advise ranks by
    what compare measured (``MEASURED``), so a compare run by another test, in another
    file or on the same pytest worker, would re-rank its suggestions."""
    from labkit.optimize.bench import MEASURED

    saved = dict(MEASURED)
    MEASURED.clear()
    yield
    MEASURED.clear()
    MEASURED.update(saved)


@pytest.fixture
def mlp() -> MLP:
    torch.manual_seed(0)
    return MLP()


@pytest.fixture
def x() -> torch.Tensor:
    torch.manual_seed(1)
    return torch.randn(8, 32)


@pytest.fixture
def convnet() -> ConvNet:
    torch.manual_seed(0)
    net = ConvNet()
    # give BatchNorm non-trivial statistics, as a trained net has
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
    return net


def state_equal(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(
        type(sa[k]) is type(sb[k]) and torch.equal(sa[k], sb[k]) for k in sa
    )


class Block(nn.Module):
    """A pre-norm transformer block as research code writes it: fused qkv, SDPA with
    attention dropout, a GELU MLP with dropout."""

    def __init__(self, d: int = 8, heads: int = 2, p: float = 0.1) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d), nn.Dropout(p))
        self.heads, self.p = heads, p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        p = self.p if self.training else 0.0
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyTransformer(nn.Module):
    def __init__(self, d: int = 8, n_blocks: int = 1) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block(d) for _ in range(n_blocks)])
        self.head = nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def quick_compare(model: nn.Module, batch: object, recipes: list, **options: object) -> object:
    """``labkit.compare`` with one timed step, no warm-up, memory, drift or target: the
    quickest full run, for tests about what compare does rather than what it measures."""
    import labkit

    quick = {"steps": 1, "warmup": 0, "memory": False, "drift": False, "loss_steps": 1}
    return labkit.compare(model, batch, recipes, **quick, target=None, progress=False, **options)
