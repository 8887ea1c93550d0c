"""Tensors inside the things labkit is handed: one definition of each, imported everywhere.

- walking nested call arguments and results: :func:`named_tensors`, :func:`flat_tensors`,
  :func:`call_tensors`, :func:`named_args`;
- a batch as a call's ``(args, kwargs)``: :func:`split_batch`, with keyword inputs given
  beside it: :func:`call_inputs`;
- the real tensors inside a tensor subclass (torchao's quantized weights):
  :func:`is_wrapper`, :func:`plain_tensors`, and the bytes they hold: :func:`held_bytes`;
- where a model lives: :func:`model_device`.

Example:
    >>> import torch
    >>> [name for name, _ in named_tensors({"image": torch.zeros(1), "label": [torch.ones(1)]})]
    ["['image']", "['label'][0]"]
    >>> split_batch({"x": 1})
    ((), {'x': 1})
    >>> model_device(torch.nn.Linear(2, 2))
    device(type='cpu')
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator, Mapping
from typing import Any

import torch


def named_tensors(
    obj: Any, prefix: str = "", _depth: int = 0
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, tensor)`` for each tensor in ``obj``.

    Walks tensors, lists, tuples (named tuples by field), mappings, dataclasses and
    objects exposing ``to_dict()`` (PyTorch Geometric's ``Data``). Names read like
    Python: ``x``, ``batch['image']``, ``out[1]``, ``sample.label``.
    """
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
        return
    if _depth > 8 or obj is None or isinstance(obj, (str, bytes, int, float, bool)):
        return
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        for f in obj._fields:
            yield from named_tensors(getattr(obj, f), f"{prefix}.{f}", _depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from named_tensors(v, f"{prefix}[{i}]", _depth + 1)
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            yield from named_tensors(v, f"{prefix}[{k!r}]", _depth + 1)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from named_tensors(getattr(obj, f.name), f"{prefix}.{f.name}", _depth + 1)
    elif callable(getattr(obj, "to_dict", None)) and hasattr(obj, "edge_index"):
        for k, v in obj.to_dict().items():
            yield from named_tensors(v, f"{prefix}.{k}", _depth + 1)


def flat_tensors(obj: Any) -> list[torch.Tensor]:
    """Tensors directly in ``obj`` or one list/tuple level down (fast path for ops)."""
    if isinstance(obj, torch.Tensor):
        return [obj]
    out: list[torch.Tensor] = []
    if isinstance(obj, (list, tuple)):
        for v in obj:
            if isinstance(v, torch.Tensor):
                out.append(v)
            elif isinstance(v, (list, tuple)):
                out.extend(x for x in v if isinstance(x, torch.Tensor))
    return out


def call_tensors(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> list[torch.Tensor]:
    """Tensors among an op's positional and keyword arguments."""
    out = flat_tensors(args)
    if kwargs:
        for v in kwargs.values():
            out.extend(flat_tensors(v))
    return out


_INDEX = tuple(f"[{i}]" for i in range(32))


def named_args(args: tuple[Any, ...], kwargs: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """``named_tensors((args, kwargs))`` with a fast path for plain tensor arguments."""
    out: list[tuple[str, torch.Tensor]] = []
    for i, a in enumerate(args):
        if isinstance(a, torch.Tensor):
            out.append((_INDEX[i] if i < 32 else f"[{i}]", a))
        elif a is not None and not isinstance(a, (str, bytes, int, float, bool)):
            out.extend(named_tensors(a, f"[{i}]"))
    if kwargs:
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                out.append((f"[{k!r}]", v))
            elif v is not None and not isinstance(v, (str, bytes, int, float, bool)):
                out.extend(named_tensors(v, f"[{k!r}]"))
    return out


def split_batch(batch: Any, *, strict: str | None = None) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A batch as the positional and keyword inputs of one call.

    A mapping gives keyword inputs, a tuple or list positional ones, anything else (a
    tensor, PyTorch Geometric's ``Data``) is the one positional input.

    Args:
        batch: The batch.
        strict: The argument's name (``"compare(batch=...)"``): then only a tensor, a tuple,
            a list or a mapping is accepted, and anything else raises a TypeError naming it.

    Returns:
        ``(args, kwargs)``.

    Example:
        >>> split_batch([1, 2])
        ((1, 2), {})
        >>> split_batch(3, strict="compare(batch=...)")
        Traceback (most recent call last):
        ...
        TypeError: compare(batch=...) must be a tensor, a tuple of positional inputs or a dict of keyword inputs, got int
    """  # noqa: E501
    if isinstance(batch, Mapping):
        return (), dict(batch)
    if isinstance(batch, (tuple, list)):
        return tuple(batch), {}
    if strict is not None and not isinstance(batch, torch.Tensor):
        raise TypeError(
            f"{strict} must be a tensor, a tuple of positional inputs or a dict of "
            f"keyword inputs, got {type(batch).__name__}"
        )
    return (batch,), {}


def call_inputs(
    batch: Any, inputs: Mapping[str, Any], *, where: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A call's ``(args, kwargs)`` from a batch and keyword inputs given beside it.

    ``labkit.memory(model, ids, attention_mask=m)`` takes inputs as ``labkit.trace``
    does; a batch alone (:func:`split_batch`) or keywords alone work too.

    Args:
        batch: The batch (``None``: no positional inputs).
        inputs: Keyword inputs of the model.
        where: The caller, for errors (``"labkit.memory"``).

    Raises:
        TypeError: No input at all, or a keyword given both in a dict batch and beside it.

    Example:
        >>> call_inputs((1, 2), {"mask": 3}, where="labkit.memory")
        ((1, 2), {'mask': 3})
    """
    if batch is None and not inputs:
        raise TypeError(
            f"{where} needs the model's input: a batch (a tensor, a tuple of positional "
            "inputs or a dict of keyword inputs) and/or keyword inputs, e.g. "
            f"{where}(model, input_ids, attention_mask=mask)"
        )
    args, kwargs = split_batch(batch) if batch is not None else ((), {})
    twice = sorted(kwargs.keys() & inputs.keys())
    if twice:
        raise TypeError(
            f"{where}: the input {twice[0]!r} is given twice, in the batch dict and as a "
            "keyword; give it once"
        )
    return args, {**kwargs, **inputs}


_PLAIN = (torch.Tensor, torch.nn.Parameter)


def is_wrapper(t: torch.Tensor) -> bool:
    """True for a wrapper tensor subclass, whose real tensors ``__tensor_flatten__`` names."""
    return type(t) not in _PLAIN and hasattr(t, "__tensor_flatten__")


def plain_tensors(t: torch.Tensor) -> list[torch.Tensor]:
    """The tensors that hold ``t``'s memory: itself, or a wrapper subclass's inner tensors.

    A wrapper subclass (torchao's quantized weights, for one) reports a storage of its
    logical size; its real bytes are in the tensors ``__tensor_flatten__`` names.
    """
    if not is_wrapper(t):
        return [t]
    names, _ = t.__tensor_flatten__()  # type: ignore[attr-defined]  # is_wrapper checked it
    out: list[torch.Tensor] = []
    for name in names:
        inner = getattr(t, name)
        if isinstance(inner, torch.Tensor):
            out.extend(plain_tensors(inner))
    return out


def held_bytes(t: torch.Tensor) -> int:
    """Bytes of the elements ``t`` holds, looking inside tensor subclasses.

    Example:
        >>> held_bytes(torch.zeros(4, dtype=torch.float16))
        8
    """
    return sum(p.numel() * p.element_size() for p in plain_tensors(t))


def model_device(model: torch.nn.Module) -> torch.device:
    """Where the model's parameters (or, without any, its buffers) live.

    ``cpu`` for a model with neither, or with all of them on the meta device.
    """
    for t in itertools.chain(model.parameters(), model.buffers()):
        if t.device.type != "meta":
            return t.device
    return torch.device("cpu")
