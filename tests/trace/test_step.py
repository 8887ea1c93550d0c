"""The public step (labkit.trace.Step, record_step) and state saving (StepState)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from labkit.memory.tracker import MemoryTracker
from labkit.trace import Step, StepState, record_step
from labkit.trace.instrument import Observer
from labkit.trace.step import (
    DEFAULT_LOSS_NOTE,
    FREE_OUTPUT_NOTE,
    KEEP_OUTPUT_NOTE,
    backward_target,
    default_loss,
)
from tests.trace.conftest import assert_clean


def test_step_and_state_reprs() -> None:
    model = nn.Linear(3, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = Step(model, (torch.randn(2, 3),), {"unused": None}, optimizer=opt)
    assert repr(step) == (
        "Step(model=Linear, args=1, kwargs=['unused'], loss=False, optimizer=SGD, "
        "backward=True, keep_output=True)"
    )
    assert repr(step.state()) == "StepState(model=Linear, tensors=3, optimizers=1, rng=True)"


class _Counts(Observer):
    """Counts module calls: an observer of the one step, as drift or deploy checks are."""

    def __init__(self) -> None:
        self.calls = 0

    def call(self, node, module, args, kwargs) -> None:  # type: ignore[no-untyped-def]
        self.calls += 1


def test_record_step_takes_observers_and_leaves_no_hook() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 1))
    seen = _Counts()
    t = record_step(Step(model, (torch.randn(5, 4),)), mode="timing", observers=[seen])
    assert seen.calls == 4 and t.meta.calls == 1
    assert_clean(model)
    assert all(p.grad is None for p in model.parameters())


def test_the_output_lives_to_the_steps_end_unless_freed() -> None:
    torch.manual_seed(0)
    model = nn.Linear(256, 1024)  # the output (4 x 1024 floats) is larger than what it saves
    x = torch.randn(4, 256)
    peaks = {}
    for keep in (True, False):
        tracker = MemoryTracker(model, inputs=((x,), {}))
        t = record_step(Step(model, (x,), keep_output=keep), memory=tracker)
        assert (KEEP_OUTPUT_NOTE if keep else FREE_OUTPUT_NOTE) in t.meta.notes
        assert t.memory_meta is not None
        peaks[keep] = t.memory_meta.peak_bytes
    # freed: the output's storage is gone before backward makes the weight's gradient
    assert peaks[True] - peaks[False] == 4 * 1024 * 4


def test_backward_target_says_why_there_is_none() -> None:
    notes: list[str] = []
    with torch.no_grad():
        assert backward_target(torch.ones(2, requires_grad=True), None, notes) is None
    assert notes == ["no backward pass: gradients are disabled (no_grad or inference_mode)"]
    notes.clear()
    out = (torch.ones(2, requires_grad=True), torch.full((3,), 4.0, requires_grad=True))
    assert backward_target(out, None, notes).item() == 1.0 + 4.0  # the sum of the means
    assert notes == [DEFAULT_LOSS_NOTE]


def test_state_puts_back_an_ema_written_through_data_and_an_optimizer_step() -> None:
    torch.manual_seed(0)
    teacher, student = nn.Linear(3, 3), nn.Linear(3, 3)
    model = nn.ModuleDict({"t": teacher, "s": student})
    opt = torch.optim.AdamW(student.parameters(), lr=0.1)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = StepState(model, optimizers=[opt])
    for pt, ps in zip(teacher.parameters(), student.parameters(), strict=True):
        pt.data = pt.data * 0.9 + ps.data * 0.1  # a new storage: undone by storage
        pt.data.mul_(2)  # in place through .data: no version bump, undone by value
    student(torch.randn(2, 3)).sum().backward()
    opt.step()
    opt.param_groups[0]["lr"] = 5.0
    state.restore()
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())
    assert not opt.state and opt.param_groups[0]["lr"] == 0.1
    assert all(p.grad is None for p in model.parameters())


def test_a_grad_scaler_steps_again_after_a_measured_step() -> None:
    import labkit

    model = nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10)
    before = scaler.state_dict()
    x = torch.randn(4, 8)
    labkit.memory(model, x, loss=lambda o: o.pow(2).mean(), optimizer=opt, scaler=scaler)
    assert scaler.state_dict() == before and not opt.state
    # the user's own next step goes through the scaler as if nothing had run
    scaler.scale(model(x).pow(2).mean()).backward()
    scaler.step(opt)
    scaler.update()
    assert opt.state


def test_the_default_loss_is_the_sum_of_the_outputs_means_in_float32() -> None:
    big = torch.full((1000, 100), 8.0, dtype=torch.float16, requires_grad=True)
    value = default_loss((big, torch.ones(3)))  # an output without grad adds nothing
    assert value is not None and value.dtype == torch.float32
    assert value.item() == 8.0  # a sum of these 100,000 would overflow float16 (max 65504)
    scalar = torch.tensor(2.5, requires_grad=True)
    notes: list[str] = []
    assert backward_target(scalar, None, notes).item() == 2.5 and notes == []  # its own loss
    assert default_loss(torch.ones(2)) is None  # nothing requires grad


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(4.0).expand(3, 4),  # stride 0: one row seen three times
        lambda: torch.arange(6.0).as_strided((3, 4), (1, 1)),  # overlapping windows
    ],
    ids=["expanded", "windows"],
)
def test_a_tensor_whose_elements_share_memory_is_put_back(make: Any) -> None:
    from labkit.trace.state import _Saved

    t = make()
    want, ptr, stride = t.clone(), t.untyped_storage().data_ptr(), t.stride()
    saved = _Saved(t)
    t.untyped_storage().copy_(
        torch.full((t.untyped_storage().nbytes() // 4,), -1.0).untyped_storage()
    )
    assert not torch.equal(t, want)
    with torch.no_grad():
        saved.restore()
    assert torch.equal(t, want)
    assert t.untyped_storage().data_ptr() == ptr and t.stride() == stride


@pytest.mark.parametrize("entry", ["memory", "plan"])
def test_an_optimizer_whose_step_needs_a_closure_is_refused_up_front(entry: str) -> None:
    # before: "LBFGS.step() missing 1 required positional argument: 'closure'" mid-step
    import labkit

    model = torch.nn.Linear(4, 1)
    x = torch.randn(8, 4)
    opt = torch.optim.LBFGS(model.parameters(), max_iter=2)
    measure = labkit.memory if entry == "memory" else labkit.plan
    with pytest.raises(TypeError, match=r"LBFGS.step\(closure\).*optimizer=None"):
        measure(model, x, optimizer=opt)
    assert all(p.grad is None for p in model.parameters()) and not opt.state
