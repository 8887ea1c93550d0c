"""labkit.tune's bad inputs (issue 38): each fails first with what to fix, or is handled and
said: a budget below the weights alone, a budget in the wrong unit, a batch without a batch
dimension, a model the plan cannot run (measured instead, saying so), a Recipe space with
refused combinations (skipped with the reason), nothing that fits (the smallest peak and
its set-up named), and an interrupt while timing (the model untouched, the figures so far
kept in the Choice)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor

import labkit
from labkit.optimize.tune import TuneError


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 4))


def _state(model: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(model: nn.Module, before: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


QUICK: dict[str, Any] = {"space": {"precision": ["32"]}, "budget_s": 1, "steps": 2, "warmup": 0}


def test_a_budget_below_the_weights_alone() -> None:
    model = _mlp()  # 8*32+32 + 32*4+4 = 420 floats = 1680 bytes
    with pytest.raises(ValueError, match=r"smaller than the weights alone \(1.64 KiB") as err:
        labkit.tune(model, torch.randn(4, 8), budget=1500)
    assert "Sequential" in str(err.value) and "budget=" in str(err.value)


@pytest.mark.parametrize("budget", [0.5, 8, 999.0], ids=["half", "eight", "999"])
def test_a_budget_in_the_wrong_unit_says_bytes(budget: float) -> None:
    with pytest.raises(ValueError, match=r"is in bytes") as err:
        labkit.tune(_mlp(), torch.randn(4, 8), budget=budget)
    assert f"budget=int({budget!r} * 2**30)" in str(err.value)


@pytest.mark.parametrize(
    ("budget", "error", "text"),
    [
        ("1GiB", TypeError, "number of bytes"),
        (-5, ValueError, "positive"),
        (True, TypeError, "number of bytes"),
    ],
)
def test_a_budget_that_is_not_a_byte_count(budget: Any, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        labkit.tune(_mlp(), torch.randn(4, 8), budget=budget)


def test_no_budget_on_cpu_asks_for_one() -> None:
    with pytest.raises(ValueError, match=r"give budget= in bytes"):
        labkit.tune(_mlp(), torch.randn(4, 8))


@pytest.mark.parametrize(
    ("batch", "named"),
    [(torch.tensor(3.0), "Tensor []"), ({"n": 3, "flag": True}, "n=int, flag=bool")],
    ids=["scalar", "no-tensor"],
)
def test_a_batch_without_a_batch_dimension_is_named(batch: Any, named: str) -> None:
    with pytest.raises(ValueError, match=r"cannot find the batch dimension") as err:
        labkit.tune(_mlp(), batch, budget=2**20)
    assert named in str(err.value)


def test_a_model_on_the_meta_device_cannot_be_timed() -> None:
    with torch.device("meta"):
        model = _mlp()
    with pytest.raises(ValueError, match=r"meta device.*max_batch_size"):
        labkit.tune(model, torch.randn(4, 8), budget=2**20)


@pytest.mark.parametrize(
    ("option", "value", "text"),
    [
        ("budget_s", 0, "budget_s"),
        ("plan_s", -1, "plan_s"),
        ("steps", 1, "steps"),
        ("level", 95, "level"),
        ("batch_sizes", [0, 4], "batch_sizes"),
        ("space", "fast", "space"),
        ("optimizer", "adam", "optimizer"),
    ],
)
def test_bad_options_name_themselves(option: str, value: Any, text: str) -> None:
    with pytest.raises((ValueError, TypeError), match=text):
        labkit.tune(_mlp(), torch.randn(4, 8), budget=2**20, **{option: value})


def test_nothing_fits_names_the_smallest_peak_and_its_set_up() -> None:
    model = _mlp()
    opt = torch.optim.AdamW(model.parameters())
    with pytest.raises(TuneError, match=r"nothing fits the budget of 3.91 KiB") as err:
        labkit.tune(
            model,
            torch.randn(64, 8),
            budget=4000,
            optimizer=opt,
            batch_sizes=[2, 64],
            space={"precision": ["32"]},
        )
    msg = str(err.value)
    assert "the smallest predicted peak is" in msg and "from fp32 at batch 2" in msg
    smallest = min(c.predicted_peak for c in err.value.candidates if c.predicted_peak)
    assert smallest == labkit.plan(model, torch.randn(2, 8), optimizer=opt).peak_bytes


def test_a_space_with_refused_combinations_skips_them_with_the_reason() -> None:
    space = [{"precision": "32"}, {"precision": "16-mixed", "quantization": "int8-dynamic"}]
    choice = labkit.tune(
        _mlp(), torch.randn(8, 8), budget=2**20, batch_sizes=[8], **{**QUICK, "space": space}
    )
    refused = [c for c in choice.candidates if c.status == "refused"]
    assert len(refused) == 1 and refused[0].recipe is None
    assert "quantization='int8-dynamic'" in refused[0].label
    assert "precision='16-mixed' is not supported" in refused[0].reason
    assert "refused: Recipe: quantization" in choice.summary()


class NeedsValues(nn.Module):
    """A forward with a Python ``if`` on a tensor's value: fake tensors have no values."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        if h.mean().item() > 100:  # never true; the plan cannot know
            h = h * 0
        return self.b(torch.relu(h))


def test_a_model_the_plan_cannot_run_is_measured_at_small_batches_saying_so() -> None:
    model = NeedsValues()
    before = _state(model)
    choice = labkit.tune(model, torch.randn(8, 8), budget=2**20, batch_sizes=[4, 8, 16], **QUICK)
    note = next(n for n in choice.notes if "cannot run this model" in n)
    assert ".item()" in note or "depends on the tensor's values" in note
    assert "measured instead with labkit.memory" in note and "up to yours (8)" in note
    by_size = {c.batch_size: c for c in choice.candidates}
    assert by_size[4].measured == by_size[8].measured == "measured"
    assert by_size[16].status == "skipped" and "cannot be planned" in by_size[16].reason
    assert choice.batch_size in (4, 8) and choice.flops_per_s is None
    assert choice.measured_peak is not None and choice.measured_peak <= 2**20
    assert _same(model, before)


_CALLS = [0]  # real forwards of every copy of Interrupting (a copy's attributes are copies)


class Interrupting(nn.Module):
    """Raises KeyboardInterrupt (as Ctrl-C in a notebook does) at its N-th real forward."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.at = at

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, FakeTensor):  # planning runs on fake tensors: not counted
            _CALLS[0] += 1
            if _CALLS[0] == self.at:
                raise KeyboardInterrupt
        return self.lin(x)


def test_an_interrupt_while_timing_keeps_the_figures_so_far_and_the_model() -> None:
    _CALLS[0] = 0
    calls = _CALLS
    model = Interrupting(at=7)  # warm-up: calls 1-2, rounds: 3-4, 5-6, then 7
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    before, opt_before = _state(model), opt.state_dict()
    x = torch.randn(8, 8)
    rng = torch.get_rng_state()
    choice = labkit.tune(
        model,
        x,
        budget=2**20,
        optimizer=opt,
        batch_sizes=[4, 8],
        space={"precision": ["32"]},
        budget_s=30,
        steps=5,
        warmup=1,
    )
    assert calls[0] == 7
    assert choice.ended_by == "interrupted" and choice.measured_peak is None
    assert any("interrupted" in n for n in choice.notes)
    assert choice.samples_per_s is not None
    assert all(c.rounds == 2 for c in choice.candidates if c.samples_per_s is not None)
    assert _same(model, before) and opt.state_dict() == opt_before
    assert torch.equal(torch.get_rng_state(), rng)
