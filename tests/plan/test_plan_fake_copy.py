"""The fake copy of a model: parameters and buffers made directly where they are alone in
their storage, by ``FakeTensorMode.from_tensor`` otherwise, and the same either way."""

from __future__ import annotations

import torch
from torch import nn

import labkit
from labkit.plan import _fake
from labkit.plan._fake import fake_model, new_mode


class Odd(nn.Module):
    """Every kind of state a fake copy meets: shared storages, views, strides, dtypes."""

    def __init__(self, measurable: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.tied = nn.Linear(3, 4, bias=False)
        self.tied.weight = self.fc.weight
        # a storage two tensors share (with room left over: a plan counts the parts its
        # tensors span, labkit.memory the whole storage; measurable: no room left)
        flat = torch.randn(8 if measurable else 10)
        self.head = nn.Parameter(flat[:4])
        self.register_buffer("tail", flat[4:8])
        self.register_buffer("steps", torch.tensor(3))
        self.register_buffer("half_t", torch.randn(2, 3).half().t())
        # one element seen 3 times (labkit.memory cannot put such a buffer back after the
        # step: not measurable)
        spread = torch.randn(3) if measurable else torch.randn(1).expand(3)
        self.register_buffer("spread", spread)
        self.emb = nn.Embedding(5, 3)
        self.emb.weight.grad = torch.randn(5, 3)  # left by an earlier backward

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        h = self.emb(idx) + self.tail[:3] * self.spread + self.half_t.float().sum()
        return self.fc(h).sum(-1) + self.tied(h).mean(-1) + self.head.sum() * self.steps


def _described(model: nn.Module) -> tuple[list[tuple[object, ...]], list[str]]:
    rows: list[tuple[object, ...]] = []
    owners: dict[int, str] = {}
    shared = []
    named = [*model.named_parameters(), *model.named_buffers()]
    for name, t in named:
        rows.append(
            (
                name,
                type(t).__name__,
                tuple(t.shape),
                t.stride(),
                t.dtype,
                str(t.device),
                t.requires_grad,
                t.is_leaf,
                isinstance(t, nn.Parameter),
                t.storage_offset(),
                t.untyped_storage().nbytes(),
                None if t.grad is None else (tuple(t.grad.shape), t.grad.stride()),
            )
        )
        shared.append(owners.setdefault(id(t.untyped_storage()), name))
    return rows, shared


def test_the_fake_copy_is_what_from_tensor_makes(monkeypatch) -> None:
    model = Odd()
    direct = fake_model(model, new_mode(), torch.device("cpu"), {})
    monkeypatch.setattr(_fake, "_fake_alone", lambda *args: None)  # from_tensor for all
    described = fake_model(model, new_mode(), torch.device("cpu"), {})
    assert _described(direct) == _described(described)
    rows, shared = _described(direct)
    assert shared[rows.index(next(r for r in rows if r[0] == "tail"))] == "head"  # one storage


def test_a_real_parameter_the_loss_captured_shares_its_fake_storage() -> None:
    model = Odd()
    mode = new_mode()
    memo: dict[int, torch.Tensor] = {}
    fake_model(model, mode, torch.device("cpu"), memo)
    with mode:
        again = mode.from_tensor(model.fc.weight)  # as the fake mode converts a captured one
    assert again.untyped_storage() is memo[id(model.fc.weight)].untyped_storage()


def test_the_plan_of_odd_state_is_the_measured_step() -> None:
    torch.manual_seed(0)
    model, idx = Odd(measurable=True), torch.tensor([[0, 1, 2], [3, 4, 0]])
    plan = labkit.plan(model, idx, optimizer=lambda ps: torch.optim.Adam(ps))
    opt = torch.optim.Adam(model.parameters())
    measured = labkit.memory(model, idx, optimizer=opt)
    assert plan.peak_bytes == measured.peak_bytes
    assert plan.meta.peak_by_category == measured.meta.peak_by_category


def test_a_loss_that_captured_the_real_parameters_leaves_their_grad_alone() -> None:
    model = nn.Linear(3, 4)
    model.bias.grad = kept = torch.zeros(4)

    def loss(out: torch.Tensor) -> torch.Tensor:  # autograd reaches the real weight
        return out.sum() + model.weight.square().sum()

    labkit.plan(model, torch.randn(2, 3), loss=loss)
    assert model.weight.grad is None  # was a FakeTensor left on the user's parameter
    assert model.bias.grad is kept and not kept.any()


class _FlatParams(nn.Module):
    """Parameters that are views of one flat buffer with room to spare (as a model whose
    parameters were packed into one vector, or a flat-buffer optimizer, holds them)."""

    def __init__(self) -> None:
        super().__init__()
        flat = torch.randn(64 * 65 + 100)  # 100 elements past the two parameters
        self.w = nn.Parameter(flat[: 64 * 64].view(64, 64))
        self.b = nn.Parameter(flat[64 * 64 : 64 * 65])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w.t() + self.b


def test_parameters_sharing_one_bigger_storage_count_it_whole() -> None:
    # the real step's tracker counts the flat storage whole, as torch's MemTracker does
    # (storages, not tensors); the fake copy once made a storage of the parameters' extent
    model, x = _FlatParams(), torch.randn(8, 64)
    plan = labkit.plan(model, x)
    measured = labkit.memory(model, x)
    assert plan.peak_bytes == measured.peak_bytes
    assert plan.peak_bytes - labkit.plan(nn.Linear(64, 64), x).peak_bytes == 100 * 4
