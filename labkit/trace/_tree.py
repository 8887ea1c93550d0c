"""Find the tensors inside nested call arguments and results, with readable names."""

from __future__ import annotations

import dataclasses
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
