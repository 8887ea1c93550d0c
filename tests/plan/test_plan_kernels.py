"""Plans of kernels whose real CPU version keeps more than its fake one says.

``F.mse_loss`` and ``F.smooth_l1_loss`` (mean or sum) return a 0-dim view of their
element-wise buffer, which stays alive with the loss through backward. ``nn.LSTM`` on CPU
(oneDNN) keeps a workspace for backward that the fake kernel makes 0 bytes, and its
backward's fake kernel returns one tensor for two bias gradients. ``nn.EmbeddingBag``
keeps ``offset2bag`` in a storage one element longer. The plan must count
what the real step holds: checked against torch's MemTracker on the real step, and
against ``labkit.memory``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit
from tests.plan._memtracker import memtracker_peak

LOSSES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "mse": F.mse_loss,
    "mse-sum": lambda a, b: F.mse_loss(a, b, reduction="sum"),
    "mse-none-mean": lambda a, b: F.mse_loss(a, b, reduction="none").mean(),
    "smooth_l1": lambda a, b: F.smooth_l1_loss(a, b, beta=0.5),
    "l1": F.l1_loss,  # a true scalar: nothing to add
    "huber": F.huber_loss,
}


def _case() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 512))
    return model, torch.randn(8, 16), torch.randn(8, 512)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_the_plan_counts_the_buffer_the_real_loss_keeps(name: str) -> None:
    model, x, y = _case()
    lf = LOSSES[name]

    def loss(out: torch.Tensor) -> torch.Tensor:
        return lf(out, y)

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    planned = labkit.plan(model, x, loss=loss, optimizer=opt).peak_bytes
    measured = labkit.memory(model, x, loss=loss, optimizer=opt).peak_bytes
    assert planned == measured  # mse and smooth_l1 planned 16,380 B under before
    assert planned == memtracker_peak(
        model, torch.optim.SGD(model.parameters(), lr=0.1), (x,), loss
    )


class _Recurrent(nn.Module):
    def __init__(self, rnn: nn.RNNBase, width: int) -> None:
        super().__init__()
        self.rnn, self.head = rnn, nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.rnn(x)[0]
        return self.head(y[:, -1] if self.rnn.batch_first else y[-1])


RNNS: dict[str, Callable[[], tuple[nn.RNNBase, int, tuple[int, ...]]]] = {
    "lstm": lambda: (nn.LSTM(8, 16), 16, (5, 3, 8)),
    "lstm-2-bidirectional": lambda: (
        nn.LSTM(8, 16, 2, batch_first=True, bidirectional=True),
        32,
        (3, 5, 8),
    ),
    "lstm-proj": lambda: (nn.LSTM(8, 16, proj_size=4), 4, (5, 3, 8)),
    "lstm-3-no-bias-dropout": lambda: (nn.LSTM(8, 16, 3, bias=False, dropout=0.2), 16, (7, 2, 8)),
    "gru-2-bidirectional": lambda: (nn.GRU(8, 16, 2, bidirectional=True), 32, (5, 3, 8)),
    "rnn-tanh": lambda: (nn.RNN(8, 16, 2), 16, (5, 3, 8)),
}


def _recurrent(name: str) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    rnn, width, shape = RNNS[name]()
    return _Recurrent(rnn, width).train(), torch.randn(*shape)


def _mean(out: torch.Tensor) -> torch.Tensor:
    return out.mean()


@pytest.mark.parametrize("name", list(RNNS))
@pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")
def test_a_recurrent_plan_counts_what_the_real_kernels_keep(name: str) -> None:
    # the 2-layer bidirectional LSTM planned 120,800 B under (no workspace) and then 256 B
    # under (one bias gradient) before; GRU and RNN run no oneDNN layer: equal already
    model, x = _recurrent(name)

    def sgd() -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.1)

    plan = labkit.plan(model, x, loss=_mean, optimizer=sgd())
    measured = labkit.memory(model, x, loss=_mean, optimizer=sgd(), progress=False)
    assert plan.peak_bytes == measured.peak_bytes
    assert plan.peak_bytes == memtracker_peak(model, sgd(), (x,), _mean)
    assert not any("oneDNN" in n for n in plan.meta.notes)


def test_an_lstm_workspace_too_big_to_measure_is_named_in_the_notes(monkeypatch) -> None:
    from labkit.plan import _kernels

    monkeypatch.setattr(_kernels, "RNN_REAL_MAX_BYTES", 64)
    monkeypatch.setattr(_kernels, "_WORKSPACE", {})
    model, x = _recurrent("lstm")
    plan = labkit.plan(model, x, loss=_mean)
    assert plan.peak_bytes < labkit.memory(model, x, loss=_mean, progress=False).peak_bytes
    assert [n for n in plan.meta.notes if "oneDNN workspace" in n]
    assert "oneDNN workspace" in plan.summary()


class _Bags(nn.Module):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.bag, self.head = nn.EmbeddingBag(30, 8, mode=mode), nn.Linear(8, 2)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor | None = None) -> torch.Tensor:
        return self.head(self.bag(ids, offsets))


@pytest.mark.parametrize(
    ("mode", "flat"), [("mean", False), ("max", False), ("sum", False), ("mean", True)]
)
def test_an_embedding_bag_plan_counts_offset2bag_as_the_kernel_keeps_it(
    mode: str, flat: bool
) -> None:
    # mean and max planned 8 B under before (offset2bag's 21st element); sum keeps none
    torch.manual_seed(0)
    model = _Bags(mode)
    batch = (
        (torch.randint(0, 30, (20,)), torch.tensor([0, 3, 3, 10]))
        if flat
        else torch.randint(0, 30, (4, 5))
    )
    args = batch if isinstance(batch, tuple) else (batch,)

    def sgd() -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=0.1)

    plan = labkit.plan(model, batch, loss=_mean, optimizer=sgd())
    measured = labkit.memory(model, batch, loss=_mean, optimizer=sgd(), progress=False)
    assert plan.peak_bytes == measured.peak_bytes
    assert plan.peak_bytes == memtracker_peak(model, sgd(), args, _mean)


def test_the_kept_buffer_is_the_size_of_the_inputs_in_their_dtype() -> None:
    a, b = torch.randn(8, 512, dtype=torch.bfloat16), torch.randn(8, 512, dtype=torch.bfloat16)
    real = F.mse_loss(a, b)
    from torch._subclasses.fake_tensor import FakeTensorMode

    from labkit.plan._kernels import real_layout

    with FakeTensorMode() as mode:
        fa, fb = mode.from_tensor(a), mode.from_tensor(b)
        out = torch.ops.aten.mse_loss.default(fa, fb, 1)
        fixed = real_layout(torch.ops.aten.mse_loss.default, (fa, fb, 1), {}, out)
        none = torch.ops.aten.mse_loss.default(fa, fb, 0)
        kept = real_layout(torch.ops.aten.mse_loss.default, (fa, fb, 0), {}, none)
    assert real.untyped_storage().nbytes() == 8 * 512 * 2  # what torch's CPU kernel keeps
    assert fixed.untyped_storage().nbytes() == real.untyped_storage().nbytes()
    assert (fixed.shape, fixed.dtype, fixed.stride()) == (real.shape, real.dtype, real.stride())
    assert kept is none  # reduction='none' is already full-size


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_loss_storage_is_what_the_kernel_keeps() -> None:
    # the buffer rule is CPU's (seen there); whatever CUDA's kernels keep, a CUDA plan's
    # loss must hold as many bytes as the real one does
    torch.manual_seed(0)
    a = torch.randn(8, 512, device="cuda", requires_grad=True)
    b = torch.randn(8, 512, device="cuda")
    from torch._subclasses.fake_tensor import FakeTensorMode

    from labkit.plan._kernels import keeps_a_buffer, real_layout

    for op in (torch.ops.aten.mse_loss.default, torch.ops.aten.smooth_l1_loss.default):
        real = op(a, b, 1)
        with FakeTensorMode() as mode:
            fa, fb = mode.from_tensor(a), mode.from_tensor(b)
            out = op(fa, fb, 1)
            planned = real_layout(op, (fa, fb, 1), {}, out) if keeps_a_buffer(op) else out
        assert planned.untyped_storage().nbytes() == real.untyped_storage().nbytes(), op


def test_the_layer_norm_rule_makes_only_a_non_contiguous_gradient_contiguous() -> None:
    # the fake native_layer_norm_backward gives the input's gradient the incoming one's
    # (transposed) layout; the CPU kernel returns it contiguous. A later .view of it then
    # copied in the plan only: a tiny Swin planned 2,048 B over the measured peak before
    # (the whole model: tests/plan/test_plan_hf_families.py)
    from torch._subclasses.fake_tensor import FakeTensorMode

    from labkit.plan._kernels import keeps_a_buffer, real_layout

    op = torch.ops.aten.native_layer_norm_backward.default
    assert keeps_a_buffer(op)
    x, w, b = torch.randn(2, 16, 32), torch.randn(32), torch.randn(32)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [32], w, b, 1e-5)
    g = torch.randn(2, 32, 16).transpose(1, 2)
    real = op(g, x, [32], mean, rstd, w, b, [True, True, True])
    with FakeTensorMode(allow_non_fake_inputs=True):
        out = op(g, x, [32], mean, rstd, w, b, [True, True, True])
        fixed = real_layout(op, (g, x, [32], mean, rstd, w, b, [True, True, True]), {}, out)
        plain = op(g.contiguous(), x, [32], mean, rstd, w, b, [True, True, True])
        same = real_layout(op, (g, x, [32], mean, rstd, w, b, [True, True, True]), {}, plain)
    assert not out[0].is_contiguous()  # what the fake kernel says
    assert [t.stride() for t in fixed] == [t.stride() for t in real]
    assert fixed[1:] == out[1:] and same is plain


@pytest.mark.parametrize("dims", [4, 3])
@pytest.mark.parametrize("x_last", [False, True])
@pytest.mark.parametrize("g_last", [False, True])
def test_a_batch_norm_gradient_planned_in_the_layout_the_cpu_kernel_returns(
    dims: int, x_last: bool, g_last: bool
) -> None:
    # the fake native_batch_norm_backward follows the incoming gradient's layout; the CPU
    # kernel gives the input's gradient the input's suggested memory format (a gradient of
    # another layout made the fake one differ: 4 of these 8 failed before)
    from torch._subclasses.fake_tensor import FakeTensorMode

    from labkit.plan._kernels import keeps_a_buffer, real_layout

    def laid(t: torch.Tensor, last: bool) -> torch.Tensor:
        if not last:
            return t
        if dims == 4:
            return t.contiguous(memory_format=torch.channels_last)
        return t.transpose(1, 2).contiguous().transpose(1, 2)

    torch.manual_seed(0)
    shape = (2, 8, 4, 4) if dims == 4 else (2, 8, 16)
    x, g = laid(torch.randn(shape), x_last), laid(torch.randn(shape), g_last)
    w, mean, var = torch.randn(8), torch.zeros(8), torch.ones(8)
    _, saved_mean, saved_invstd = torch.ops.aten.native_batch_norm(
        x, w, None, mean, var, True, 0.1, 1e-5
    )
    op = torch.ops.aten.native_batch_norm_backward.default
    args = (g, x, w, mean, var, saved_mean, saved_invstd, True, 1e-5, [True, True, True])
    real = op(*args)
    with FakeTensorMode(allow_non_fake_inputs=True):
        out = op(*args)
        planned = real_layout(op, args, {}, out) if keeps_a_buffer(op) else out
    assert [t.stride() for t in planned] == [t.stride() for t in real]
    assert [t.shape for t in planned] == [t.shape for t in real]
