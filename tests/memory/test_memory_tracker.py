"""Accuracy of the storage accounting against independent truths (CPU)."""

from __future__ import annotations

import bisect
import weakref
from typing import Any

import pytest
import torch
import torch._C._profiler as _prof
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import labkit
from labkit.memory import CATEGORIES, MemoryReport, MemoryTracker
from labkit.trace import Recorder, Trace
from tests.memory.conftest import MLP, Stack, assert_clean

_INTERNAL = 64  # bytes of kernel-internal scalar tensors alive at once (Adam, mse_loss)


def _storage_bytes(tensors: list[torch.Tensor]) -> int:
    """Truth: bytes of the distinct storages behind ``tensors``."""
    seen: dict[int, int] = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[id(st)] = st.nbytes()
    return sum(seen.values())


def _allocator_totals(prof: profile) -> list[int]:
    """The CPU allocator's running total after each allocation/free, from 0 at profile start."""
    events: list[tuple[int, int, int]] = []

    def walk(node: Any) -> None:
        if node.typed[0] == _prof._EventType.Allocation:
            a = node.typed[1]
            events.append((node.start_time_ns, a.alloc_size, a.total_allocated))
        for child in node.children:
            walk(child)

    for root in prof.profiler.kineto_results.experimental_event_tree():
        walk(root)
    events.sort()
    offset = events[0][2] - events[0][1]  # the counter carries over from earlier profiles
    return [total - offset for _, _, total in events]


def test_live_bytes_at_module_boundaries_equal_live_storages() -> None:
    torch.manual_seed(0)
    model = MLP()
    x, y = torch.randn(32, 64), torch.randn(32, 10)
    seen: list[weakref.ref] = []  # weak references to every tensor the test observes
    checks: list[tuple[str, int, int]] = []
    mem = MemoryTracker(model, inputs=(x, y))
    rec = Recorder(model, mode="timing", observers=[mem])

    def truth() -> int:
        alive = [r() for r in seen]
        known = [*model.parameters(), x, y, *(t for t in alive if t is not None)]
        known += [p.grad for p in model.parameters() if p.grad is not None]
        return _storage_bytes(known)

    def observe(module: torch.nn.Module, args: tuple, out: torch.Tensor) -> None:
        seen.append(weakref.ref(out))
        checks.append((type(module).__name__, mem.live_bytes(), truth()))

    handles = [m.register_forward_hook(observe) for m in model]
    try:
        with rec:
            loss = F.mse_loss(model(x), y)
            seen.append(weakref.ref(loss))
            checks.append(("loss", mem.live_bytes(), truth()))
            loss.backward()
            checks.append(("backward", mem.live_bytes(), truth()))
            del loss
            checks.append(("del loss", mem.live_bytes(), truth()))
    finally:
        for h in handles:
            h.remove()
    assert len(checks) == len(model) + 3
    for where, live, expected in checks:
        assert live == expected, where
    assert_clean(model)


# torch 2.11's profiler warns once per process that it clears events between cycles; we read
# one cycle only, so the warning says nothing about this test
@pytest.mark.filterwarnings("ignore:Warning. Profiler clears events:UserWarning")
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_every_sample_and_the_peak_match_the_cpu_allocator(optimizer: str) -> None:
    torch.manual_seed(0)
    model = MLP()
    opt = (
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        if optimizer == "sgd"
        else torch.optim.Adam(model.parameters())
    )
    x, y = torch.randn(32, 64), torch.randn(32, 10)
    mem = MemoryTracker(model, inputs=(x, y), optimizers=(opt,))
    rec = Recorder(model, mode="timing", observers=[mem])
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        with rec:
            loss = F.mse_loss(model(x), y)
            loss.backward()
            opt.step()
        live_end = mem.live_bytes()
    truth = _allocator_totals(prof)  # counts from 0 at profiler start
    mine = [sum(e[3:]) - mem.start_bytes for e in mem.events]
    distinct = [v for i, v in enumerate(mine) if i == 0 or v != mine[i - 1]]
    # each of our samples is a state the allocator passed through, give or take scalars that
    # kernels allocate internally (never op outputs, so invisible at the dispatch level)
    states = sorted(truth)
    for v in distinct:
        i = bisect.bisect_left(states, v - _INTERNAL)
        assert i < len(states) and states[i] <= v + _INTERNAL, v
    assert abs((mem.peak - mem.start_bytes) - max(truth)) <= 0.02 * max(truth)
    assert live_end - mem.start_bytes == truth[-1]
    assert mem.peak_phase in ("backward", "optimizer")
    assert_clean(model)


def test_views_count_once_and_categories_are_right() -> None:
    torch.manual_seed(0)
    model = MLP((16, 32, 4))
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(8, 16)
    param_bytes = sum(p.numel() * 4 for p in model.parameters())
    rep = labkit.memory(model, x, loss=lambda out: out.pow(2).mean(), optimizer=opt, keep_step=True)
    end = rep.samples[-1].bytes
    assert end["parameters"] == param_bytes
    assert end["gradients"] == param_bytes
    # Adam: exp_avg and exp_avg_sq per parameter plus a scalar step counter each
    steps = sum(s["step"].untyped_storage().nbytes() for s in opt.state.values())
    assert end["optimizer"] == 2 * param_bytes + steps
    assert end["inputs"] == 8 * 16 * 4
    assert end["activations"] == 0  # freed by backward
    fwd = [s for s in rep.samples if s.phase == "forward" and s.bytes["activations"]]
    assert fwd, "activations saved for backward appear during forward"
    assert {s.phase for s in rep.samples} == {"forward", "backward", "optimizer"}
    # a view of an input shares its storage: nothing new is counted
    mem = MemoryTracker(model, inputs=x)
    with Recorder(model, mode="timing", observers=[mem]):
        before = mem.live_bytes()
        views = [x[1:], x.t(), x.view(-1), x.detach()]
        assert mem.live_bytes() == before
        del views
    assert set(rep.by_category()) <= set(CATEGORIES)


def test_attribution_by_module_and_saved_activations() -> None:
    torch.manual_seed(0)
    model = Stack(d=32, n=3)
    x = torch.randn(64, 32)
    rep = labkit.memory(model, x)
    saved = rep.saved_by_module()
    for i in range(3):
        # fc1 saves its input, GELU saves its input (fc1's output), fc2 saves GELU's output
        assert saved[f"blocks.{i}.act"] == 64 * 128 * 4
        assert saved[f"blocks.{i}.fc2"] == 64 * 128 * 4
    rows = rep.by_module(top=None)
    assert sum(r["bytes"] for r in rows) == rep.peak_bytes
    assert sum(rep.by_category().values()) == rep.peak_bytes
    inclusive = {r["module"]: r["bytes"] for r in rep.by_module(top=None, inclusive=True)}
    assert inclusive[""] == rep.peak_bytes
    assert inclusive["blocks"] >= inclusive["blocks.0"] > 0
    assert rep.peak_phase == "backward"
    text = rep.summary()
    assert "peak" in text and "blocks.0" in text
    assert repr(rep).startswith("MemoryReport(model=Stack, device=cpu, peak=")


def test_full_mode_trace_carries_the_timeline_and_round_trips(tmp_path) -> None:
    torch.manual_seed(0)
    model = Stack(d=16, n=2)
    t = labkit.trace(model, torch.randn(8, 16))
    assert t.memory and t.memory_meta is not None
    assert t.memory_meta.peak_bytes == max(sum(s.bytes.values()) for s in t.memory)
    assert t.memory_meta.saved_by_module  # activations seen through the recorder's pack hook
    path = tmp_path / "t.json"
    t.save(path)
    back = Trace.load(path)
    assert back == t and back.memory_meta == t.memory_meta
    # the recorder's own saved-bytes column agrees where the model input is not involved
    rows = {r["path"]: r for r in t.rows()}
    saved = MemoryReport(t).saved_by_module()
    for path in ("blocks.1.fc1", "blocks.1.act", "blocks.1.fc2", "blocks.0.act"):
        assert saved[path] == rows[path]["saved_bytes_self"] > 0, path
    timing = labkit.trace(model, torch.randn(8, 16), mode="timing")
    assert timing.memory == () and timing.memory_meta is None
    assert_clean(model)


def test_tracker_repr_and_timeline_downsampling_keeps_the_peak() -> None:
    model = MLP((8, 8))
    mem = MemoryTracker(model, stacks=True)
    assert repr(mem) == "MemoryTracker(model=MLP, stacks=True, active=False)"
    from labkit.memory._cuda import CudaStats

    stats = CudaStats(torch.device("cuda", 0), history="s.pickle")
    assert repr(stats) == "CudaStats(device=cuda:0, history='s.pickle')"
    torch.manual_seed(0)
    rep = labkit.memory(Stack(d=16, n=4), torch.randn(16, 16), max_samples=10)
    assert len(rep.samples) <= 14
    assert max(sum(s.bytes.values()) for s in rep.samples) == rep.peak_bytes
    assert rep.meta.events > len(rep.samples)


@pytest.mark.parametrize("ctx", [torch.no_grad, torch.inference_mode])
def test_inference_step_has_no_activations_or_backward(ctx) -> None:
    torch.manual_seed(0)
    model = Stack(d=32, n=2).eval()
    with ctx():
        rep = labkit.memory(model, torch.randn(64, 32), backward=False)
    assert {s.phase for s in rep.samples} == {"forward"}
    assert all(s.bytes["activations"] == 0 for s in rep.samples)
    assert rep.peak_bytes > rep.meta.start_bytes == rep.by_category()["parameters"] + 64 * 32 * 4
    assert_clean(model)


def test_quantized_weights_count_their_real_bytes() -> None:
    torchao = pytest.importorskip("torchao.quantization")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 8))
    torchao.quantize_(model, torchao.Int8WeightOnlyConfig())
    with torch.no_grad():
        rep = labkit.memory(model, torch.randn(16, 256), backward=False)
    # int8 weights (1 byte each) with a float32 scale and an int8 zero point per row, and the
    # float32 biases: not the 4 bytes per weight the wrapper tensor reports as its storage
    expected = (512 * 256 + 512 * 5 + 512 * 4) + (8 * 512 + 8 * 5 + 8 * 4)
    assert rep.meta.start_bytes - 16 * 256 * 4 == expected
    assert_clean(model)
