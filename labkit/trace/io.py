"""Trace files: versioned JSON, written atomically, read back equal."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

from labkit._paths import InputFileError, atomic_writer, read_input
from labkit.trace import _validate
from labkit.trace.errors import TraceFileError
from labkit.trace.model import SCHEMA_VERSION, Trace

SCHEMA = "labkit.trace"


def trace_to_dict(trace: Trace) -> dict[str, Any]:
    """A JSON-ready dict with ``schema`` and ``version`` first."""
    body = {f.name: _plain(getattr(trace, f.name)) for f in dataclasses.fields(trace)}
    body.pop("version")
    return {"schema": SCHEMA, "version": trace.version, **body}


def _plain(obj: object) -> object:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def save(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write ``trace`` to ``path`` (temporary file in the same folder, then rename).

    The file gets the mode a plain ``open()`` would (the umask applies). Errors name
    ``path``: a missing or read-only folder, a full disk, or a NaN/Inf figure (named).
    """
    path = Path(path)
    body = trace_to_dict(trace)
    try:
        data = json.dumps(body, separators=(",", ":"), allow_nan=False)
    except ValueError as e:
        where = _validate.first_non_finite(body) or str(e)
        raise TraceFileError(
            f"cannot save the trace to {path}: {where} is not a finite number (JSON has no "
            "NaN or Inf); the trace holds a broken figure"
        ) from e
    with atomic_writer(path, "w", what="trace file", needed=len(data), fsync=False) as f:
        f.write(data)


def load(path: str | os.PathLike[str], *, max_bytes: int = _validate.MAX_FILE_BYTES) -> Trace:
    """Read a trace file; errors name the file and what is wrong with it.

    Args:
        path: The file written by :func:`save`.
        max_bytes: Largest file read (default 256 MiB); larger files are refused unread.

    Raises:
        TraceFileError: naming the file and, for bad data, the field and its value.
    """
    path = Path(path)
    try:
        if not path.exists() and not path.is_symlink():
            raise TraceFileError(f"{path}: no such trace file")
        with contextlib.suppress(OSError):  # the size message names how to raise the limit
            if path.is_file():
                _validate.check_size(path.stat().st_size, str(path), max_bytes)
        raw = read_input(path, what="trace file", max_bytes=max_bytes)
        text = raw.decode("utf-8")
    except InputFileError as e:  # a FIFO, device or folder: refused unopened, never a hang
        raise TraceFileError(str(e)) from e
    except UnicodeDecodeError as e:
        raise TraceFileError(f"{path}: cannot read it ({e})") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceFileError(
            f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
            "the file is corrupt or not a labkit trace"
        ) from e
    except RecursionError:
        raise _validate.too_deep(str(path)) from None
    return trace_from_dict(data, source=str(path))


def trace_from_dict(data: object, *, source: str = "<dict>") -> Trace:
    """Rebuild a Trace from :func:`trace_to_dict` output, validating as it goes."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise TraceFileError(f"{source}: not a labkit trace (no 'schema': '{SCHEMA}' field)")
    version = data.get("version")
    if type(version) is not int or version != SCHEMA_VERSION:  # True == 1, but is no version
        raise TraceFileError(
            f"{source}: trace schema version {version!r} is not supported; this labkit "
            f"reads version {SCHEMA_VERSION} (upgrade labkit or re-record the trace)"
        )
    _validate.validate(data, source)
    build = _builder(Trace)
    assert build is not None  # a dataclass always gets a builder
    try:
        return build({**data, "version": version})
    except (KeyError, TypeError, ValueError) as e:  # validate() should have said it already
        raise TraceFileError(f"{source}: malformed trace data ({type(e).__name__}: {e})") from e


_BUILDERS: dict[Any, Callable[[Any], Any] | None] = {}


def _builder(hint: object) -> Callable[[Any], Any] | None:
    """How to turn JSON data into ``hint``: lists to tuples, objects to dataclasses.

    Keys a dataclass does not have (written by a newer labkit) are dropped. ``None`` means
    the data is used as it is. Compiled once per type.
    """
    if hint in _BUILDERS:
        return _BUILDERS[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    build: Callable[[Any], Any] | None = None
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        item = _builder(inner[0]) if len(inner) == 1 else None
        if item is not None:
            build = lambda v: None if v is None else item(v)  # noqa: E731
    elif dataclasses.is_dataclass(hint) and isinstance(hint, type):
        types_ = _validate._hints(hint)
        specs = [(f.name, _builder(types_[f.name])) for f in dataclasses.fields(hint)]

        def build(v: dict[str, Any], cls: type = hint) -> object:
            return cls(**{n: (v[n] if b is None else b(v[n])) for n, b in specs if n in v})

    elif origin is tuple:
        item = _builder(args[0]) if args else None
        build = tuple if item is None else (lambda v: tuple(map(item, v)))
    _BUILDERS[hint] = build
    return build
