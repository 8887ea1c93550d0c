"""Trace files: versioned JSON, written atomically, read back equal.

Big files (a 370,000-node trace is ~240 MiB) load in time linear in their size, with a peak
of about 2.5x the file (its text and the Trace built from it): the node, edge, module and
memory lists are parsed one record at a time, each checked and built at once by a function
compiled from the record's dataclass (:class:`labkit.trace._validate.Readers`), so the
parsed JSON of the whole file (~5x the file) never exists; equal strings, shapes and tensor
metas are built once and shared; the cyclic garbage collector is held off meanwhile (each
collection mid-build walks every object made so far: it doubled the parse time). Saving
encodes the lists a batch of records at a time. ``benchmarks/trace_io.py`` measures both."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import operator
import os
import re
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from labkit._gc import no_gc
from labkit._paths import InputFileError, atomic_writer, open_input
from labkit.trace import _validate
from labkit.trace._validate import INVALID, LIST_SECTIONS, REQUIRED_META
from labkit.trace.errors import TraceFileError
from labkit.trace.model import SCHEMA_VERSION, MemoryMeta, Trace, TraceMeta

SCHEMA = "labkit.trace"


# ------------------------------------------------------------------ writing
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
    try:
        with no_gc():  # many small dicts made and dropped: no collection walks them all
            chunks = list(_chunks(trace))
    except ValueError as e:
        where = _validate.first_non_finite(trace_to_dict(trace)) or str(e)
        raise TraceFileError(
            f"cannot save the trace to {path}: {where} is not a finite number (JSON has no "
            "NaN or Inf); the trace holds a broken figure"
        ) from e
    needed = sum(map(len, chunks))  # the text is ASCII: one byte a character
    with atomic_writer(path, "w", what="trace file", needed=needed, fsync=False) as f:
        f.writelines(chunks)


_ENCODE = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_BATCH = 2000  # records encoded and joined at a time


def _chunks(trace: Trace) -> Iterator[str]:
    """The text of :func:`trace_to_dict` ``(trace)`` as ``json.dumps`` writes it, in pieces:
    each list of records a batch of records at a time (memory: the text, not a dict of it)."""
    yield f'{{"schema":{_ENCODE(SCHEMA)},"version":{_ENCODE(trace.version)}'
    for f in dataclasses.fields(trace):
        if f.name == "version":
            continue
        value = getattr(trace, f.name)
        if f.name not in LIST_SECTIONS or not isinstance(value, tuple):
            yield f",{_ENCODE(f.name)}:{_ENCODE(_plain(value))}"
            continue
        yield f",{_ENCODE(f.name)}:["
        plain = _plainer(LIST_SECTIONS[f.name], {})
        for start in range(0, len(value), _BATCH):
            batch = _ENCODE([plain(x) for x in value[start : start + _BATCH]])[1:-1]  # no []
            yield batch if start == 0 else "," + batch
        yield "]"
    yield "}"


def _plainer(cls: type, seen: dict[int, object]) -> Callable[[Any], dict[str, Any]]:
    """``_plain`` for records of ``cls``, compiled: scalar fields copied as they are, nested
    records converted once per object (a trace's nodes share their tensor metas)."""
    hints = _validate._hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    get = operator.attrgetter(*names)
    fixes: list[tuple[str, Callable[[Any], object]]] = []
    for name in names:
        hint = hints[name]
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is tuple and args and _is_record(args[0]):
            item = _plainer(args[0], seen)

            def records(v: Any, item: Callable[[Any], object] = item) -> object:
                out = []
                for x in v:
                    p = seen.get(id(x))
                    if p is None:
                        p = seen[id(x)] = item(x)
                    out.append(p)
                return out

            fixes.append((name, records))
        elif origin is tuple and args and args[0] in (int, float, str):
            fixes.append((name, list))
        elif not (hint in (int, float, str, bool) or _optional_scalar(hint)):
            fixes.append((name, _plain))

    def plain(obj: Any) -> dict[str, Any]:
        d = dict(zip(names, get(obj), strict=True))
        for name, fix in fixes:
            d[name] = fix(d[name])
        return d

    return plain


def _is_record(hint: object) -> bool:
    return dataclasses.is_dataclass(hint) and isinstance(hint, type)


def _optional_scalar(hint: object) -> bool:
    if typing.get_origin(hint) not in (typing.Union, types.UnionType):
        return False
    return all(a in (int, float, str, bool, type(None)) for a in typing.get_args(hint))


# ------------------------------------------------------------------ reading
def load(path: str | os.PathLike[str], *, max_bytes: int = _validate.MAX_FILE_BYTES) -> Trace:
    """Read a trace file; errors name the file and what is wrong with it.

    Time grows linearly with the file's size; memory peaks at about 2.5x the file (its
    text, and the Trace built: ~1.3x), for a file labkit wrote (ASCII; a file with other
    characters takes 2 or 4 bytes a character while read).

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
        raw = _read_bytes(path, max_bytes)
        text = raw.decode("utf-8")
        del raw  # the text alone from here (labkit writes ASCII: one byte a character)
    except InputFileError as e:  # a FIFO, device or folder: refused unopened, never a hang
        raise TraceFileError(str(e)) from e
    except UnicodeDecodeError as e:
        raise TraceFileError(f"{path}: cannot read it ({e})") from e
    try:
        with no_gc():
            return _read_text(text, str(path))
    except json.JSONDecodeError as e:
        raise TraceFileError(
            f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
            "the file is corrupt or not a labkit trace"
        ) from e
    except RecursionError:
        raise _validate.too_deep(str(path)) from None


def _read_bytes(path: Path, max_bytes: int) -> bytes:
    """The file's bytes, checked as :func:`labkit._paths.read_input` checks them, in a buffer
    of the file's size (``read_input`` asks for ``max_bytes``: 256 MiB of address space
    for any file; this one grows past the size only when the file grows while read)."""
    with open_input(path, what="trace file", max_bytes=max_bytes) as fh:
        try:
            chunks = [fh.read(os.fstat(fh.fileno()).st_size + 1)]
            total = len(chunks[0])
            while total <= max_bytes and chunks[-1]:  # it grew since: read on, in pieces
                chunks.append(fh.read(min(1 << 20, max_bytes + 1 - total)))
                total += len(chunks[-1])
        except OSError as e:
            raise TraceFileError(f"cannot read the trace file {path}: {e.strerror or e}") from e
    if total > max_bytes:
        _validate.check_size(total, f"{path} (it grew while it was read)", max_bytes)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def trace_from_dict(data: object, *, source: str = "<dict>") -> Trace:
    """Rebuild a Trace from :func:`trace_to_dict` output, validating as it goes."""
    if not isinstance(data, dict):
        raise TraceFileError(f"{source}: not a labkit trace (no 'schema': '{SCHEMA}' field)")
    _check_header(data, source)
    reader = _Reader(source)
    for key, value in data.items():
        reader.field(key, value)
    return reader.finish()


def _check_header(data: dict[str, Any], source: str) -> None:
    if data.get("schema") != SCHEMA:
        raise TraceFileError(f"{source}: not a labkit trace (no 'schema': '{SCHEMA}' field)")
    version = data.get("version")
    if type(version) is not int or version != SCHEMA_VERSION:  # True == 1, but is no version
        raise TraceFileError(
            f"{source}: trace schema version {version!r} is not supported; this labkit "
            f"reads version {SCHEMA_VERSION} (upgrade labkit or re-record the trace)"
        )


class _Reader:
    """A Trace put together section by section; lists of records checked and built one
    record at a time, whether they come from parsed JSON or straight from the text."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.data: dict[str, Any] = {}
        self.built: set[str] = set()
        self.readers = _validate.Readers()
        self.stream: bool | None = None

    def streams(self) -> bool:
        """Whether the record lists are read record by record: decided at the first one,
        yes when ``schema`` and ``version`` came before it (and are right)."""
        if self.stream is None:
            self.stream = "schema" in self.data and "version" in self.data
            if self.stream:
                _check_header(self.data, self.source)
        return self.stream

    def field(self, name: str, value: object) -> None:
        self.data[name] = value
        self.built.discard(name)

    def section(self, name: str, items: Iterable[object]) -> None:
        """Check and build the records of list section ``name`` (``nodes``, ...)."""
        cls = LIST_SECTIONS[name]
        read = self.readers.record(cls)
        out: list[object] = []
        append = out.append
        for i, item in enumerate(items):
            obj = read(item)
            if obj is INVALID:
                obj = self._explained(item, cls, f"{name}[{i}]")
            append(obj)
        self.data[name] = tuple(out)
        self.built.add(name)

    def record(self, value: object, cls: type, where: str, required: tuple[str, ...] = ()) -> Any:
        obj = self.readers.record(cls, required=required)(value)
        return self._explained(value, cls, where, required) if obj is INVALID else obj

    def _explained(
        self, value: object, cls: type, where: str, required: tuple[str, ...] = ()
    ) -> object:
        _validate.explain(value, cls, where, self.source, required)  # raises, naming the field
        raise TraceFileError(f"{self.source}: field {where} is malformed")  # not reached

    def finish(self) -> Trace:
        data, source = self.data, self.source
        _check_header(data, source)
        _validate.check_present(data, source)
        meta = self.record(data["meta"], TraceMeta, "meta", REQUIRED_META)
        for name in LIST_SECTIONS:
            if name in data and name not in self.built:
                if type(data[name]) is not list:
                    raise _validate.not_a_list(name, data[name], source)
                self.section(name, data[name])
        memory_meta = data.get("memory_meta")
        if memory_meta is not None:
            memory_meta = self.record(memory_meta, MemoryMeta, "memory_meta")
        _validate.explain_unknown(data, source)
        _validate.check_graph(data["nodes"], data["edges"], source)
        return Trace(
            meta=meta,
            modules=data["modules"],
            nodes=data["nodes"],
            edges=data["edges"],
            memory=data.get("memory", ()),
            version=data["version"],
            memory_meta=memory_meta,
        )


# ------------------------------------------------------------------ the text, streamed
_DECODER = json.JSONDecoder()
_DECODE = _DECODER.raw_decode
# the scanner raw_decode calls (json's C one), without raw_decode's Python frame per record
_SCAN: Callable[[str, int], tuple[object, int]] = _DECODER.scan_once  # type: ignore[attr-defined]  # set by JSONDecoder.__init__, not in the stubs
_SPACE = re.compile(r"[ \t\n\r]*")
_SPACES = " \t\n\r"


def _read_text(text: str, source: str) -> Trace:
    """Parse a trace file's text: the top-level object key by key, the record lists record
    by record (checked and built as they come), when ``schema`` and ``version`` come first
    (as :func:`save` writes them); other JSON is parsed whole and read as before."""
    pos = _SPACE.match(text).end()  # type: ignore[union-attr]  # matches the empty string
    if not text.startswith("{", pos):
        return trace_from_dict(json.loads(text), source=source)
    reader = _Reader(source)
    try:
        _walk(text, pos, reader)
    except TraceFileError:  # a record refused before the end: is the JSON itself whole?
        _walk(text, pos, None)  # raises JSONDecodeError where it is broken, as json would
        raise
    return reader.finish() if reader.stream else trace_from_dict(reader.data, source=source)


def _walk(text: str, pos: int, reader: _Reader | None) -> None:
    """Parse the object at ``pos`` into ``reader`` (None: only check that it is JSON)."""
    pos = _skip(text, pos + 1)
    if text.startswith("}", pos):
        pos = _skip(text, pos + 1)
    else:
        while True:
            if not text.startswith('"', pos):
                raise json.JSONDecodeError(
                    "Expecting property name enclosed in double quotes", text, pos
                )
            key, pos = _DECODE(text, pos)
            pos = _skip(text, pos)
            if not text.startswith(":", pos):
                raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
            pos = _skip(text, pos + 1)
            if (
                key in LIST_SECTIONS
                and text.startswith("[", pos)
                and (reader is None or reader.streams())
            ):
                end: list[int] = []
                items = _items(text, pos, end)
                if reader is None:
                    collections.deque(items, maxlen=0)  # parsed one by one and dropped
                else:
                    reader.section(key, items)
                pos = end[0]
            else:
                value, pos = _DECODE(text, pos)
                if reader is not None:
                    reader.field(key, value)
            pos = _skip(text, pos)
            c = text[pos : pos + 1]
            if c == "}":
                pos = _skip(text, pos + 1)
                break
            if c != ",":
                raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
            pos = _skip(text, pos + 1)
    if pos != len(text):
        raise json.JSONDecodeError("Extra data", text, pos)


def _skip(text: str, pos: int) -> int:
    if text[pos : pos + 1] in _SPACES and pos < len(text):
        return _SPACE.match(text, pos).end()  # type: ignore[union-attr]  # matches ""
    return pos


def _items(text: str, pos: int, end: list[int]) -> Iterator[object]:
    """The values of the JSON array at ``pos``, one at a time; its end goes into ``end``."""
    pos = _skip(text, pos + 1)
    if text.startswith("]", pos):
        end.append(pos + 1)
        return
    scan, skip = _SCAN, _skip
    while True:
        try:
            item, pos = scan(text, pos)
        except StopIteration as e:  # what json's raw_decode says, without its frame a record
            raise json.JSONDecodeError("Expecting value", text, e.value) from None
        yield item
        c = text[pos : pos + 1]
        if c in _SPACES and c:
            pos = skip(text, pos)
            c = text[pos : pos + 1]
        if c == ",":
            pos = skip(text, pos + 1)
        elif c == "]":
            end.append(pos + 1)
            return
        else:
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
