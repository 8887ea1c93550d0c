"""Validation of trace-file data before a Trace is built from it.

A trace file is data from outside: a hand-edited, truncated or hostile file must be
refused with a :class:`TraceFileError` naming the field and the value, never load and
break a view later (a "-1.00 s" in the summary, an IndexError inside a plot).

The checks follow the dataclasses of :mod:`labkit.trace.model` generically, by their
type hints, so fields added there are checked without changes here, and fields this
labkit does not know (written by a newer one) are tolerated:

- a file is at most :data:`MAX_FILE_BYTES` and nests at most :data:`MAX_DEPTH` levels;
- numbers are finite; times, bytes, FLOPs, counts and shapes are also >= 0;
- each field has its declared type (an integer, a number, a string, a list, ...);
- the required fields are present (those without a default, and the meta figures
  every view uses);
- node ids are their positions, parents come before their children, and edge ends
  are existing nodes.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable
from typing import Any

from labkit._format import fmt_bytes
from labkit.trace.errors import TraceFileError
from labkit.trace.model import (
    NODE_KINDS,
    Edge,
    MemoryMeta,
    MemorySample,
    ModuleInfo,
    Node,
    TraceMeta,
)

MAX_FILE_BYTES = 256 << 20
"""Largest trace file :func:`labkit.trace.io.load` reads (``max_bytes=`` raises it)."""

MAX_DEPTH = 64
"""Deepest JSON nesting a trace file may have (a real trace nests about 6 levels)."""

# meta figures every summary and view reads; in every trace file since schema version 1
REQUIRED_META = ("model", "mode", "calls", "forward_time", "backward_time")

# numbers under a field whose name matches are measurements or sizes: never negative
_NON_NEGATIVE = re.compile(
    r"time|bytes|flops|params|trainable|calls|count|depth|events|shape|id$|^parent$|^src$|"
    r"^dst$|median|spread|iqr|std|runs|repeat|samples|peak|_by_"
)
_SECTIONS = {"meta": TraceMeta, "modules": ModuleInfo, "nodes": Node, "edges": Edge,
             "memory": MemorySample, "memory_meta": MemoryMeta}  # fmt: skip
_REQUIRED_TOP = ("meta", "modules", "nodes", "edges")


def check_size(size: int, source: str, max_bytes: int = MAX_FILE_BYTES) -> None:
    """Refuse a file larger than ``max_bytes`` before reading it."""
    if size > max_bytes:
        raise TraceFileError(
            f"{source}: the file is {fmt_bytes(size)} ({size} bytes); labkit reads trace "
            f"files up to {fmt_bytes(max_bytes)} ({max_bytes} bytes). If it really is a "
            "trace, load it with labkit.trace.io.load(path, max_bytes=...)"
        )


def too_deep(source: str) -> TraceFileError:
    """The error for JSON nested deeper than the parser (or :data:`MAX_DEPTH`) allows."""
    return TraceFileError(
        f"{source}: the JSON nests deeper than {MAX_DEPTH} levels (a labkit trace nests "
        "about 6); the file is corrupt or not a labkit trace"
    )


def validate(data: dict[str, Any], source: str) -> None:
    """Check a trace file's parsed JSON (schema and version already checked).

    A compiled check runs first (a 5000-node trace in a fraction of a second); only when
    it finds a problem does the field-by-field walk run, to name the field and value.

    Raises:
        TraceFileError: naming ``source``, the field (``nodes[3].fwd_time``) and its value.
    """
    if not _fast_ok(data):
        _explain(data, source)  # raises, naming the field
    _graph(data, source)


def _explain(data: dict[str, Any], source: str) -> None:
    for name in _REQUIRED_TOP:
        if name not in data:
            raise _error(source, name, "is missing")
    for name, cls in _SECTIONS.items():
        if name not in data or (name == "memory_meta" and data[name] is None):
            continue
        value = data[name]
        if name in ("meta", "memory_meta"):
            _record(value, cls, name, source, required=REQUIRED_META if name == "meta" else ())
        elif not isinstance(value, list):
            raise _error(source, name, f"must be a list, got {_show(value)}")
        else:
            for i, item in enumerate(value):
                _record(item, cls, f"{name}[{i}]", source)
    for key, value in data.items():  # fields this labkit does not know: numbers still sane
        if key not in _SECTIONS and key not in ("schema", "version"):
            _any(value, key, source, _non_negative(key))


def _graph(data: dict[str, Any], source: str) -> None:
    nodes, n = data["nodes"], len(data["nodes"])
    for i, node in enumerate(nodes):
        if node["id"] != i:
            raise _error(source, f"nodes[{i}].id", f"is {node['id']}; node ids must be their "
                         f"positions 0..{n - 1}")  # fmt: skip
        if node["kind"] not in NODE_KINDS:
            raise _error(source, f"nodes[{i}].kind", f"is {_show(node['kind'])}; it must be one "
                         f"of {', '.join(NODE_KINDS)}")  # fmt: skip
        parent = node.get("parent")
        if parent is not None and not parent < i:
            raise _error(source, f"nodes[{i}].parent", f"is {parent}; a parent must be an "
                         f"earlier node (0..{i - 1})")  # fmt: skip
    for i, edge in enumerate(data["edges"]):
        for end in ("src", "dst"):
            if not edge[end] < n:
                raise _error(source, f"edges[{i}].{end}", f"is {edge[end]}, but the trace has "
                             f"{n} nodes (ids 0..{n - 1})")  # fmt: skip


def _record(
    value: object, cls: type, where: str, source: str, required: tuple[str, ...] = ()
) -> None:
    if not isinstance(value, dict):
        raise _error(source, where, f"must be an object, got {_show(value)}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = _hints(cls)
    for name, f in fields.items():
        needed = name in required or (
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        )
        if name not in value:
            if needed:
                raise _error(source, f"{where}.{name}", "is missing")
            continue
        _typed(value[name], hints[name], f"{where}.{name}", source, _non_negative(name))
    for name, v in value.items():
        if name not in fields:
            _any(v, f"{where}.{name}", source, _non_negative(name))


def _non_negative(name: str) -> bool:
    return _NON_NEGATIVE.search(name) is not None


def _typed(  # noqa: C901 - one branch per kind of type hint
    value: object, hint: object, where: str, source: str, non_neg: bool
) -> None:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        _any(value, where, source, non_neg)
    elif origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return
        (inner,) = [a for a in args if a is not type(None)] or [Any]
        _typed(value, inner, where, source, non_neg)
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
        _record(value, hint, where, source)
    elif origin in (tuple, list):
        if not isinstance(value, list):
            raise _error(source, where, f"must be a list, got {_show(value)}")
        for i, item in enumerate(value):
            _typed(item, args[0] if args else Any, f"{where}[{i}]", source, non_neg)
    elif origin is dict:
        if not isinstance(value, dict):
            raise _error(source, where, f"must be an object, got {_show(value)}")
        for k, item in value.items():
            _typed(item, args[1] if args else Any, f"{where}.{k}", source, non_neg)
    elif hint is bool:
        if not isinstance(value, bool):
            raise _error(source, where, f"must be true or false, got {_show(value)}")
    elif hint is str:
        if not isinstance(value, str):
            raise _error(source, where, f"must be a string, got {_show(value)}")
    elif hint in (int, float):
        _number(value, where, source, non_neg, integer=hint is int)
    else:
        _any(value, where, source, non_neg)


def _any(value: object, where: str, source: str, non_neg: bool, depth: int = 0) -> None:
    """Untyped data: numbers finite (and >= 0 under a measurement's name), all the way down."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, int | float):
        _number(value, where, source, non_neg, integer=False)
        return
    if depth >= MAX_DEPTH:
        raise too_deep(source)
    if isinstance(value, dict):
        for k, item in value.items():
            _any(item, f"{where}.{k}", source, non_neg or _non_negative(str(k)), depth + 1)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _any(item, f"{where}[{i}]", source, non_neg, depth + 1)


def _number(value: object, where: str, source: str, non_neg: bool, *, integer: bool) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        kind = "an integer" if integer else "a number"
        raise _error(source, where, f"must be {kind}, got {_show(value)}")
    if integer and not isinstance(value, int):
        raise _error(source, where, f"must be an integer, got {_show(value)}")
    if not math.isfinite(value):
        raise _error(source, where, f"must be a finite number, got {_show(value)}")
    if non_neg and value < 0:
        raise _error(source, where, f"must be >= 0 (a time, size or count), got {_show(value)}")


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _error(source: str, where: str, problem: str) -> TraceFileError:
    return TraceFileError(f"{source}: field {where} {problem}")


def first_non_finite(data: object, where: str = "") -> str | None:
    """Path of the first NaN/Inf number in plain data (for a save that JSON refuses)."""
    stack = [(data, where)]
    while stack:
        value, at = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            return f"{at} = {value}"
        if isinstance(value, dict):
            stack.extend((v, f"{at}.{k}" if at else str(k)) for k, v in reversed(value.items()))
        elif isinstance(value, list | tuple):
            stack.extend((v, f"{at}[{i}]") for i, v in reversed(list(enumerate(value))))
    return None


# ------------------------------------------------------------------ the compiled fast check
_MISSING = object()
_Check = Callable[[Any], bool]
_RECORDS: dict[tuple[type, tuple[str, ...]], _Check] = {}


def _fast_ok(data: dict[str, Any]) -> bool:
    """True when ``data`` passes every check of :func:`_explain` (exact JSON types)."""
    if any(name not in data for name in _REQUIRED_TOP):
        return False
    if not _fast_record(TraceMeta, REQUIRED_META)(data["meta"]):
        return False
    if data.get("memory_meta") is not None and not _fast_record(MemoryMeta)(data["memory_meta"]):
        return False
    for name in ("modules", "nodes", "edges", "memory"):
        if name in data:
            items = data[name]
            if type(items) is not list or not all(map(_fast_record(_SECTIONS[name]), items)):
                return False
    return all(_any_ok(v, _non_negative(k), 0) for k, v in data.items()
               if k not in _SECTIONS and k not in ("schema", "version"))  # fmt: skip


def _fast_record(cls: type, required: tuple[str, ...] = ()) -> _Check:
    key = (cls, required)
    if key not in _RECORDS:
        hints = _hints(cls)
        specs = [
            (f.name, _fast(hints[f.name], _non_negative(f.name)), f.name in required or (
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING))
            for f in dataclasses.fields(cls)
        ]  # fmt: skip
        known = frozenset(name for name, _, _ in specs)

        def check(value: Any) -> bool:
            if type(value) is not dict:
                return False
            for name, ok, needed in specs:
                item = value.get(name, _MISSING)
                if item is _MISSING:
                    if needed:
                        return False
                elif not ok(item):
                    return False
            return known.issuperset(value) or all(
                _any_ok(v, _non_negative(k), 0) for k, v in value.items() if k not in known
            )

        _RECORDS[key] = check
    return _RECORDS[key]


def _fast(hint: Any, non_neg: bool) -> _Check:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        ok = _fast(inner[0], non_neg) if len(inner) == 1 else _fast(Any, non_neg)
        if type(None) not in args:
            return ok
        return lambda v: v is None or ok(v)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _fast_record(hint)
    if origin in (tuple, list):
        item = _fast(args[0] if args else Any, non_neg)
        return lambda v: type(v) is list and all(map(item, v))
    if origin is dict:
        item = _fast(args[1] if args else Any, non_neg)
        return lambda v: type(v) is dict and all(map(item, v.values()))
    if hint is bool:
        return lambda v: type(v) is bool
    if hint is str:
        return lambda v: type(v) is str
    if hint is int:
        return (lambda v: type(v) is int and v >= 0) if non_neg else (lambda v: type(v) is int)
    if hint is float:
        if non_neg:
            return lambda v: (type(v) is int or type(v) is float) and 0 <= v < math.inf
        return lambda v: type(v) is int or (type(v) is float and math.isfinite(v))
    return lambda v: _any_ok(v, non_neg, 0)


def _any_ok(value: Any, non_neg: bool, depth: int) -> bool:
    t = type(value)
    if t is str or t is bool or value is None:
        return True
    if t is int or t is float:
        return math.isfinite(value) and (not non_neg or value >= 0)
    if depth >= MAX_DEPTH:
        return False
    if t is dict:
        return all(_any_ok(v, non_neg or _non_negative(str(k)), depth + 1)
                   for k, v in value.items())  # fmt: skip
    if t is list:
        return all(_any_ok(v, non_neg, depth + 1) for v in value)
    return True
