"""Why compile does not pay: Dynamo's graph breaks, each with its module and source line.

``torch._dynamo.explain`` traces the forward once (no Inductor) and returns every
graph break with Dynamo's reason and the user stack where it happened. Each stack
frame is matched to the model's module whose class source holds that line, so a
break reads "print() in module 'blocks.0.attn' (Attention) at model.py:42".

``explain`` resets Dynamo's caches, so :func:`graph_breaks` runs after the timed
steps of every recipe.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from dataclasses import dataclass, replace
from typing import Any

import torch

from labkit._tensors import model_device


@dataclass(frozen=True)
class GraphBreak:
    """One place where Dynamo split the graph.

    Args:
        reason: Dynamo's reason, first sentence (and its explanation, when given).
        module: Path of the module whose code broke the graph (``""``: the model).
        module_type: That module's class name.
        source: ``file:line: code`` of the statement.
        count: How many times the same break was reported.
        modules: Every module path of that class: the code that broke is theirs too
            (Dynamo's stack names the code, not the instance), ``module`` first.
    """

    reason: str
    module: str | None
    module_type: str
    source: str
    count: int = 1
    modules: tuple[str, ...] = ()

    def describe(self) -> str:
        """One line: reason, module and source."""
        where = ""
        if self.module:
            more = len(self.modules) - 1
            also = f", and {more} more of that class" if more > 0 else ""
            where = f" in module '{self.module}' ({self.module_type}{also})"
        elif self.module == "":
            where = f" in the model's forward ({self.module_type})"
        times = f" (x{self.count})" if self.count > 1 else ""
        return f"{self.reason}{where}{' at ' + self.source if self.source else ''}{times}"


def graph_breaks(
    model: torch.nn.Module,
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    autocast: torch.dtype | None = None,
    grad: bool = True,
) -> tuple[int, list[GraphBreak]]:
    """(graphs, breaks) of ``fn`` (``model``'s forward) traced by Dynamo on these inputs."""
    import torch._dynamo as dynamo

    device = model_device(model).type
    with contextlib.ExitStack() as stack:
        if autocast is not None:
            stack.enter_context(torch.autocast(device, dtype=autocast))
        if not grad:
            stack.enter_context(torch.no_grad())
        stack.enter_context(warnings.catch_warnings())
        # Dynamo probes .grad of non-leaf intermediates while it builds guards (torch's own)
        warnings.filterwarnings("ignore", message=r".*not a leaf Tensor is being accessed")
        out = dynamo.explain(fn)(*args, **kwargs)
    places = _code_places(model)
    merged: dict[tuple[str, str], GraphBreak] = {}
    for r in out.break_reasons:
        paths, mtype, source = _where(r.user_stack, places)
        key = (source, _reason(r.reason))
        if key in merged:
            merged[key] = replace(merged[key], count=merged[key].count + 1)
            continue
        merged[key] = GraphBreak(key[1], paths[0] if paths else None, mtype, source, 1, paths)
    return int(out.graph_count), list(merged.values())


def _reason(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    if not lines:
        return "graph break"
    if lines[0].startswith("generic_jump"):
        return "a Python branch on a tensor's value (data-dependent control flow)"
    tag = "Explanation:"
    explanation = next((ln[len(tag) :].strip() for ln in lines if ln.startswith(tag)), "")
    first = lines[0].rstrip(".")
    return f"{first}: {explanation}" if explanation else first


_Place = tuple[str, int, int, tuple[str, ...], str]


def _code_places(model: torch.nn.Module) -> list[_Place]:
    """(file, first line, last line, module paths, class name) per module class, paths in
    ``named_modules`` order."""
    paths: dict[type, list[str]] = {}
    for path, m in model.named_modules():
        paths.setdefault(type(m), []).append(path)
    places = []
    for cls, found in paths.items():
        try:
            lines, start = inspect.getsourcelines(cls)
            file = inspect.getsourcefile(cls) or ""
        except (OSError, TypeError):
            continue
        places.append((file, start, start + len(lines) - 1, tuple(found), cls.__name__))
    return places


def _where(stack: Any, places: list[_Place]) -> tuple[tuple[str, ...], str, str]:
    """(module paths, class name, ``file:line: code``) of the innermost model frame."""
    for frame in reversed(list(stack or [])):
        for file, lo, hi, paths, name in places:
            if frame.filename == file and lo <= frame.lineno <= hi:
                code = (frame.line or "").strip()
                return paths, name, f"{frame.filename}:{frame.lineno}: {code}"
    if stack:
        frame = list(stack)[-1]
        return (), "", f"{frame.filename}:{frame.lineno}: {(frame.line or '').strip()}"
    return (), "", ""
