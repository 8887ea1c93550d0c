"""Trace files: versioned JSON, written atomically, read back equal."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from labkit.trace.errors import TraceFileError
from labkit.trace.model import (
    SCHEMA_VERSION,
    Edge,
    MemoryMeta,
    MemorySample,
    ModuleInfo,
    Node,
    TensorMeta,
    Trace,
    TraceMeta,
)

SCHEMA = "labkit.trace"


def trace_to_dict(trace: Trace) -> dict[str, Any]:
    """A JSON-ready dict with ``schema`` and ``version`` first."""
    body = {f.name: _plain(getattr(trace, f.name)) for f in dataclasses.fields(trace)}
    body.pop("version")
    return {"schema": SCHEMA, "version": trace.version, **body}


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def save(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write ``trace`` to ``path`` (temporary file in the same folder, then rename)."""
    path = Path(path)
    data = json.dumps(trace_to_dict(trace), separators=(",", ":"), allow_nan=False)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: str | os.PathLike[str]) -> Trace:
    """Read a trace file; errors name the file and what is wrong with it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceFileError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TraceFileError(f"{path}: cannot read it ({e})") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise TraceFileError(
            f"{path}: not valid JSON (line {e.lineno}, column {e.colno}: {e.msg}); "
            "the file is corrupt or not a labkit trace"
        ) from e
    return trace_from_dict(data, source=str(path))


def trace_from_dict(data: Any, *, source: str = "<dict>") -> Trace:
    """Rebuild a Trace from :func:`trace_to_dict` output, validating as it goes."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise TraceFileError(f"{source}: not a labkit trace (no 'schema': '{SCHEMA}' field)")
    version = data.get("version")
    if version != SCHEMA_VERSION:
        raise TraceFileError(
            f"{source}: trace schema version {version!r} is not supported; this labkit "
            f"reads version {SCHEMA_VERSION} (upgrade labkit or re-record the trace)"
        )
    try:
        meta = data["meta"]
        return Trace(
            meta=TraceMeta(**{**meta, "notes": tuple(meta.get("notes", ()))}),
            modules=tuple(ModuleInfo(**m) for m in data["modules"]),
            nodes=tuple(_node(n) for n in data["nodes"]),
            edges=tuple(
                Edge(e["src"], e["dst"], tuple(e["shape"]), e["dtype"]) for e in data["edges"]
            ),
            memory=tuple(MemorySample(**s) for s in data.get("memory", [])),
            version=version,
            memory_meta=_memory_meta(data.get("memory_meta")),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as e:
        raise TraceFileError(f"{source}: malformed trace data ({type(e).__name__}: {e})") from e


def _tensor(t: dict[str, Any]) -> TensorMeta:
    return TensorMeta(tuple(t["shape"]), t["dtype"], t["device"], t.get("name", ""))


def _node(n: dict[str, Any]) -> Node:
    return Node(
        **{
            **n,
            "inputs": tuple(_tensor(t) for t in n["inputs"]),
            "outputs": tuple(_tensor(t) for t in n["outputs"]),
        }
    )


def _memory_meta(m: dict[str, Any] | None) -> MemoryMeta | None:
    if m is None:
        return None
    return MemoryMeta(**{**m, "notes": tuple(m.get("notes", ()))})
