"""The largest batch that fits: bisection over predicted peaks, checked by measuring."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit.plan import max_batch_size, search
from labkit.plan.batch import batch_size, resize
from tests.plan.models import GPT


def _peaks(fn):
    calls: list[int] = []

    def replan(n: int) -> SimpleNamespace:
        calls.append(n)
        return SimpleNamespace(peak_bytes=fn(n))

    return replan, calls


@pytest.mark.parametrize("budget", [1_000, 1_037, 5_000, 123_456, 10**7])
@pytest.mark.parametrize(
    "fn",
    [lambda n: 1_000 + 37 * n, lambda n: 900 + 30 * n + 400 * (n // 64), lambda n: 100 + n * n],
    ids=["linear", "steps", "quadratic"],
)
def test_search_finds_what_a_scan_finds(fn, budget: int) -> None:
    replan, calls = _peaks(fn)
    got = search(replan, budget, "cpu", limit=5000)
    want = max((n for n in range(1, 5001) if fn(n) <= budget), default=0)
    assert got.batch == want
    assert got.peak_bytes == (fn(want) if want else fn(1))
    assert len(calls) == len(set(calls)) == len(got.tried) <= 30  # a few plans, none twice


def test_search_stops_at_the_limit_and_wants_a_budget_on_cpu() -> None:
    replan, _ = _peaks(lambda n: n)
    assert search(replan, 10**9, "cpu", limit=100).batch == 100
    with pytest.raises(ValueError, match=r"give budget= in bytes"):
        search(replan, None, "cpu")


def test_resize_scales_the_batch_dimension() -> None:
    x, y = torch.arange(6.0).reshape(3, 2), torch.tensor([0, 1, 2])
    w = torch.ones(2)  # not batched: its first dimension is not the batch size
    bx, by, bw = resize((x, y, w), 5)
    assert bx.shape == (5, 2) and torch.equal(by, torch.tensor([0, 1, 2, 0, 1])) and bw is w
    assert resize({"idx": torch.empty(4, 7, device="meta")}, 9)["idx"].shape == (9, 7)
    assert resize(torch.Size([4, 3]), 2) == torch.Size([2, 3])
    assert batch_size({"a": [torch.zeros(7, 2)]}) == 7 and batch_size(3.0) is None


def test_max_batch_size_fits_by_measurement() -> None:
    torch.manual_seed(0)
    model = GPT()
    idx = torch.randint(0, 100, (2, 32))

    def loss(out: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(
            out.flatten(0, 1), torch.zeros(out.shape[0] * out.shape[1], dtype=torch.long)
        )

    budget = 3 << 20
    opt = lambda ps: torch.optim.AdamW(ps)  # noqa: E731
    r = max_batch_size(model, idx, budget, loss=loss, optimizer=opt, verify=True)
    assert r.batch > 2 and r.how == "given" and r.budget == budget
    # the independent check: real steps measured at the answer and one above it
    assert all(p.grad is None for p in model.parameters())
    at = labkit.memory(model, resize(idx, r.batch), loss=loss, optimizer=opt(model.parameters()))
    model.zero_grad(set_to_none=True)
    above = labkit.memory(
        model, resize(idx, r.batch + 1), loss=loss, optimizer=opt(model.parameters())
    )
    assert at.peak_bytes <= budget < above.peak_bytes
    assert r.measured_bytes == at.peak_bytes and r.peak_bytes == at.peak_bytes
    assert f"batch={r.batch}" in repr(r) and "+0.0% predicted" in repr(r)
    # the method on a plan gives the same answer
    model.zero_grad(set_to_none=True)
    plan = labkit.plan(model, idx, loss=loss, optimizer=opt)
    assert plan.max_batch_size(budget=budget) == r.batch


def test_not_even_one_fits() -> None:
    model = nn.Linear(1000, 1000)
    r = max_batch_size(model, torch.randn(8, 1000), budget=1 << 20)
    assert r.batch == 0 and r.peak_bytes > 1 << 20
