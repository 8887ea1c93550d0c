"""Deployment targets as recipes: the model as ``torch.export`` or ONNX Runtime runs it.

:func:`labkit.optimize.apply` with ``Recipe(export=...)`` replaces the model's
``forward`` (on the instance) with an :class:`ExportedForward`. The first call
exports the model with those inputs, marking dimension 0 of every tensor input
dynamic (``Dim.AUTO``: torch.export keeps it static where the model fixes it), and
every call runs the export: the ``torch.export`` program's module, or an ONNX
Runtime session on the ONNX model converted from that program. A model that
cannot be exported raises an :class:`ExportError` that names the construct or
operator, the module and the source line, never the exporter's traceback.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree

from labkit._tensors import model_device
from labkit.optimize._export_errors import (
    ExportError,
    draft_issues,
    export_error,
    opaque_outputs,
)

TARGETS = ("torch.export", "onnxruntime")
ONNX_FIX = "pip install 'labkit[export]' (onnx, onnxruntime, onnxscript)"


class ExportedForward:
    """The forward of an exported model; exports on the first call.

    Args:
        module: The model whose class ``forward`` is exported.
        target: ``"torch.export"`` or ``"onnxruntime"``.
        call_kwargs: Keyword arguments added to every call (``Recipe.export_kwargs``,
            e.g. ``{"use_cache": False}``).

    Attributes:
        program: The ``torch.export.ExportedProgram`` (after the first call).
        session: The ``onnxruntime.InferenceSession`` (``"onnxruntime"`` only).
        export_time: Seconds spent exporting (and converting to ONNX).
        notes: What was exported and how it runs.
    """

    def __init__(
        self, module: torch.nn.Module, target: str, call_kwargs: dict[str, Any] | None = None
    ) -> None:
        if target not in TARGETS:
            raise ValueError(f"export target must be one of {TARGETS}, got {target!r}")
        self.module, self.target = module, target
        self.call_kwargs = dict(call_kwargs or {})
        self.program: Any = None
        self.session: Any = None
        self.onnx_program: Any = None
        self.export_time: float | None = None
        self.notes: list[str] = []
        self._run: Any = None
        self._out_spec: Any = None

    def __deepcopy__(self, memo: dict[int, Any]) -> ExportedForward:
        return ExportedForward(copy.deepcopy(self.module, memo), self.target, self.call_kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kwargs = {**kwargs, **self.call_kwargs}
        if self._run is None:
            self.export(*args, **kwargs)
        return self._run(*args, **kwargs)

    def __repr__(self) -> str:
        state = "not exported yet" if self._run is None else f"exported in {self.export_time:.2f} s"
        return f"ExportedForward({self.target}, {state})"

    # ------------------------------------------------------------------ export
    def export(self, *args: Any, **kwargs: Any) -> None:
        """Export with these example inputs (the first call does this)."""
        if self.target == "onnxruntime":
            _require_onnx()
        t0 = time.perf_counter()
        with _class_forward(self.module), _quiet_exporters():
            try:
                self.program = torch.export.export(
                    self.module,
                    args,
                    kwargs or None,
                    dynamic_shapes=dynamic_batch(self.module, args, kwargs),
                )
            except Exception as exc:
                err = export_error(exc, self.module, self.target)
                held = opaque_outputs(exc, self.module, args, kwargs)
                if held:
                    raise held from None
                issues = draft_issues(self.module, args, kwargs)
                raise ExportError(
                    err.target, err.construct, err.module, err.module_type, err.source, issues
                ) from None
            n_ops = sum(1 for n in self.program.graph.nodes if n.op == "call_function")
            self.notes.append(f"torch.export: {n_ops} ops in the graph, {_batch_note(self)}")
            if self.target == "torch.export":
                self._run = self.program.module()
            else:
                self._onnx(args, kwargs)
        self.export_time = time.perf_counter() - t0
        self.notes.append(f"export took {self.export_time:.2f} s (not in the step times)")

    def _onnx(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import onnxruntime as ort

        try:
            self.onnx_program = torch.onnx.export(self.program, dynamo=True, verbose=False)
        except Exception as exc:
            raise export_error(exc, self.module, self.target, self.program) from None
        proto = self.onnx_program.model_proto
        options = ort.SessionOptions()
        options.intra_op_num_threads = torch.get_num_threads()
        # no busy-waiting between runs: compare interleaves recipes, and spinning threads
        # would take the CPU from the next recipe's step
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        device = model_device(self.module).type
        providers = ["CPUExecutionProvider"]
        if device == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        self.session = ort.InferenceSession(proto.SerializeToString(), options, providers=providers)
        with torch.no_grad():
            _, self._out_spec = pytree.tree_flatten(self.program.module()(*args, **kwargs))
        self.notes.append(
            f"ONNX: {len(proto.graph.node)} nodes (opset "
            f"{next((o.version for o in proto.opset_import if o.domain == ''), '?')}), run by "
            f"onnxruntime {ort.__version__} on {self.session.get_providers()[0]} with "
            f"{options.intra_op_num_threads} intra-op threads"
            + ("; inputs and outputs cross the host" if device == "cuda" else "")
        )
        self._run = self._ort_run

    def _ort_run(self, *args: Any, **kwargs: Any) -> Any:
        flat = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        names = [i.name for i in self.session.get_inputs()]
        if len(flat) != len(names):
            raise ValueError(
                f"the ONNX model takes {len(names)} tensor inputs {names}, got {len(flat)}"
            )
        feed = {n: t.detach().cpu().contiguous().numpy() for n, t in zip(names, flat, strict=True)}
        outs = [torch.from_numpy(a) for a in self.session.run(None, feed)]
        device = flat[0].device if flat else torch.device("cpu")
        outs = [o.to(device) for o in outs]
        if self._out_spec is not None and self._out_spec.num_leaves == len(outs):
            return pytree.tree_unflatten(outs, self._out_spec)
        return outs[0] if len(outs) == 1 else tuple(outs)


def exported(model: torch.nn.Module) -> ExportedForward | None:
    """The :class:`ExportedForward` of a model applied with an export Recipe, else None."""
    fwd = model.__dict__.get("forward")
    return fwd if isinstance(fwd, ExportedForward) else None


def dynamic_batch(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``dynamic_shapes`` marking dim 0 of every tensor input ``Dim.AUTO`` (None if unbindable)."""
    from torch.export import Dim

    try:
        bound = inspect.signature(type(module).forward).bind(module, *args, **kwargs)
    except TypeError:
        return None
    kinds = {p.name: p.kind for p in inspect.signature(type(module).forward).parameters.values()}
    if any(kinds[n] in (inspect.Parameter.VAR_POSITIONAL,) for n in bound.arguments):
        return None

    def spec(t: Any) -> Any:
        return {0: Dim.AUTO} if isinstance(t, torch.Tensor) and t.dim() > 0 else None

    out = {}
    for name, value in list(bound.arguments.items())[1:]:
        if kinds[name] == inspect.Parameter.VAR_KEYWORD:
            out[name] = {k: pytree.tree_map(spec, v) for k, v in value.items()}
        else:
            out[name] = pytree.tree_map(spec, value)
    return out


def _batch_note(fwd: ExportedForward) -> str:
    dynamic = bool(fwd.program.range_constraints)
    return "batch dimension dynamic" if dynamic else "static shapes (the model fixes the batch)"


def _require_onnx() -> None:
    missing = [name for name in ("onnx", "onnxruntime", "onnxscript") if not _importable(name)]
    if missing:
        raise ExportError(
            "onnxruntime", f"{', '.join(missing)} not installed ({ONNX_FIX})", None, "", ""
        )


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


@contextlib.contextmanager
def _class_forward(module: torch.nn.Module) -> Iterator[None]:
    """Let the exporter see the class ``forward``, not the instance's wrapper."""
    fwd = module.__dict__.pop("forward", None)
    try:
        yield
    finally:
        if fwd is not None:
            module.__dict__["forward"] = fwd


class _MutedForThread:
    """A stream that drops what one thread writes and passes every other thread's writes on.

    torch.export prints a failed export's partial FX graph to ``sys.stderr`` itself (and
    logs the exportdb case at ERROR); labkit reports the failure as one line, so that dump
    is noise. Muting only the exporting thread keeps a notebook's other output (a training
    loop, the kernel's own writes) untouched while the panel exports in the background.
    """

    def __init__(self, stream: Any, thread: int) -> None:
        self._stream, self._thread = stream, thread

    def write(self, text: str) -> int:
        if threading.get_ident() == self._thread:
            return len(text)
        return int(self._stream.write(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def _quiet_exporters() -> Iterator[None]:
    """Mute what the exporters print about their own internals (not about the model)."""
    prefixes = ("torch.onnx", "torch.export", "torch._export", "torch.fx", "torch._subclasses")
    names = [n for n in logging.root.manager.loggerDict if n.startswith(prefixes)]
    loggers = [logging.getLogger(n) for n in {*names, *prefixes}]
    levels = [lg.level for lg in loggers]
    stderr = sys.stderr
    muted = _MutedForThread(stderr, threading.get_ident())
    try:
        for lg in loggers:
            lg.setLevel(logging.CRITICAL)  # a failure is labkit's one-line ExportError
        sys.stderr = muted
        with warnings.catch_warnings():
            # torch's own pytree deprecation inside torch.export / torch.onnx (not the model's)
            warnings.filterwarnings("ignore", message=r".*LeafSpec.*", category=FutureWarning)
            warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"onnxscript.*")
            yield
    finally:
        if sys.stderr is muted:  # someone else replaced it meanwhile: leave theirs
            sys.stderr = stderr
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)
