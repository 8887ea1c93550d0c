"""Plans of losses whose real CPU kernel keeps more than its result's size.

``F.mse_loss`` and ``F.smooth_l1_loss`` (mean or sum) return a 0-dim view of their
element-wise buffer, which stays alive with the loss through backward. The plan must
count that buffer as the real step holds it: checked against torch's MemTracker on the
real step, and against ``labkit.memory``.
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
