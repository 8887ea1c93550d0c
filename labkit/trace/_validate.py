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

The checks run twice over, on purpose: :class:`Readers` compiles, per dataclass, one
function that checks a record and builds it (fast: a 370,000-node file is read in seconds,
record by record); only when it refuses a record does :func:`explain` walk that record
field by field to name the field and the value.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable, Sequence
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
_SECTIONS = {
    "meta": TraceMeta,
    "modules": ModuleInfo,
    "nodes": Node,
    "edges": Edge,
    "memory": MemorySample,
    "memory_meta": MemoryMeta,
}
_REQUIRED_TOP = ("meta", "modules", "nodes", "edges")
LIST_SECTIONS: dict[str, type] = {
    "modules": ModuleInfo,
    "nodes": Node,
    "edges": Edge,
    "memory": MemorySample,
}
"""The sections that are lists of records, in the order a file has them."""


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


def explain(
    value: object, cls: type, where: str, source: str, required: tuple[str, ...] = ()
) -> None:
    """Walk one record field by field and raise naming the first bad field and its value.

    Runs only after a compiled check (:class:`Readers`) refused ``value``, to name why.

    Raises:
        TraceFileError: naming ``source``, the field (``nodes[3].fwd_time``) and its value.
    """
    _record(value, cls, where, source, required)


def check_present(data: dict[str, Any], source: str) -> None:
    """The sections every trace has are there."""
    for name in _REQUIRED_TOP:
        if name not in data:
            raise _error(source, name, "is missing")


def explain_unknown(data: dict[str, Any], source: str) -> None:
    """Top-level fields this labkit does not know (written by a newer one): numbers sane."""
    for key, value in data.items():  # fields this labkit does not know: numbers still sane
        known = key in _SECTIONS or key in ("schema", "version")
        if not known and not _any_ok(value, _non_negative(key), 0):
            _any(value, key, source, _non_negative(key))


def not_a_list(name: str, value: object, source: str) -> TraceFileError:
    """The error for a section (``nodes``, ``edges``, ...) that is not a list."""
    return _error(source, name, f"must be a list, got {_show(value)}")


def check_graph(nodes: Sequence[Node], edges: Sequence[Edge], source: str) -> None:
    """Node ids are their positions, parents come first, edge ends are existing nodes."""
    n = len(nodes)
    for i, node in enumerate(nodes):
        if node.id != i:
            raise _error(
                source,
                f"nodes[{i}].id",
                f"is {node.id}; node ids must be their positions 0..{n - 1}",
            )
        if node.kind not in NODE_KINDS:
            raise _error(
                source,
                f"nodes[{i}].kind",
                f"is {_show(node.kind)}; it must be one of {', '.join(NODE_KINDS)}",
            )
        parent = node.parent
        if parent is not None and not parent < i:
            raise _error(
                source,
                f"nodes[{i}].parent",
                f"is {parent}; a parent must be an earlier node (0..{i - 1})",
            )
    for i, edge in enumerate(edges):
        for end, value in (("src", edge.src), ("dst", edge.dst)):
            if not value < n:
                raise _error(
                    source,
                    f"edges[{i}].{end}",
                    f"is {value}, but the trace has {n} nodes (ids 0..{n - 1})",
                )


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


# ------------------------------------------------------------------ compiled check-and-build
INVALID: Any = object()
"""What a :class:`Readers` function returns for data its check refuses (then
:func:`explain` names the field)."""

_MISSING = object()
_Check = Callable[[Any], bool]
_Read = Callable[[Any], Any]
# values shared when equal: not floats (1 == 1.0 would give the 1.0 of a file its 1)
_SHAREABLE = (int, str, bool, type(None))


class Readers:
    """Check-and-build functions for the data of one file, compiled from the type hints.

    ``record(cls)(value)`` is the dataclass built from a parsed JSON object, or
    :data:`INVALID` when a check of :func:`explain` would refuse it (exact JSON types,
    finite numbers, no negative measurement, required fields present; fields this labkit
    does not know are checked as numbers and dropped). Lists become tuples where the
    hint says so. Equal strings, shapes and nested records (a node's tensor metas) are
    built once per ``Readers`` and shared, so a file of many similar nodes takes little
    memory; the top-level records (one per node) are not shared.
    """

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._shapes: dict[tuple[int, ...], tuple[int, ...]] = {}
        self._made: dict[tuple[object, ...], _Read] = {}

    def record(self, cls: type, *, required: tuple[str, ...] = (), share: bool = False) -> _Read:
        """The check-and-build function of dataclass ``cls`` (``required``: fields that
        must be present although they have a default)."""
        key = (cls, share, required)
        if key not in self._made:
            self._made[key] = self._compile(cls, required, share)
        return self._made[key]

    def value(self, hint: object, non_neg: bool) -> _Read:
        """The check-and-convert function of one value of type ``hint``."""
        key = (hint, non_neg)
        if key not in self._made:
            self._made[key] = self._value(hint, non_neg)
        return self._made[key]

    def _value(self, hint: Any, non_neg: bool) -> _Read:
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            inner = [a for a in args if a is not type(None)]
            item = self.value(inner[0] if len(inner) == 1 else Any, non_neg)
            if type(None) not in args:
                return item
            return lambda v: None if v is None else item(v)
        if dataclasses.is_dataclass(hint) and isinstance(hint, type):
            return self.record(hint, share=_hashable(hint))
        if origin in (tuple, list):
            return self._sequence(
                args[0] if args else Any, non_neg, tuple if origin is tuple else list
            )
        if hint is str:
            intern = self._strings.setdefault
            return lambda v: intern(v, v) if type(v) is str else INVALID
        check = _fast(hint, non_neg)
        return lambda v: v if check(v) else INVALID

    def _sequence(self, item_hint: Any, non_neg: bool, kind: type) -> _Read:
        share = kind is tuple and _hashable(item_hint)
        if item_hint is int and share:  # a shape: checked in one pass, one tuple per shape
            return _read_ints(non_neg, self._shapes)
        item = self.value(item_hint, non_neg)
        if share and dataclasses.is_dataclass(item_hint):  # items are shared objects: by id
            return _read_records(item)
        shared: dict[object, object] = {}

        def read(v: Any) -> Any:
            if type(v) is not list:
                return INVALID
            out = []
            for y in v:
                y = item(y)
                if y is INVALID:  # `INVALID in out` would call each item's __eq__
                    return INVALID
                out.append(y)
            if not share:
                return kind(out)
            t = tuple(out)
            return shared.setdefault(t, t)

        return read

    def _compile(self, cls: type, required: tuple[str, ...], share: bool) -> _Read:
        """One Python function per record: a check and a conversion per field, inline for
        numbers and strings (a call per field would double the time of a big file).

        Two paths: an object whose keys are the fields in order (all of them, or the first
        ones, as a file saved by this or an older labkit has them) is unpacked at once;
        any other is read key by key.
        """
        hints = _hints(cls)
        fields = dataclasses.fields(cls)
        names = tuple(f.name for f in fields)
        needed = [
            f.name in required
            or (f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
            for f in fields
        ]
        first = max((i + 1 for i, n in enumerate(needed) if n), default=0)  # fields before: needed
        factory = object()
        tails = [
            tuple(factory if f.default is dataclasses.MISSING else f.default for f in fields[n:])
            for n in range(len(fields) + 1)
        ]
        known = frozenset(names)
        env: dict[str, Any] = {
            "BAD": INVALID,
            "MISSING": _MISSING,
            "INF": math.inf,
            "isfinite": math.isfinite,
            "CLS": cls,
            "SD": self._strings.setdefault,
            "SHARED": {},
            "N": len(fields),
            "FIRST": first,
            "PREFIXES": [names[:n] for n in range(len(fields) + 1)],
            "TAILS": tails,
            "FACTORY": factory,
            "EXTRA": lambda v: all(
                _any_ok(x, _non_negative(k), 0) for k, x in v.items() if k not in known
            ),
        }
        args = ", ".join(f"a{i}" for i in range(len(fields)))
        lines = [
            "def read(v):",
            " if type(v) is not dict: return BAD",
            " n = len(v)",
            " if FIRST <= n <= N and tuple(v) == PREFIXES[n]:",
            f"  ({args},) = (*v.values(), *TAILS[n])",
        ]
        for i, f in enumerate(fields):
            if f.default_factory is not dataclasses.MISSING:
                env[f"F{i}"] = f.default_factory
                lines.append(f"  if a{i} is FACTORY: a{i} = F{i}()")
            check = self._field_code(hints[f.name], f.name, i, env, intern=not share, x=f"a{i}")
            if i < first:
                lines += ["  " + c for c in check]
            else:
                lines += [f"  if n > {i}:", *("   " + c for c in check)]
        lines += [" else:", "  g = v.get", "  k = 0"]
        for i, f in enumerate(fields):
            check = self._field_code(hints[f.name], f.name, i, env, intern=not share)
            lines += [f"  x = g({f.name!r}, MISSING)", "  if x is MISSING:"]
            if needed[i]:
                lines.append("   return BAD")
            elif f.default_factory is not dataclasses.MISSING:
                lines.append(f"   a{i} = F{i}()")
            else:
                env[f"D{i}"] = f.default
                lines.append(f"   a{i} = D{i}")
            lines += ["  else:", "   k += 1", *("   " + c for c in check)]
        lines.append("  if k != n and not EXTRA(v): return BAD")
        if share:  # nested records (a tensor's meta): one object per distinct value
            lines += [f" key = ({args},)", " o = SHARED.get(key)", " if o is None:"]
            lines += [
                f"  a{i} = SD(a{i}, a{i})" for i, f in enumerate(fields) if hints[f.name] is str
            ]
            lines += [
                f"  a{i} = SHAPES.setdefault(a{i}, a{i})"
                for i, f in enumerate(fields)
                if "SHAPES" in env and _is_shape(hints[f.name])
            ]
            lines += [f"  o = SHARED[key] = CLS({args})", " return o"]
        elif _plain_init(cls):  # what its __init__ would do, at half the cost of the
            # frozen dataclass's object.__setattr__ per field (a third of a big file's time)
            env["NEW"] = object.__new__
            lines += [" o = NEW(CLS)", " d = o.__dict__"]
            lines += [f" d[{f.name!r}] = a{i}" for i, f in enumerate(fields)]
            lines.append(" return o")
        else:
            lines.append(f" return CLS({args})")
        exec("\n".join(lines), env)  # the code built above from the dataclass's fields
        read: _Read = env["read"]
        return read

    def _field_code(
        self,
        hint: Any,
        name: str,
        i: int,
        env: dict[str, Any],
        *,
        intern: bool = True,
        x: str = "x",
    ) -> list[str]:
        """Lines that check the value in variable ``x`` and leave it, converted, in ``a{i}``
        (or ``return BAD``)."""
        non_neg = _non_negative(name)
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        a = f"a{i}"
        keep = [] if x == a else [f"{a} = {x}"]
        if origin in (typing.Union, types.UnionType) and type(None) in args and len(args) == 2:
            (inner,) = [t for t in args if t is not type(None)]
            if inner in (int, float, str, bool):
                body = self._field_code(inner, name, i, env, intern=intern, x=x)
                return [f"if {x} is None:", f" {a} = None", "else:", *(" " + b for b in body)]
        if hint is int:
            test = f"type({x}) is not int" + (f" or {x} < 0" if non_neg else "")
            return [f"if {test}: return BAD", *keep]
        if hint is float:
            if non_neg:
                test = (
                    f"not ((type({x}) is float and 0.0 <= {x} < INF) or "
                    f"(type({x}) is int and {x} >= 0))"
                )
            else:
                test = f"not (type({x}) is int or (type({x}) is float and isfinite({x})))"
            return [f"if {test}: return BAD", *keep]
        if hint is bool:
            return [f"if type({x}) is not bool: return BAD", *keep]
        if hint is str:
            return [
                f"if type({x}) is not str: return BAD",
                *([f"{a} = SD({x}, {x})"] if intern else keep),
            ]
        if origin is tuple and args and args[0] is int and _hashable(hint):  # a shape, inline
            env.setdefault("SHAPES", self._shapes)
            test = "type(y) is not int" + (" or y < 0" if non_neg else "")
            return [
                f"if type({x}) is not list: return BAD",
                f"for y in {x}:",
                f" if {test}: return BAD",
                f"{a} = tuple({x})",
                *([f"{a} = SHAPES.setdefault({a}, {a})"] if intern else []),
            ]
        env[f"R{i}"] = self.value(hint, non_neg)
        return [f"{a} = R{i}({x})", f"if {a} is BAD: return BAD"]


def _read_ints(non_neg: bool, shared: dict[tuple[int, ...], tuple[int, ...]]) -> _Read:
    def read_ints(v: Any) -> Any:
        if type(v) is not list:
            return INVALID
        for y in v:
            if type(y) is not int or (non_neg and y < 0):
                return INVALID
        t = tuple(v)
        return shared.setdefault(t, t)

    return read_ints


def _read_records(item: _Read) -> _Read:
    """A list of records that ``item`` shares: one tuple per distinct list of them."""
    shared: dict[tuple[int, ...], tuple[object, ...]] = {}
    ones: dict[int, tuple[object]] = {}

    def read_records(v: Any) -> Any:
        if type(v) is not list:
            return INVALID
        if len(v) == 1:  # most calls take and give one tensor
            y = item(v[0])
            if y is INVALID:
                return INVALID
            t = ones.get(id(y))
            if t is None:
                t = ones[id(y)] = (y,)
            return t
        out = []
        for y in v:
            y = item(y)
            if y is INVALID:
                return INVALID
            out.append(y)
        t = tuple(out)
        return shared.setdefault(tuple(map(id, t)), t)

    return read_records


def _is_shape(hint: Any) -> bool:
    return typing.get_origin(hint) is tuple and typing.get_args(hint)[:1] == (int,)


def _plain_init(cls: type) -> bool:
    """Whether ``cls``'s ``__init__`` only sets its fields, in order, in the instance dict."""
    params = cls.__dataclass_params__  # type: ignore[attr-defined]  # every dataclass has it
    return (
        "__slots__" not in cls.__dict__
        and not hasattr(cls, "__post_init__")
        and params.init
        and all(f.init for f in dataclasses.fields(cls))
    )


def _hashable(hint: Any) -> bool:
    """Whether equal values of ``hint`` can be shared once built (hashable, no floats)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType, tuple):
        return all(_hashable(a) for a in args if a is not Ellipsis)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        hints = _hints(hint)
        return all(_hashable(hints[f.name]) for f in dataclasses.fields(hint))
    return hint in _SHAREABLE


def _fast(hint: Any, non_neg: bool) -> _Check:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        ok = _fast(inner[0], non_neg) if len(inner) == 1 else _fast(Any, non_neg)
        if type(None) not in args:
            return ok
        return lambda v: v is None or ok(v)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        read = Readers().record(hint)
        return lambda v: read(v) is not INVALID
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
        return all(
            _any_ok(v, non_neg or _non_negative(str(k)), depth + 1) for k, v in value.items()
        )
    if t is list:
        return all(_any_ok(v, non_neg, depth + 1) for v in value)
    return True
