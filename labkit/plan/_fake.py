"""Fake copies of a model, its batch and its optimizer: the same shapes, no memory.

A plan runs the step on ``torch._subclasses.fake_tensor`` tensors: every op computes
its output's shape, dtype, strides and device and allocates nothing. The user's model is
never touched; a shallow structural copy gets fake parameters and buffers (a real
parameter becomes a fake one with its metadata; a meta one becomes a fake tensor on the
planned device), so tied weights stay tied.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable
from typing import Any, TypeAlias

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from labkit.plan._standin import held_state
from labkit.plan.errors import PlanError


def new_mode() -> FakeTensorMode:
    """A fake-tensor mode that also accepts stray real tensors (constants in forward)."""
    return FakeTensorMode(allow_non_fake_inputs=True)


# what labkit.plan takes as ``optimizer``: an optimizer of the model, or a factory called on
# the fake copy's parameters (or on the fake copy itself), checked when it is called
OptimizerArg: TypeAlias = "torch.optim.Optimizer | Callable[..., torch.optim.Optimizer] | None"


def fake_tensor(t: torch.Tensor, mode: FakeTensorMode, device: torch.device) -> torch.Tensor:
    """A fake tensor with ``t``'s shape, strides and dtype on ``device`` (no data copied)."""
    if t.device.type != "meta" and t.device == device:
        _whole_storage(t, mode)
        return mode.from_tensor(t)
    with mode:
        out = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=device)
    return out.requires_grad_(t.requires_grad) if t.is_leaf and t.requires_grad else out


def _whole_storage(t: torch.Tensor, mode: FakeTensorMode) -> None:
    """Make ``t``'s whole storage fake first when ``t`` uses only part of it (parameters
    that are views of one flat buffer): ``from_tensor`` alone sizes a fake storage by what
    the tensors converted need, so a plan counted 96 bytes of a 104-byte storage that the
    memory tracker (and torch's MemTracker) count whole. Tensors of it converted later
    share the fake storage of the full size."""
    if t.layout != torch.strided or type(t) not in _PLAIN or t.is_quantized:
        return
    try:
        st = t.untyped_storage()
        if st.nbytes() <= _extent(t) + t.storage_offset() * t.element_size():
            return
        whole = torch.empty(0, dtype=torch.uint8, device=t.device)
        with torch.no_grad():
            whole.set_(st)
        mode.from_tensor(whole)
    except (RuntimeError, NotImplementedError, TypeError):  # not a storage it can view
        return


def fake_model(
    model: torch.nn.Module, mode: FakeTensorMode, device: torch.device, memo: dict[int, Any]
) -> torch.nn.Module:
    """A copy of ``model`` whose parameters and buffers are fake (``memo``: real id -> fake,
    and real module id -> its copy once made).

    Modules the model holds outside its children (``self.others = [emb]``) get fake
    parameters too (the deep copy would copy their real ones); a tensor with a ``grad_fn``
    kept in an attribute (a loss from an earlier forward, which the deep copy refuses) is
    copied as its detached self.
    """
    seen: set[int] = set()  # the real storages made fake so far
    foreign, graphs = held_state(model)
    for _, kept in graphs:
        memo.setdefault(id(kept), kept.detach())
    for t in state_of(model, foreign):
        if id(t) in memo:
            continue  # a tied weight: one fake tensor for both modules
        f = _fake_alone(t, mode, device, seen)
        if f is None:
            f = fake_tensor(t.detach(), mode, device)
        if isinstance(t, torch.nn.Parameter):
            f = _as_parameter(f, t.requires_grad)
        memo[id(t)] = f
    for m in (model, *foreign):
        for p in m.parameters():
            if p.grad is not None and memo[id(p)].grad is None:
                g = _fake_alone(p.grad, mode, device, seen)
                memo[id(p)].grad = g if g is not None else fake_tensor(p.grad, mode, device)
    return deep_copy(model, memo)


def state_of(model: torch.nn.Module, foreign: list[torch.nn.Module]) -> list[torch.Tensor]:
    """The parameters and buffers of ``model`` and of the modules it holds apart."""
    out = [*model.parameters(), *model.buffers()]
    for m in foreign:
        out += [*m.parameters(recurse=False), *m.buffers(recurse=False)]
    return out


def deep_copy(model: torch.nn.Module, memo: dict[int, Any]) -> torch.nn.Module:
    """``copy.deepcopy(model, memo)``, or a PlanError naming the attribute it cannot copy."""
    try:
        return copy.deepcopy(model, memo)
    except RuntimeError as e:
        if "deepcopy" not in str(e):
            raise
        raise PlanError(
            f"labkit.plan copies {type(model).__name__} to plan it on fake tensors, and "
            f"copy.deepcopy failed: {str(e).splitlines()[0]} A module holds a tensor with a "
            "grad_fn (a loss or an activation kept from an earlier forward) deeper than one "
            "container in: keep it detached (.detach()) or set it to None before planning"
        ) from None


def _fake_alone(
    t: torch.Tensor, mode: FakeTensorMode, device: torch.device, seen: set[int]
) -> torch.Tensor | None:
    """``t``'s fake, made directly, when ``t`` is a plain strided tensor on ``device`` alone
    in a storage it fills: what ``mode.from_tensor`` makes, at a seventh of its cost (it
    describes every tensor in full, ~0.3 ms each: two thirds of a tiny module's plan).

    The real storage is registered with the mode's converter, so a tensor of the same
    storage converted later (a view taken in the step, a real parameter the loss captured)
    shares the fake storage, as after ``from_tensor``. ``None``: not such a tensor (a view
    or one of several tensors of a storage, a subclass, conjugate, quantized, sparse,
    inference or meta), or this torch's fake-tensor internals differ: ``from_tensor``
    then.
    """
    try:
        st = t.untyped_storage()
        key = st._cdata
    except (RuntimeError, NotImplementedError):
        return None
    first = key not in seen
    seen.add(key)
    if not (
        first
        and type(t) in _PLAIN
        and t.layout == torch.strided
        and t.device == device
        and device.type != "meta"
        and t.storage_offset() == 0
        and not (t.is_conj() or t.is_neg() or t.is_quantized or t.is_inference())
        and st.nbytes() == _extent(t)
    ):
        return None
    try:
        converter = mode.fake_tensor_converter.meta_converter
        with torch._C._DisableTorchDispatch():
            meta = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
            f = FakeTensor(mode, meta, device)
        converter.storage_memo[converter.describer.get_storage_id(st)] = f.untyped_storage()
    except (AttributeError, TypeError):  # pragma: no cover - another torch's internals
        return None
    return f


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def _extent(t: torch.Tensor) -> int:
    """Bytes from a tensor's first element to the end of its last (its storage's need)."""
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride(), strict=True))) * (
        t.element_size()
    )


def _as_parameter(f: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """``nn.Parameter(f, requires_grad)`` for a fake tensor made just now: the same fake,
    marked a parameter as ``Parameter`` marks a tensor subclass, without the ``detach``
    (a fake op, ~0.1 ms a parameter) that ``Parameter`` makes to get a tensor of its own."""
    if not f.is_leaf:
        return torch.nn.Parameter(f, requires_grad=requires_grad)
    f.requires_grad_(requires_grad)
    f._is_param = True  # what Parameter sets on a tensor subclass
    return f


def meta_copy(model: torch.nn.Module) -> tuple[torch.nn.Module, dict[int, Any]]:
    """A copy of ``model`` on the meta device (nothing allocated) and ``{id(real): meta}``."""
    memo: dict[int, Any] = {}
    foreign, graphs = held_state(model)
    for _, kept in graphs:
        memo[id(kept)] = kept.detach()
    for t in state_of(model, foreign):
        if id(t) not in memo:
            m = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device="meta")
            if isinstance(t, torch.nn.Parameter):
                m = torch.nn.Parameter(m, requires_grad=t.requires_grad)
            memo[id(t)] = m
    ids = dict(memo)
    return deep_copy(model, memo), ids


def named_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Every parameter and buffer by path, tied ones under each of their names."""
    return {
        **dict(model.named_parameters(remove_duplicate=False)),
        **dict(model.named_buffers(remove_duplicate=False)),
    }


def fake_batch(batch: object, mode: FakeTensorMode, device: torch.device) -> object:
    """The batch with every tensor fake on ``device``; a ``torch.Size`` becomes float32 zeros."""
    if isinstance(batch, torch.Size):
        with mode:
            return torch.empty(batch, device=device)
    if isinstance(batch, torch.Tensor):
        return fake_tensor(batch, mode, device)
    if isinstance(batch, dict):
        return {k: fake_batch(v, mode, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a named tuple
        fields: Callable[..., object] = type(batch)  # takes one argument per field
        return fields(*(fake_batch(v, mode, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(fake_batch(v, mode, device) for v in batch)
    if hasattr(batch, "to_dict") and hasattr(batch, "from_dict"):  # a PyG Data / Batch
        return type(batch).from_dict(
            {k: fake_batch(v, mode, device) for k, v in batch.to_dict().items()}
        )
    return batch


def fake_optimizer(
    optimizer: OptimizerArg,
    fmodel: torch.nn.Module,
    mode: FakeTensorMode,
    device: torch.device,
    memo: dict[int, Any],
) -> torch.optim.Optimizer | None:
    """The optimizer for the fake model: a factory is called on its parameters (or, failing
    that, on the fake model: ``lambda m: m.configure_optimizers(...)``); an optimizer is
    rebuilt with the same class, param groups and hyperparameters (and fake state)."""
    if optimizer is None:
        return None
    if not isinstance(optimizer, torch.optim.Optimizer):
        if not callable(optimizer):
            raise TypeError(
                "optimizer must be a torch.optim.Optimizer or a factory params -> optimizer "
                f"(e.g. lambda ps: torch.optim.AdamW(ps, lr=1e-3)), got {type(optimizer).__name__}"
            )
        with mode:
            try:
                return optimizer(fmodel.parameters())
            except (AttributeError, TypeError) as e:
                try:  # a factory of the module: lambda m: m.configure_optimizers(...)
                    return optimizer(fmodel)
                except Exception:
                    raise e from None
    groups = []
    for g in optimizer.param_groups:
        missing = [p for p in g["params"] if id(p) not in memo]
        if missing:
            raise ValueError(
                f"{type(optimizer).__name__} holds {len(missing)} tensor(s) that are not "
                "parameters of the model: give labkit.plan a factory instead "
                "(optimizer=lambda ps: ...)"
            )
        groups.append({**g, "params": [memo[id(p)] for p in g["params"]]})
    try:
        with mode:
            fopt = type(optimizer)(groups, **_accepted(type(optimizer), optimizer.defaults))
    except TypeError as e:
        raise TypeError(
            f"could not rebuild {type(optimizer).__name__} for the plan ({e}): pass a factory "
            "instead, optimizer=lambda params: ..."
        ) from e
    for p, state in optimizer.state.items():
        fp = memo.get(id(p))
        if fp is not None:
            fopt.state[fp] = {k: _fake_state(v, mode, device) for k, v in state.items()}
    return fopt


def _accepted(cls: type, defaults: dict[str, Any]) -> dict[str, Any]:
    """The defaults this torch's constructor of ``cls`` takes by name (AdamW keeps
    ``decoupled_weight_decay`` in its defaults but takes no such keyword in some versions);
    the rest still reach the optimizer through the param groups, which carry every key."""
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return dict(defaults)
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return dict(defaults)
    return {k: v for k, v in defaults.items() if k in params}


def _fake_state(v: object, mode: FakeTensorMode, device: torch.device) -> object:
    """Optimizer state for the fake optimizer; a one-element CPU tensor (Adam's step count)
    keeps its value, since the step reads it with ``.item()``."""
    if not isinstance(v, torch.Tensor):
        return v
    if v.numel() == 1 and v.device.type == "cpu":
        value = v.item()
        with mode:
            return torch.tensor(value, dtype=v.dtype).reshape(v.shape)
    return fake_tensor(v, mode, device)
