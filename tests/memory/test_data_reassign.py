"""A step that replaces a parameter through ``.data`` (an EMA teacher, MoCo's key encoder).

Outside labkit the old storage is freed at the assignment. labkit's snapshot of the
model must not keep it alive (that counted 576 B too many for the corpus' momentum
encoder), and must still put the parameter back as it was, on the very storage where
something else holds it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit.memory.timeline import totals


class EMA(nn.Module):
    """A student and a teacher that follows it by EMA inside forward."""

    def __init__(self, reassign: bool) -> None:
        super().__init__()
        self.student = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
        self.teacher = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 8))
        self.teacher.requires_grad_(False)
        self.reassign = reassign

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            for t, s in zip(self.teacher.parameters(), self.student.parameters(), strict=True):
                new = t.data * 0.9 + s.data * 0.1
                if self.reassign:
                    t.data = new  # the old storage is freed here
                else:
                    t.data.copy_(new)  # the same bytes allocated, then the copy freed
                del new
            target = self.teacher(x)
        return F.mse_loss(self.student(x), target)


def _model(reassign: bool) -> EMA:
    torch.manual_seed(0)
    return EMA(reassign)


X = torch.randn(4, 8)


def _memory(model: EMA) -> labkit.MemoryReport:
    opt = torch.optim.SGD(model.student.parameters(), lr=0.1)
    return labkit.memory(model, X, loss=lambda out: out, optimizer=opt)


def test_a_storage_replaced_through_data_is_counted_freed_as_outside_labkit() -> None:
    # the same allocations, once as `p.data = new`, once as `p.data.copy_(new); del new`:
    # every figure must agree (before, the first peaked at 4,996 B against 3,904: the
    # teacher's replaced storages, 1,120 B, kept alive by labkit through backward)
    by_data, by_copy = _memory(_model(True)), _memory(_model(False))
    assert by_data.peak_bytes == by_copy.peak_bytes
    assert by_data.by_category() == by_copy.by_category()
    assert totals(by_data.samples) == totals(by_copy.samples)


def test_the_parameter_comes_back_with_its_values_and_layout() -> None:
    model = _model(True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    params = list(model.parameters())
    _memory(model)
    assert list(model.parameters()) == params  # the same Parameter objects
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]), k
        assert v.stride() == before[k].stride() and v.storage_offset() == 0, k


def test_a_view_the_user_kept_shares_the_parameter_again() -> None:
    model = _model(True)
    w = model.teacher[0].weight
    kept = w.data  # the user holds the storage: it must be the parameter's again after
    kept_values = kept.clone()
    _memory(model)
    assert w.data_ptr() == kept.data_ptr()
    assert torch.equal(kept, kept_values)
    with torch.no_grad():
        kept.add_(1.0)  # one storage: a write through the view is seen by the parameter
    assert torch.equal(w, kept_values + 1.0)


class Windows(nn.Module):
    """A buffer of overlapping windows on one storage, replaced through ``.data``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("win", torch.arange(10.0).as_strided((4, 4), (2, 1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.win.data = self.win.data + 1  # contiguous now; nothing holds the old storage
        return self.fc(x) @ self.win


def test_a_replaced_buffer_of_overlapping_windows_comes_back_in_its_layout() -> None:
    model = Windows()
    before = model.win.clone()
    labkit.memory(model, torch.randn(2, 4), loss=lambda out: out.sum())
    win = model.win
    assert (win.stride(), win.storage_offset()) == ((2, 1), 0)
    assert win.untyped_storage().nbytes() == 10 * 4
    assert torch.equal(win, before)
