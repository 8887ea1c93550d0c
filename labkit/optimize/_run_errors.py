"""A failed recipe in one line: the exception's own message and the module it came from.

A recipe that fails under ``torch.compile`` raises a wrapper (``BackendCompilerFailed:
backend='inductor' raised:``, ``TorchRuntimeError: Dynamo failed to run FX node``) whose
first line says nothing; the cause is the wrapped exception, and the user code is in
Dynamo's "Original traceback" (or its ``real_stack``), not on the Python stack. This
module unwraps such exceptions, keeps the innermost one's message (its first meaningful
line), and names the model's module whose class source holds the failing line, as graph
breaks are named (:mod:`labkit.optimize._breaks`).
"""

from __future__ import annotations

import re
import traceback
from typing import Any

import torch

from labkit.optimize._breaks import _code_places, _where

# lines of a wrapper's message that are boilerplate, not the cause
_NOISE = (
    "While executing",
    "Original traceback",
    "Use tlparse",
    "Set TORCHDYNAMO_VERBOSE",
    "Set TORCH_LOGS",
    "from user code",
    "For more information",
    "You can suppress this exception",
)
_GOT = re.compile(r"""got (\w+(?:Error|Exception))\(["'](.+?)["']\)""")
_NAMED = re.compile(r"\w+(?:Error|Exception): ")
# wrappers whose cause is the real error
_WRAPPERS = ("InternalTorchDynamoError", "TorchRuntimeError", "BackendCompilerFailed")
_WRAPPER_HEAD = re.compile(r"^(backend='[^']*' raised:|Dynamo failed to run FX node.*)$")


def describe(exc: BaseException, model: torch.nn.Module | None) -> str:
    """``"Type: message (in module 'path' (Class) at file:line: code)"``, then the full text.

    Args:
        exc: What the recipe raised.
        model: The recipe's model (its module paths name the place), or None.

    Returns:
        The first line is the summary; the lines after it are the original message.
    """
    if type(exc).__module__.startswith("labkit."):
        return f"{type(exc).__name__}: {exc}"  # labkit's own errors name the place already
    inner = _innermost(exc)
    text = str(inner)
    got = _GOT.search(text)  # Dynamo ran an op on fake tensors and it raised: that error
    if got:
        head = f"{got.group(1)}: {got.group(2)[:300]}"
    else:
        line = _meaningful(text)
        named = _NAMED.match(line)  # a wrapper whose message starts with the real error
        if named and type(inner).__name__ in _WRAPPERS:
            head = line
        else:
            head = f"{type(inner).__name__}: {line}".rstrip(": ")
    where = _place(exc, inner, model) if model is not None else ""
    full = f"{type(exc).__name__}: {exc}"
    if full.splitlines()[0] == head + where:
        return full  # the message says it already: keep it as it is
    return f"{head}{where}\n{full}"


def _innermost(exc: BaseException) -> BaseException:
    seen: set[int] = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "inner_exception", None)
        if isinstance(inner, BaseException):
            exc = inner
            continue
        cause = exc.__cause__
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
        wrapper = type(exc).__name__ in _WRAPPERS
        if cause is not None and (wrapper or not first or _WRAPPER_HEAD.match(first)):
            exc = cause
            continue
        break
    return exc


def _meaningful(text: str) -> str:
    """The first line of ``text`` that says something (not a wrapper's head or a hint)."""
    for ln in text.splitlines():
        s = ln.strip()
        if not s or _WRAPPER_HEAD.match(s) or s.startswith(_NOISE):
            continue
        return s[:300]
    return ""


def _place(exc: BaseException, inner: BaseException, model: torch.nn.Module) -> str:
    frames, traced = _frames(exc, inner)
    paths, mtype, source = _where(frames, _code_places(model))
    if paths:
        more = len(paths) - 1
        also = f", and {more} more of that class" if more > 0 else ""
        name = paths[0] or "(model)"
        return f" (in module '{name}' ({mtype}{also}) at {source})"
    # a compiled frame's place is only in Dynamo's record: say it; a Python traceback
    # outside the model (the loss function, labkit) is in the full text below
    return f" (at {source})" if source and traced else ""


def _frames(exc: BaseException, inner: BaseException) -> tuple[list[Any], bool]:
    """Stack frames of the user code that failed, outermost first, and whether they come
    from Dynamo's record of the traced code (not the Python stack)."""
    for e in (inner, exc):
        stack = getattr(e, "real_stack", None)
        if stack:
            return list(stack), True
    for e in (inner, exc):
        found = _original_traceback(str(e))
        if found:
            return found, True
    out: list[Any] = []
    seen: BaseException | None = inner
    while seen is not None and not out:
        out = list(traceback.extract_tb(seen.__traceback__))
        seen = seen.__cause__
    return out or list(traceback.extract_tb(exc.__traceback__)), False


def _original_traceback(text: str) -> list[Any]:
    """Frames listed under Dynamo's "Original traceback:" in a message."""
    if "Original traceback:" not in text:
        return []
    part = text.split("Original traceback:", 1)[1].splitlines()
    out = []
    for i, ln in enumerate(part):
        m = re.match(r'\s*File "(.+)", line (\d+), in (\S+)', ln)
        if m:
            code = part[i + 1].strip() if i + 1 < len(part) else ""
            out.append(traceback.FrameSummary(m.group(1), int(m.group(2)), m.group(3), line=code))
    return out
