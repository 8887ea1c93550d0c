"""Deviation, drift and loss figures hold dropout still; timed steps keep it on."""

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from labkit.optimize import Recipe, compare
from labkit.optimize._random import held_randomness
from labkit.optimize.drift import deviation


class Noisy(nn.Module):
    """Dropout three ways: a module, attention dropout, and a functional call."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.drop = nn.Dropout(0.5)
        self.attn = nn.MultiheadAttention(32, 4, dropout=0.3, batch_first=True)
        self.out = nn.Linear(32, 4)
        self.p = 0.2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.drop(torch.relu(self.inp(x)))
        h = self.attn(h, h, h, need_weights=False)[0]
        return self.out(F.dropout(h, self.p, self.training))


def without_dropout(model: Noisy) -> Noisy:
    ref = copy.deepcopy(model)
    ref.drop.p, ref.attn.dropout, ref.p = 0.0, 0.0, 0.0
    return ref


@pytest.fixture
def noisy():
    torch.manual_seed(0)
    return Noisy().train()


@pytest.fixture
def batch():
    torch.manual_seed(1)
    return torch.randn(4, 6, 16)


def test_deviation_is_zero_for_recipes_that_keep_numerics(noisy, batch):
    recipes = {
        "fp32 again": Recipe(),
        "ckpt": Recipe(checkpoint=("attn",)),
        "bf16": Recipe(precision="bf16-mixed"),
    }
    cmp = compare(noisy, batch, recipes, steps=2, warmup=0, memory=False, loss_steps=2, target=None)
    base, again, ck, bf16 = cmp.results
    for r in (again, ck):
        assert r.error is None
        assert r.max_abs == 0.0 and r.rel == 0.0 and r.drift_path is None
        assert r.losses == base.losses
    # independent reference: the same model with every dropout rate set to 0
    ref = without_dropout(noisy)
    with torch.no_grad():
        ref_out = ref(batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            ref_bf16 = ref(batch)
    assert base.losses[0] == pytest.approx(float(ref_out.mean()), rel=1e-6)
    expected = deviation(ref_out.reshape(-1), ref_bf16.float().reshape(-1))
    assert bf16.rel == pytest.approx(expected[1], rel=1e-6)
    assert bf16.rel < 2e-2 and bf16.cosine > 0.999  # bf16's 8-bit mantissa: ~4e-3 per rounding
    text = cmp.summary()
    assert (
        "- randomness: deviation, drift and loss (2 controlled steps from the starting weights) "
        "figures: dropout off in 2 modules (Dropout x1, MultiheadAttention x1) and in "
        "functional calls, seed 0 and the same batch for every recipe; timed steps run in "
        "training mode with dropout on"
    ) in text
    assert noisy.training and noisy.drop.training and noisy.attn.dropout == 0.3


def test_held_randomness_restores_and_counts(noisy, batch):
    with held_randomness(noisy) as held, torch.no_grad():
        a, b = noisy(batch), noisy(batch)
    assert torch.equal(a, b)
    assert held.describe() == (
        "dropout off in 2 modules (Dropout x1, MultiheadAttention x1); "
        "2 functional dropout calls made identity"
    )
    assert noisy.drop.training and noisy.attn.dropout == 0.3
    with torch.no_grad():
        assert not torch.equal(noisy(batch), noisy(batch))  # dropout is back


def test_sdpa_dropout_is_held():
    q = torch.randn(2, 2, 5, 8)
    with held_randomness(nn.Identity()) as held:
        a = F.scaled_dot_product_attention(q, q, q, dropout_p=0.9)
    assert torch.allclose(a, F.scaled_dot_product_attention(q, q, q))
    assert held.functional_calls == 1


class MaskedAttention(nn.Module):
    """Attention as Hugging Face models write it: SDPA with a mask and dropout in training."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(32, 96), nn.Linear(32, 32)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 4, 8).permute(2, 0, 3, 1, 4)
        p = 0.1 if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        return x + self.out(y.transpose(1, 2).reshape(b, t, 32))


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(MaskedAttention() for _ in range(2))
        self.head = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x, mask)
        return self.head(x.mean(1))


def test_checkpoint_recomputes_with_dropout_held_as_in_the_forward():
    # with SDPA's dropout_p held at 0 in the forward but not in the recompute, the two take
    # different CPU kernels and checkpoint refuses ("different metadata"); held in both,
    # checkpointing changes no number
    torch.manual_seed(0)
    x, mask = torch.randn(4, 16, 32), torch.zeros(4, 1, 16, 16)
    mask[..., 12:] = float("-inf")
    cmp = compare(
        Encoder(),
        {"x": x, "mask": mask},
        Recipe(checkpoint=["blocks.*"]),
        steps=1,
        warmup=0,
        memory=False,
        drift=False,
        target=None,
    )
    r = cmp.result("ckpt(blocks.*)")
    assert r.error is None, r.error
    assert r.max_abs == 0.0 and r.losses == cmp.result("fp32").losses
