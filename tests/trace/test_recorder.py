from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

import labkit
from labkit.trace import Recorder, Trace, TraceError
from tests.trace._models import MLP, Branchy, Interrupting, ResCNN, Tied, gat_model, zoo
from tests.trace.conftest import assert_clean, hook_count

ZOO = zoo()


def _step(model: nn.Module, args: tuple, kwargs: dict) -> torch.Tensor:
    out = model(*args, **kwargs)
    tensors = [t for _, t in labkit._tensors.named_tensors(out) if t.is_floating_point()]
    return torch.stack([t.sum() for t in tensors]).sum()


@pytest.mark.parametrize("name", list(ZOO))
@pytest.mark.parametrize("mode", ["full", "timing"])
def test_trace_runs_and_leaves_nothing(name: str, mode: str) -> None:
    model, args, kwargs = ZOO[name]
    t = labkit.trace(model, *args, mode=mode, **kwargs)
    assert_clean(model)
    assert t.meta.mode == mode and t.meta.backward
    calls = [n for n in t.nodes if n.kind == "module"]
    assert calls and calls[0].module == "" and calls[0].parent is None
    assert all(n.fwd_time > 0 for n in calls)
    assert (any(n.kind == "op" for n in t.nodes)) == (mode == "full")


@pytest.mark.parametrize("name", list(ZOO))
def test_module_flops_sum_to_flop_counter_total(name: str) -> None:
    model, args, kwargs = ZOO[name]
    with FlopCounterMode(display=False) as fc:
        _step(model, args, kwargs).backward()
    model.zero_grad(set_to_none=True)
    with labkit.trace(model) as rec:
        _step(model, args, kwargs).backward()
    model.zero_grad(set_to_none=True)
    t = rec.trace
    per_module = sum(n.flops_fwd + n.flops_bwd for n in t.nodes if n.kind == "module")
    outside = t.meta.outside_flops_fwd + t.meta.outside_flops_bwd
    assert per_module + outside == fc.get_total_flops()
    assert t.total_flops == fc.get_total_flops()
    if name in ("mlp", "rescnn", "transformer"):
        assert per_module > 0 and outside == 0


# PyG scripts a few helpers with torch.jit.script at import, which torch 2.13 deprecates.
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_gat_flops_and_edge_index_input() -> None:
    model, args, _ = gat_model()
    with FlopCounterMode(display=False) as fc:
        model(*args).sum().backward()
    model.zero_grad(set_to_none=True)
    t = labkit.trace(model, *args)
    assert t.total_flops == fc.get_total_flops()
    inputs = {n.name: n.outputs[0] for n in t.nodes if n.kind == "input"}
    assert inputs["edge_index"].dtype == "int64"
    assert inputs["edge_index"].shape == tuple(args[1].shape)
    assert {r["path"] for r in t.rows()} >= {"conv1", "conv2"}
    assert_clean(model)


@pytest.mark.parametrize("name", list(ZOO))
def test_param_total_counts_shared_weights_once(name: str) -> None:
    model, args, kwargs = ZOO[name]
    t = labkit.trace(model, *args, **kwargs)
    assert t.total_params == sum(p.numel() for p in model.parameters())
    if name == "tied":
        out = t.module_by_path["out"]
        assert out.shared_params == model.out.weight.numel() and out.params == 0


def test_edge_shapes_and_dtypes_match_real_tensors() -> None:
    model, (x,), _ = ZOO["rescnn"]
    real: dict[str, list[tuple]] = {}
    handles = [
        m.register_forward_hook(
            lambda mod, i, o, p=p: real.setdefault(p, []).append((tuple(o.shape), o.dtype))
        )
        for p, m in model.named_modules()
    ]
    try:
        model(x)
    finally:
        for h in handles:
            h.remove()
    t = labkit.trace(model, x)
    for n in t.nodes:
        if n.kind == "module":
            shape, dtype = real[n.module][n.key and int(n.key.rsplit("#", 1)[1])]
            assert n.outputs[0].shape == shape and n.outputs[0].dtype == str(dtype)[6:]
    for e in t.edges:  # each edge carries one of its producer's outputs
        src = t.nodes[e.src]
        assert (e.shape, e.dtype) in {(o.shape, o.dtype) for o in src.outputs}
    first = next(e for e in t.edges if t.nodes[e.src].kind == "input")
    assert first.shape == tuple(x.shape) and first.dtype == "float32"


def test_outputs_and_gradients_equal_an_untraced_run() -> None:
    torch.manual_seed(1)
    model = ResCNN()
    twin = copy.deepcopy(model)
    x = torch.randn(2, 3, 12, 12)
    ref = twin(x)
    ref.sum().backward()
    with labkit.trace(model) as rec:
        out = model(x)
        out.sum().backward()
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=0, atol=0, msg=name)
    assert rec.trace is not None and rec.trace.meta.backward
    assert_clean(model)


def test_one_shot_trace_restores_grads_buffers_and_training_flags() -> None:
    model = ResCNN()
    model.blocks[1].eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    labkit.trace(model, torch.randn(2, 3, 12, 12))
    assert all(p.grad is None for p in model.parameters())
    for k, v in model.state_dict().items():
        torch.testing.assert_close(v, before[k], rtol=0, atol=0, msg=k)
    assert model.training and not model.blocks[1].training and model.blocks[0].training


def test_repeated_calls_are_separate_nodes_of_one_module() -> None:
    model, args, _ = ZOO["tied"]
    t = labkit.trace(model, *args)
    mix = t.calls_of("mix")
    assert len(mix) == 2 and mix[0].key != mix[1].key
    assert t.module_by_path["mix"].calls == 2
    assert next(r for r in t.rows() if r["path"] == "mix")["calls"] == 2


def test_data_dependent_graphs_differ_and_merge_counts_runs() -> None:
    model = Branchy()
    pos = torch.ones(2, 4)
    neg = -torch.ones(3, 4)
    a, b = labkit.trace(model, pos), labkit.trace(model, neg)
    assert {n.module for n in a.nodes if n.kind == "module"} >= {"pos"}
    assert "neg" not in {n.module for n in a.nodes}
    assert len(a.calls_of("loop")) == 2 and len(b.calls_of("loop")) == 3
    m = labkit.Trace.merge(a, b, a)
    by_key = {n.key: n for n in m.nodes}
    assert by_key["pos#0"].count == 2 and by_key["neg#0"].count == 1
    assert by_key["loop#0"].count == 3 and by_key["loop#2"].count == 1
    assert m.meta.calls == 3 and m.meta.runs == 3
    # in how many runs each node ran, and figures as per-run means
    assert by_key["pos#0"].runs == 2 and by_key["neg#0"].runs == 1
    assert by_key["neg#0"].flops_fwd * 3 == b.calls_of("neg")[0].flops_fwd
    assert m.meta.forward_time == pytest.approx((2 * a.meta.forward_time + b.meta.forward_time) / 3)
    summary = m.summary()
    assert "Runs" in summary.splitlines()[0] and "per-run means" in summary
    assert Trace.merge(m, b).meta.runs == 4
    for n in m.nodes:
        assert n.parent is None or n.parent < n.id


def test_backward_time_for_module_whose_input_needs_no_grad() -> None:
    model = MLP()
    t = labkit.trace(model, torch.randn(64, 8), mode="timing", repeat=1)
    fc1 = t.calls_of("fc1")[0]
    assert fc1.bwd_time > 0
    # the step's backward holds the model's (a hook-free figure) and what ran outside it
    root = t.calls_of("")[0]
    assert t.meta.backward_time == pytest.approx(root.bwd_time + t.meta.outside_bwd_time)
    assert root.bwd_time > 0


def test_backward_inclusive_equals_self_plus_children() -> None:
    model, args, _ = ZOO["rescnn"]
    t = labkit.trace(model, *args)
    for n in t.nodes:
        if n.kind != "module":
            continue
        kids = [t.nodes[c] for c in t.children.get(n.id, ()) if t.nodes[c].kind == "module"]
        added = n.bwd_self_time + sum(k.bwd_time for k in kids)
        if n.parent is None:
            # the root's backward is the hook-free passes' and its self time what is left over
            # the hooked children, never below 0: (children + self) is the larger of the two.
            # How close they come (issue 27: within 10%) is measured, so it is a figure of
            # benchmarks/trace_overhead.py, not a test here (under load it missed 1 run in 3)
            kids_time = sum(k.bwd_time for k in kids)
            assert n.bwd_self_time == pytest.approx(max(0.0, n.bwd_time - kids_time))
            assert added == pytest.approx(max(n.bwd_time, kids_time))
        else:  # every other call adds up by construction
            assert n.bwd_time == pytest.approx(added)


def test_saved_bytes_recorded_in_full_mode() -> None:
    model, args, _ = ZOO["mlp"]
    t = labkit.trace(model, *args)
    rows = {r["path"]: r for r in t.rows()}
    # fc1 saves its input (5x8 float32); the parameters are not activations
    assert rows["fc1"]["saved_bytes_self"] == 5 * 8 * 4
    assert rows[""]["saved_bytes"] > 0


@pytest.mark.parametrize("ctx", [torch.no_grad, torch.inference_mode])
def test_no_grad_and_inference_mode_record_forward_only(ctx) -> None:
    model = ResCNN().eval()
    with ctx():
        t = labkit.trace(model, torch.randn(1, 3, 12, 12))
    assert not t.meta.backward and t.meta.backward_time == 0
    assert any("no backward pass" in note for note in t.meta.notes)
    assert t.total_flops > 0
    assert_clean(model)


def test_context_manager_around_a_training_step_with_optimizer() -> None:
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(16, 8), torch.randn(16, 4)) for _ in range(2)]
    with labkit.trace(model, mode="timing") as rec:
        for x, y in batches:
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    t = rec.trace
    assert t.meta.calls == 2 and len(t.calls_of("fc2")) == 2
    inputs = [n for n in t.nodes if n.kind == "input"]
    assert [(n.name, n.key) for n in inputs] == [("x", "input:x"), ("x", "input:x#1")]
    assert all(n.bwd_time > 0 for n in t.calls_of("fc1"))
    assert_clean(model)


def test_disabled_recorder_records_nothing_and_keeps_results() -> None:
    model = MLP()
    x = torch.randn(4, 8)
    ref = model(x)
    rec = Recorder(model, mode="full").attach()
    try:
        assert hook_count(model) == 2 * len(list(model.modules()))
        torch.testing.assert_close(model(x), ref, rtol=0, atol=0)
        assert rec.inst.nodes == [] and not rec.enabled
    finally:
        rec.detach()
    assert_clean(model)


class Boom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ok = nn.Linear(4, 4)
        self.bad = nn.Sequential(nn.Linear(4, 3), nn.Linear(4, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bad(self.ok(x))


@pytest.mark.parametrize("mode", ["full", "timing"])
def test_error_names_module_path_and_input_shapes(mode: str) -> None:
    model = Boom()
    model.eval()
    with pytest.raises(TraceError, match=r"module 'bad\.1' \(Linear\).*float32\[2, 3\]") as e:
        labkit.trace(model, torch.randn(2, 4), mode=mode)
    assert isinstance(e.value.__cause__, RuntimeError)
    assert_clean(model)
    assert not model.training


def test_keyboard_interrupt_is_not_wrapped_and_cleans_up() -> None:
    model = Interrupting()
    with pytest.raises(KeyboardInterrupt):
        labkit.trace(model, torch.randn(1, 2))
    assert_clean(model)


def test_partial_trace_is_kept_after_an_error() -> None:
    model = Boom()
    rec = labkit.trace(model)
    with pytest.raises(TraceError), rec:
        model(torch.randn(2, 4))
    assert rec.trace is not None
    assert [n.module for n in rec.trace.nodes if n.kind == "module"] == [
        "",
        "ok",
        "bad",
        "bad.0",
        "bad.1",
    ]


def test_non_module_is_refused_with_what_was_given() -> None:
    with pytest.raises(
        TypeError, match=r"expects a torch\.nn\.Module, got torch\.Tensor.*model first"
    ):
        labkit.trace(torch.randn(2), torch.randn(2))
    with pytest.raises(TypeError, match=r"got builtins\.function.*wrap it in an nn\.Module"):
        labkit.trace(lambda x: x, torch.randn(2))
    with pytest.raises(ValueError, match="mode must be one of"):
        labkit.trace(MLP(), torch.randn(2, 8), mode="fast")


def test_inputs_on_another_device_are_refused_before_running() -> None:
    from labkit.trace.api import check_devices

    model = MLP().to("meta")  # the only other device without a GPU
    with pytest.raises(
        ValueError, match=r"input 'x' is on cpu, but the parameters of MLP are on meta"
    ):
        check_devices(model, (torch.randn(2, 8),), {})
    # labkit.trace names the meta device first (nothing on meta runs: tests/faults/test_meta.py)
    with pytest.raises(ValueError, match=r"MLP is on the meta device.*labkit\.plan\("):
        labkit.trace(model, torch.randn(2, 8))
    assert_clean(model)


def test_loss_must_be_scalar() -> None:
    model = MLP()
    with pytest.raises(ValueError, match=r"loss must return a scalar tensor, got \(5, 4\)"):
        labkit.trace(model, torch.randn(5, 8), loss=lambda out: out)
    assert_clean(model)
    t = labkit.trace(model, torch.randn(5, 8), loss=lambda out: out.pow(2).mean())
    assert t.meta.backward


def test_recorder_repr_and_double_start() -> None:
    model = MLP()
    rec = Recorder(model, mode="timing")
    assert repr(rec) == "Recorder(model=MLP, mode='timing', attached=False, enabled=False)"
    rec.start()
    try:
        assert repr(rec) == "Recorder(model=MLP, mode='timing', attached=True, enabled=True)"
        with pytest.raises(RuntimeError, match="already recording"):
            rec.start()
    finally:
        rec.stop()
        rec.detach()
    assert_clean(model)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_trace_matches_flop_counter_and_devices() -> None:
    model = ResCNN().cuda()
    x = torch.randn(4, 3, 16, 16, device="cuda")
    with FlopCounterMode(display=False) as fc:
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    t = labkit.trace(model, x)
    assert t.total_flops == fc.get_total_flops()
    assert t.meta.device.startswith("cuda") and t.meta.backward
    assert all(
        o.device.startswith("cuda") for n in t.nodes if n.kind == "module" for o in n.outputs
    )
    assert_clean(model)


def test_tied_model_graph_has_both_mix_calls_in_order() -> None:
    model = Tied()
    t = labkit.trace(model, torch.randint(0, 20, (2, 3)))
    order = [n.key for n in t.nodes if n.kind == "module"]
    assert order == ["#0", "emb#0", "mix#0", "mix#1", "out#0"]
