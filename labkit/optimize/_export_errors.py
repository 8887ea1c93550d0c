"""Turn an exporter's exception into one sentence: what stopped it and where.

``torch.export`` runs the model's Python code on fake tensors, so its exception
travels through the model's own ``forward`` frames: the deepest frame whose
``self`` is one of the model's modules names the module and the source line.
ONNX conversion fails later, on a node of the exported graph: the message names
the node, and the node's ``nn_module_stack`` names the module.
"""

from __future__ import annotations

import linecache
import re
from typing import Any

import torch


class ExportError(RuntimeError):
    """An export recipe could not export the model; the message says what and where.

    Args:
        target: ``"torch.export"`` or ``"onnxruntime"``.
        construct: What stopped the exporter, in words (an op, data-dependent control flow).
        module: Path of the module where it happened (``""``: the model itself).
        module_type: That module's class name.
        source: ``file:line: code`` of the statement, when known.
    """

    def __init__(
        self,
        target: str,
        construct: str,
        module: str | None,
        module_type: str,
        source: str,
        issues: tuple[str, ...] = (),
    ) -> None:
        self.target, self.construct, self.module = target, construct, module
        self.module_type, self.source, self.issues = module_type, source, issues
        where = ""
        if module is not None:
            where = f" in module '{module or '(model)'}' ({module_type})"
        at = f" at {source}" if source else ""
        more = ""
        if len(issues) > 1:
            more = f"; torch.export's draft export found {len(issues)} issues: " + "; ".join(
                issues[:5]
            )
        super().__init__(f"{target} could not export the model: {construct}{where}{at}{more}")


_DATA_DEPENDENT = (
    "data-dependent control flow: a Python `if`, `int()`, `.item()` or `bool()` on a "
    "tensor's value (torch.export traces shapes, not values; use torch.cond or torch.where)"
)


def explain(exc: BaseException, model: torch.nn.Module, target: str, program: Any = None) -> str:
    """The plain message of an :class:`ExportError` for ``exc`` (``program``: the exported
    program, when ONNX conversion failed after torch.export succeeded)."""
    return str(export_error(exc, model, target, program))


def export_error(
    exc: BaseException, model: torch.nn.Module, target: str, program: Any = None
) -> ExportError:
    """An :class:`ExportError` naming the construct, module and source line behind ``exc``."""
    paths = {id(m): p for p, m in model.named_modules()}
    text = str(exc)
    op = _failed_op(text)
    if program is not None and op is not None:
        module, mtype, source = _node_place(program, text)
        return ExportError(target, f"no ONNX conversion for operator {op}", module, mtype, source)
    module, mtype, source = _frame_place(exc, paths)
    return ExportError(target, _construct(exc, text, op), module, mtype, source)


_FOUND = re.compile(r"Found <class '([\w.]+)'> in output")


def opaque_outputs(
    exc: BaseException, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> ExportError | None:
    """An :class:`ExportError` naming the non-tensor object in the output and the fix, when
    ``exc`` is torch.export's "Found <class ...> in output" (None otherwise).

    A Hugging Face causal LM returns its KV cache (``transformers.cache_utils.DynamicCache``)
    in the output; torch.export cannot flatten it. The output is computed once more
    (eagerly, without gradients) to name where the object sits (``out['past_key_values']``).
    """
    found = _FOUND.search(str(exc))
    if found is None:
        return None
    cls = found.group(1)
    where = ""
    try:
        with torch.no_grad():
            out = module(*args, **kwargs)
        where = next(
            (
                f" at out{name}"
                for name, v in _leaves(out, "")
                if type(v).__name__ == cls.rsplit(".", 1)[-1]
            ),
            "",
        )
    except Exception:  # the model ran in export already; naming the place is a bonus
        where = ""
    hf = cls.startswith("transformers.")
    fix = (
        "pass use_cache=False to its calls: Recipe(export=..., export_kwargs={'use_cache': "
        "False}) does it, or export a wrapper module whose forward returns the logits only"
        if hf or "Cache" in cls
        else "export a wrapper module whose forward returns tensors only (or register the "
        "class as a pytree node: torch.utils._pytree.register_pytree_node)"
    )
    return ExportError(
        "torch.export",
        f"the output holds a {cls}{where}, not a tensor; {fix}",
        None,
        "",
        "",
    )


def _leaves(obj: Any, prefix: str, depth: int = 0) -> Any:
    """(path, value) of every non-container value in a model output."""
    if depth > 6:
        return
    items: Any = None
    if isinstance(obj, dict):  # a Hugging Face ModelOutput is an OrderedDict
        items = ((f"[{k!r}]", v) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        items = ((f"[{i}]", v) for i, v in enumerate(obj))
    if items is None:
        yield prefix, obj
        return
    for name, v in items:
        yield from _leaves(v, prefix + name, depth + 1)


_KINDS = {
    "DATA_DEPENDENT_ERROR": "data-dependent value",
    "CONSTRAINT_VIOLATION_ERROR": "shape constraint violated",
    "MISMATCHED_FAKE_KERNEL": "fake kernel does not match the real one",
}


def draft_issues(
    module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str, ...]:
    """Every problem ``torch.export.draft_export`` finds, one phrase each (empty if it fails)."""
    import contextlib
    import gc
    import io
    import warnings

    with warnings.catch_warnings():
        # draft_export's trace-capturing log handler leaves its file for the garbage
        # collector (torch's own ResourceWarning): collect it here, with the warning muted
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                program = torch.export.draft_export(module, args, kwargs or None)
            failures = list(program._report.failures)  # type: ignore[attr-defined]  # draft_export's report: private, untyped
            del program
        except Exception:
            failures = []
        gc.collect()
    out = []
    for f in failures:
        kind = _KINDS.get(f.failure_type.name, f.failure_type.name.lower().replace("_", " "))
        data = f.data if isinstance(f.data, dict) else {}
        stack = data.get("user_stack") or []
        frame = stack[-1] if stack else {}
        where = f" at line {frame['line']}: {frame['loc']}" if frame.get("loc") else ""
        out.append(f"{kind}{where}")
    return tuple(out)


def _construct(exc: BaseException, text: str, op: str | None) -> str:
    name = type(exc).__name__
    if name == "GuardOnDataDependentSymNode" or "data-dependent" in text.lower():
        return _DATA_DEPENDENT
    if op is not None:
        return f"unsupported operator {op}"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), name)
    return f"{name}: {first[:200]}"


def _failed_op(text: str) -> str | None:
    m = re.search(r"OpOverload\(op='([\w.:]+)', overload='(\w+)'\)", text)
    if m:
        return f"{m.group(1)}.{m.group(2)}"
    m = re.search(r"target=torch\.ops\.([\w.]+)", text)
    return m.group(1) if m else None


def _frame_place(exc: BaseException, paths: dict[int, str]) -> tuple[str | None, str, str]:
    best: tuple[str | None, str, str] = (None, "", "")
    seen: BaseException | None = exc
    for _ in range(3):  # the exception, then what caused it
        if seen is None:
            break
        tb = seen.__traceback__
        while tb is not None:
            frame = tb.tb_frame
            owner = frame.f_locals.get("self")
            if isinstance(owner, torch.nn.Module) and id(owner) in paths:
                code = linecache.getline(frame.f_code.co_filename, tb.tb_lineno).strip()
                source = f"{frame.f_code.co_filename}:{tb.tb_lineno}: {code}"
                best = (paths[id(owner)], type(owner).__name__, source)
            tb = tb.tb_next
        if best[0] is not None:
            return best
        seen = seen.__cause__ or seen.__context__
    return best


def _node_place(program: Any, text: str) -> tuple[str | None, str, str]:
    names = set(re.findall(r"%(\w+)", text))
    for node in program.graph.nodes:
        if node.name not in names:
            continue
        stack = node.meta.get("nn_module_stack") or {}
        path, mtype = "", ""
        if stack:
            path, cls = list(stack.values())[-1]
            mtype = getattr(cls, "__name__", str(cls).rsplit(".", 1)[-1])
        trace = node.meta.get("stack_trace") or ""
        lines = [ln.strip() for ln in trace.strip().splitlines()]
        source = ""
        if len(lines) >= 2:
            m = re.match(r'File "(.+)", line (\d+)', lines[-2])
            source = f"{m.group(1)}:{m.group(2)}: {lines[-1]}" if m else lines[-1]
        return path, mtype, source
    return None, "", ""
