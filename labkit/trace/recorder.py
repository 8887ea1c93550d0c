"""The Recorder: one recording of a model as a :class:`Trace`, over the instrumentation layer.

A Recorder is an observer set over one :class:`~labkit.trace.instrument.Instrumentation`:
``"timing"`` mode keeps module times (host clock with labkit's own cost subtracted, or
CUDA events) and module-level dataflow; ``"full"`` mode keeps the op graph, FLOPs,
bytes saved for backward and the memory timeline, and no times (its per-op recording
costs more than most layers). Everything is removed on success, on error and on
KeyboardInterrupt; see :meth:`Recorder.__exit__`.
"""

from __future__ import annotations

from types import TracebackType

import torch

from labkit import _display
from labkit._format import fmt_shape
from labkit._tensors import model_device
from labkit.trace._flops import FlopObserver
from labkit.trace._graph_observer import GraphObserver
from labkit.trace._raw import RawNode, build_trace, freeze_meta, parameters_of
from labkit.trace._timing import TimingObserver
from labkit.trace.errors import TraceError
from labkit.trace.instrument import Instrumentation, Observer
from labkit.trace.model import MemoryMeta, MemorySample, Trace

MODES = ("timing", "full")
_PASS_MODES = ("timing", "full", "ops", "step")  # ops, step: timing passes of labkit.trace

__all__ = ["MODES", "MemoryObserver", "Recorder", "check_model", "script_modules"]


class MemoryObserver(Observer):
    """An observer that keeps a full recording's memory timeline.

    :class:`labkit.memory.MemoryTracker` is one. A full-mode :class:`Recorder` uses the one
    it is given, or makes the one registered as ``"trace.memory"`` in ``labkit._display``
    (``labkit.memory.tracker`` registers ``MemoryTracker``; the trace layer never imports
    the memory layer).

    Example:
        >>> from labkit.memory import MemoryTracker
        >>> issubclass(MemoryTracker, MemoryObserver)
        True
    """

    def result(self) -> tuple[tuple[MemorySample, ...], MemoryMeta | None]:
        """``(samples, MemoryMeta)`` for the Trace, once the recording has stopped."""
        raise NotImplementedError


def default_memory(model: torch.nn.Module) -> MemoryObserver:
    """The memory observer a full recording of ``model`` makes when none is given (the
    ``"trace.memory"`` factory: ``labkit.memory.MemoryTracker(model)``)."""
    observer = _display.view("trace.memory")(model)
    if not isinstance(observer, MemoryObserver):
        raise TypeError(
            f"the 'trace.memory' factory made a {type(observer).__name__}, not a MemoryObserver"
        )
    return observer


def check_model(model: object, what: str = "labkit.trace") -> None:
    """Raise a TypeError naming what was given when ``model`` is not an ``nn.Module``."""
    if isinstance(model, torch.jit.ScriptModule):
        raise TypeError(
            f"{what} got a TorchScript module ({type(model).__name__}, made by torch.jit.script "
            "or torch.jit.trace): labkit hooks Python modules and cannot see inside TorchScript. "
            "Pass the nn.Module itself (the one given to torch.jit.script): its calls, FLOPs "
            "and memory are those the scripted one runs"
        )
    if isinstance(model, torch.nn.Module):
        return
    given = f"{type(model).__module__}.{type(model).__qualname__}"
    hint = ""
    if isinstance(model, torch.Tensor):
        hint = " (a tensor: pass the model first, then its inputs: labkit.trace(model, x))"
    elif callable(model):
        hint = " (a function: wrap it in an nn.Module so its calls can be hooked)"
    raise TypeError(f"{what} expects a torch.nn.Module, got {given}{hint}")


class Recorder:
    """Records what a model does while it is attached and enabled.

    ``"timing"`` mode installs module hooks only: per-call forward times, backward times
    per call (autograd-node pre-hooks, one per call segment), shapes and the dataflow
    between module calls. Times exclude labkit's own hook cost; on CUDA they are GPU
    times from CUDA events resolved once at :meth:`stop`. ``"full"`` mode adds op
    capture (the graph of tensor operations), FLOPs per op and module, forward and
    backward (``torch.utils.flop_counter`` formulas), bytes saved for backward and the
    memory timeline; it records no times. A recorder that is attached but not enabled
    returns from its hooks at once.

    Args:
        model: The module to record.
        mode: ``"timing"`` or ``"full"``.
        observers: More observers for the same recording (e.g. a ``MemoryTracker``).
            Times are kept only when none of them works per op.
        memory: In full mode, the :class:`MemoryObserver` to use (a
            ``labkit.memory.MemoryTracker`` with its options: optimizers, inputs, scalers,
            stacks); ``MemoryTracker(model)`` otherwise (see :func:`default_memory`).

    Example:
        >>> import torch
        >>> from torch import nn
        >>> model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> with Recorder(model, mode="timing") as rec:
        ...     loss = model(torch.randn(3, 4)).sum(); loss.backward(); opt.step()
        >>> [n.name for n in rec.trace.nodes]
        ['input', '', '0', '1', '2', 'output']
        >>> [(r["path"], r["params"]) for r in rec.trace.top(2, by="params")]
        [('0', 40), ('2', 18)]
        >>> all(r["fwd_time"] > 0 for r in rec.trace.top(4))  # which is slowest varies by run
        True
    """

    def __init__(
        self,
        model: torch.nn.Module,
        *,
        mode: str = "full",
        observers: tuple[Observer, ...] | list[Observer] = (),
        memory: MemoryObserver | None = None,
    ) -> None:
        check_model(model, "Recorder")
        if mode not in _PASS_MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.model = model
        self.mode = mode
        self.trace: Trace | None = None
        self.notes: list[str] = []
        self.extra = tuple(observers)
        self.graph = (
            GraphObserver(ops=mode == "full", saved=mode == "full")
            if mode in ("timing", "full")
            else None
        )
        self.flops = FlopObserver() if mode == "full" else None
        self.memory: MemoryObserver | None = None
        if mode == "full":
            self.memory = memory if memory is not None else default_memory(model)
        elif memory is not None:
            raise ValueError("memory= is for mode='full'; pass the tracker in observers=")
        per_op = any(o.needs_dispatch or o.runs_ops for o in self.extra)
        self.timing = (
            TimingObserver(cuda=_on_cuda(model)) if (mode != "full" and not per_op) else None
        )
        obs = [o for o in (self.timing, self.graph, self.flops, self.memory) if o is not None]
        self.inst = Instrumentation(model, [*obs, *self.extra], ops=mode in ("full", "ops"))

    def __repr__(self) -> str:
        return (
            f"Recorder(model={type(self.model).__name__}, mode={self.mode!r}, "
            f"attached={self.attached}, enabled={self.enabled})"
        )

    # ------------------------------------------------------------ lifecycle
    @property
    def attached(self) -> bool:
        """Whether module hooks are installed."""
        return self.inst.attached

    @property
    def enabled(self) -> bool:
        """Whether a recording is running."""
        return self.inst.enabled

    def attach(self) -> Recorder:
        """Install module hooks (disabled until :meth:`start`). Returns ``self``."""
        self.inst.attach()
        return self

    def detach(self) -> None:
        """Remove every module hook."""
        self.inst.detach()

    def start(self) -> None:
        """Begin a recording (attaching first if needed)."""
        if self.enabled:
            raise RuntimeError("this Recorder is already recording; call stop() first")
        self.notes = []
        self.inst.start()

    def stop(self) -> Trace:
        """End the recording, remove every per-recording hook and return the :class:`Trace`."""
        self.inst.stop()
        self.trace = self._build()
        return self.trace

    def __enter__(self) -> Recorder:
        if self.enabled:
            raise RuntimeError("this Recorder is already recording; call stop() first")
        self.notes = []
        self.inst.__enter__()  # attaches first when needed, and detaches again on exit
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        failing = self.inst.stack[-1] if self.inst.stack else None
        self.inst.__exit__(exc_type, exc, tb)
        self.trace = self._build()
        if isinstance(exc, Exception) and failing is not None and not isinstance(exc, TraceError):
            raise TraceError(self._failure_message(failing, exc)) from exc

    # ------------------------------------------------------------ results
    def _build(self) -> Trace:
        inst = self.inst
        notes = list(self.notes)
        timing = self.timing
        if self.mode == "timing":
            notes.append("timing mode: no op nodes or FLOPs; edges only between module calls")
        if timing is None:
            for n in inst.nodes:
                n.fwd_time = 0.0
        elif timing.cuda:
            notes.append("CUDA: times are GPU times from CUDA events, resolved once per step")
        scripted = script_modules(self.model)
        if scripted:
            names = ", ".join(f"'{p}'" for p in scripted)
            notes.append(
                f"TorchScript modules run as one opaque call: {names} (labkit cannot hook "
                "inside TorchScript: their ops, time and memory count toward the module that "
                "calls them; trace the Python module to see inside)"
            )
        dev = str(model_device(self.model))
        flops = self.flops
        meta = {
            "model": type(self.model).__name__,
            "mode": self.mode,
            "device": dev,
            "torch_version": torch.__version__.split("+")[0],
            "backward": inst.backward_passes > 0,
            "calls": inst.top_calls,
            "forward_time": timing.forward if timing else 0.0,
            "backward_time": timing.backward if timing else 0.0,
            "outside_flops_fwd": flops.outside_fwd if flops else 0,
            "outside_flops_bwd": flops.outside_bwd if flops else 0,
            "outside_bwd_time": timing.outside_bwd if timing else 0.0,
            "no_flop_formula": flops.missing() if flops else (),
            "timing": _how_timed(timing),
            "notes": tuple(notes),
        }
        if self.memory is not None:
            memory, memory_meta = self.memory.result()
        else:
            memory, memory_meta = (), None
        edges = self.graph.edges if self.graph is not None else []
        return build_trace(
            inst.nodes, edges, model=self.model, meta=meta, memory=memory, memory_meta=memory_meta
        )

    def _failure_message(self, node: RawNode, exc: BaseException) -> str:
        where = f"module '{node.module}'" if node.module else "the root module"
        metas = [freeze_meta(m) for m in node.inputs]
        ins = (
            ", ".join(f"{m.name or 'arg'}: {m.dtype}{fmt_shape(m.shape)}" for m in metas)
            or "no tensors"
        )
        return (
            f"{type(self.model).__name__} failed in {where} ({node.type}) called with "
            f"inputs ({ins}): {type(exc).__name__}: {exc}"
        )


def script_modules(model: torch.nn.Module) -> list[str]:
    """Paths of the outermost TorchScript submodules of ``model`` (inside them, nothing is
    hooked)."""
    out: list[str] = []
    for path, m in model.named_modules():
        if isinstance(m, torch.jit.ScriptModule) and not any(path.startswith(p + ".") for p in out):
            out.append(path)
    return out


def _on_cuda(model: torch.nn.Module) -> bool:
    return any(p.is_cuda for p in parameters_of(model))


def _how_timed(timing: TimingObserver | None) -> str:
    if timing is None:
        return "not timed (a full recording: per-op capture would dominate the times)"
    if timing.cuda:
        return "one pass, CUDA events"
    return "one pass, host clock, labkit's hook cost subtracted"
