"""Bad input: a failing step keeps its partial timeline, names the module, removes everything."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit
from labkit.memory import MemoryRecordError
from labkit.trace import TraceError
from tests.memory.conftest import Stack, assert_clean
from tests.trace._models import Interrupting


class OOMAt(nn.Module):
    """Raises the real out-of-memory exception type from inside a nested module."""

    def __init__(self) -> None:
        super().__init__()
        self.ok = nn.Linear(16, 64)
        self.deep = nn.Sequential(nn.Tanh(), nn.Linear(64, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.deep(self.ok(x))
        big = torch.empty(0)
        if h.numel():
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return big


class ShapeBug(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 32)
        self.b = nn.Sequential(nn.ReLU(), nn.Linear(16, 4))  # wrong in_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


def test_error_in_a_module_keeps_partial_timeline_and_names_it() -> None:
    model = ShapeBug()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(MemoryRecordError, match=r"module 'b\.1' \(Linear\)") as e:
        labkit.memory(model, torch.randn(4, 8), optimizer=opt)
    err = e.value
    assert isinstance(err, TraceError) and isinstance(err.__cause__, RuntimeError)
    assert err.module == "b.1"
    rep = err.report
    assert rep.samples and rep.meta.failed_module == "b.1"
    assert rep.meta.error and "RuntimeError" in rep.meta.error
    assert {s.phase for s in rep.samples} == {"forward"}
    assert [s.module for s in rep.samples if s.module][:1] == ["a"]  # a ran and allocated
    assert "memory when it failed" in str(err) and "error.report" in str(err)
    assert_clean(model)


def test_out_of_memory_is_explained() -> None:
    model = OOMAt()
    with pytest.raises(MemoryRecordError, match="out of memory: shrink the batch") as e:
        labkit.memory(model, torch.randn(8, 16))
    assert e.value.module == ""  # raised in the root module's own forward
    assert isinstance(e.value.__cause__, torch.OutOfMemoryError)
    assert e.value.report.meta.peak_bytes > 0
    assert_clean(model)


def test_error_in_the_loss_or_optimizer_cleans_up() -> None:
    model = Stack(d=8, n=1)
    with pytest.raises(MemoryRecordError, match="ValueError: bad loss") as e:
        labkit.memory(
            model, torch.randn(4, 8), loss=lambda out: (_ for _ in ()).throw(ValueError("bad loss"))
        )
    assert e.value.module == ""  # recorded, and outside every module (in the loss)
    meta = e.value.report.trace.memory_meta
    assert meta.failed_module == "" and meta.error == "ValueError: bad loss"
    assert e.value.report.samples
    assert_clean(model)

    class Broken(torch.optim.SGD):
        def step(self, closure=None):  # type: ignore[override]
            super().step(closure)
            raise RuntimeError("optimizer exploded")

    opt = Broken(model.parameters(), lr=0.1)
    with pytest.raises(MemoryRecordError, match="optimizer exploded") as e:
        labkit.memory(model, torch.randn(4, 8), optimizer=opt)
    phases = {s.phase for s in e.value.report.samples}
    assert phases >= {"forward", "backward"}
    assert_clean(model)


def test_keyboard_interrupt_is_not_wrapped_and_cleans_up() -> None:
    model = Interrupting()
    with pytest.raises(KeyboardInterrupt):
        labkit.memory(model, torch.randn(1, 2))
    assert_clean(model)


def test_full_mode_trace_error_keeps_memory_and_cleans_up() -> None:
    model = ShapeBug()
    rec = labkit.trace(model)
    with pytest.raises(TraceError, match=r"module 'b\.1'"), rec:
        model(torch.randn(2, 8))
    assert rec.trace is not None and rec.trace.memory
    assert rec.trace.memory_meta is not None and rec.trace.memory_meta.failed_module == "b.1"
    assert_clean(model)


def test_wrong_arguments_name_what_to_fix() -> None:
    with pytest.raises(TypeError, match=r"labkit\.memory expects a torch\.nn\.Module"):
        labkit.memory(torch.randn(2), torch.randn(2))
    model = Stack(d=8, n=1)
    with pytest.raises(ValueError, match="loss must return a scalar tensor"):
        labkit.memory(model, torch.randn(4, 8), loss=lambda out: out)
    assert_clean(model)
    with pytest.raises(ValueError, match="max_samples must be at least 2"):
        labkit.memory(model, torch.randn(4, 8), max_samples=1)
    with pytest.raises(ValueError, match=r"not on a CUDA device.*model\.cuda\(\)"):
        labkit.memory(model, torch.randn(4, 8), cuda_history="step.pickle")
    assert_clean(model)
    _ = F
