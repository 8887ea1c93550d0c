"""One instrumentation layer: every hook labkit puts on a model, owned by one context manager.

:class:`Instrumentation` installs module pre/post hooks, at most one torch-function mode
(op calls), one dispatch mode (aten ops), saved-tensor hooks, autograd pre-hooks that
mark backward segments, gradient-accumulation hooks and optimizer step hooks, and
removes every one of them on success, on error and on KeyboardInterrupt. It keeps the
one public answer to "where am I" (:attr:`Instrumentation.stack`, :attr:`phase`,
:meth:`backward_owner`, :meth:`param_owner`) and passes events to :class:`Observer` s
(timing, op graph, FLOPs, memory), which never read each other's state.

Shaped like ``torch.utils.flop_counter``: a public counter over a private dispatch
adapter and a module tracker. The layer also keeps its own clock: ``lost`` is the time
spent inside labkit's hooks, so a call's time can exclude the recorder's cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from types import TracebackType

import torch
from torch._C._autograd import _get_sequence_nr
from torch._ops import OpOverload
from torch.utils.hooks import RemovableHandle

from labkit.trace import _dispatch
from labkit.trace._raw import CallIndex
from labkit.trace._raw import RawNode as RawNode  # the node observers are handed: public here
from labkit.trace._segments import SegmentHook as SegmentHook  # its home before the split
from labkit.trace._segments import hook_graph

PHASES = ("forward", "backward", "optimizer")
_perf = time.perf_counter
_current_task = torch._C._current_graph_task_id
_current_node = torch._C._current_autograd_node
_NO_SEQ = 2**64 - 1  # AccumulateGrad nodes have no sequence number
_no_torch_function = torch._C.DisableTorchFunction


class Observer:
    """Base class of what listens to an :class:`Instrumentation`; every callback is a no-op.

    The class flags say which hooks an observer needs; the layer installs a hook only
    when some observer asks for it.

    Example:
        >>> class Ops(Observer):                      # doctest: +SKIP
        ...     needs_dispatch = True
        ...     def dispatch(self, func, args, kwargs, out): print(func)
    """

    needs_functions = False  # torch-level calls (op nodes of the graph)
    needs_dispatch = False  # every aten op (FLOPs, memory)
    decompose = False  # decompose aten ops without a FLOP formula, as FlopCounterMode does
    needs_saved = False  # tensors saved for backward
    needs_grads = False  # a parameter's gradient was accumulated
    needs_segments = False  # backward segments (one per module call or op)
    runs_ops = False  # runs each aten op itself (run_op): at most one observer of a recording

    def start(self, inst: Instrumentation) -> None:
        """The recording begins (hooks installed)."""

    def stop(self, inst: Instrumentation) -> None:
        """The recording ends (called on error too, before hooks are removed)."""

    def top_call(
        self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        """A top-level call of the model is about to begin (before its node is made)."""

    def call(
        self,
        node: RawNode,
        module: torch.nn.Module,
        args: tuple[object, ...],
        kwargs: dict[str, object],
    ) -> None:
        """A module call began; ``node`` is on top of ``inst.stack``."""

    def ret(self, node: RawNode, module: torch.nn.Module, output: object) -> None:
        """A module call returned; ``node`` was just popped."""

    def function(
        self,
        node: RawNode,
        func: Callable[..., object],
        args: tuple[object, ...],
        kwargs: dict[str, object],
        out: object,
    ) -> None:
        """A torch-level op returned tensors; ``node`` is its op node."""

    def alias(self, src: object, out: object) -> None:
        """A property such as ``.T`` or ``.data`` returned ``out`` for ``src``."""

    def dispatch(
        self, func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object], out: object
    ) -> None:
        """An aten op ran (forward, backward or optimizer step)."""

    def run_op(
        self, func: OpOverload, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> object:
        """With ``runs_ops``: run the aten op (every one, queries too) and return its result,
        as a dispatch mode just below the layer's would; the other observers see what it
        returns. One Python mode fewer per op than entering a mode of one's own."""
        return func(*args, **kwargs)

    def saved(self, t: torch.Tensor) -> None:
        """Autograd saved ``t`` for backward."""

    def grad(self, p: torch.Tensor) -> None:
        """``p.grad`` was accumulated."""

    def segment(self, node: RawNode | None, seconds: float) -> None:
        """A backward segment of ``node`` (``None``: outside any call) ended after ``seconds``
        of host time (the layer's own cost excluded)."""

    def segment_start(self, node: RawNode | None) -> None:
        """A backward segment of ``node`` begins."""

    def backward_end(self) -> None:
        """A backward pass finished."""

    def optimizer(self, opt: torch.optim.Optimizer, entering: bool) -> None:
        """``opt.step()`` begins (``entering``) or ends."""


class Instrumentation:
    """Owns every hook on ``model`` while entered; knows where the model is.

    Args:
        model: The module to instrument.
        observers: What listens; their flags decide which hooks are installed.
        ops: Record torch-level op calls as op nodes (in ``nodes``, under their module call).

    Example:
        >>> import torch
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        >>> with Instrumentation(model, []) as inst:  # observers: e.g. [TimingObserver()]
        ...     model(torch.randn(2, 4)).sum().backward()
        >>> [n.key for n in inst.nodes]  # one node per module call: path#call
        ['#0', '0#0', '1#0']
    """

    # set by _reset() (per recording); declared here so the methods above it see the types
    failed: RawNode | None  # the call running when the recording failed
    error: BaseException | None
    _contexts: list[AbstractContextManager[object]]
    _handles: list[_dispatch.Removable]
    _bwd_handles: list[RemovableHandle]

    def __init__(
        self, model: torch.nn.Module, observers: Sequence[Observer] = (), *, ops: bool = False
    ) -> None:
        self.model = model
        self.observers = tuple(observers)
        self.ops = ops or any(o.needs_functions for o in self.observers)
        # whether anything is timed: without it, op and dispatch hooks read no clock
        self.clock = any(o.needs_segments for o in self.observers)
        self.enabled = False
        self._module_handles: list[_ModuleHooks] = []
        self._auto_attached = False
        self._paths: dict[int, str] = {}
        self._owners: dict[int, str] = {}
        self._reset()

    def __repr__(self) -> str:
        names = ", ".join(type(o).__name__ for o in self.observers)
        return (
            f"Instrumentation(model={type(self.model).__name__}, observers=[{names}], "
            f"ops={self.ops}, attached={self.attached}, enabled={self.enabled})"
        )

    # ------------------------------------------------------------ where am I
    @property
    def current(self) -> RawNode | None:
        """The innermost module call running in forward, or ``None``."""
        return self.stack[-1] if self.stack else None

    @property
    def phase(self) -> str:
        """``"optimizer"`` inside ``Optimizer.step``, ``"backward"`` in an autograd pass,
        ``"forward"`` in a module call; between them, the phase last entered (the loss is
        forward, gradient clipping is backward, ``zero_grad`` after a step is optimizer)."""
        if self._in_opt:
            return "optimizer"
        if _current_task() != -1:
            return "backward"
        return "forward" if self.stack else self._last_phase

    def where(self) -> str:
        """Where the step is, in words: the innermost module, else the phase and the call.

        ``"module 'enc.0.fc'"``, ``"backward of 'enc.0.fc'"``, ``"AdamW.step"``,
        ``"outside any module after the forward (the loss)"``, ...
        """
        if self._in_opt:
            return f"{self.optimizer_name}.step"
        if _current_task() != -1:
            path = self.module_now()
            if path or self.backward_owner() is not None:
                return f"backward of '{path}'" if path else "backward of the root module"
            return "backward outside any module (the loss's own ops)"
        if self.stack:
            path = self.stack[-1].module or ""
            return f"module '{path}'" if path else "the root module"
        last = self._last_phase
        if last == "optimizer":
            return f"after {self.optimizer_name}.step"
        if last == "backward":
            return "after backward, before any optimizer step"
        if self.top_calls:
            return "outside any module after the forward (the loss)"
        return "outside any module before the forward"

    def backward_owner(self) -> RawNode | None:
        """The op node or module call that created the autograd node running now, or ``None``.

        Found by the autograd node's sequence number, so it is right whatever order
        autograd runs the nodes in. Gradient accumulation belongs to the parameter's owner
        (see :meth:`param_owner`), not to a call: ``None`` then.
        """
        node = _current_node()
        if node is None:
            return None
        seq = node._sequence_nr()
        if seq == _NO_SEQ or seq < self.seq_start:
            return None
        return self.index.find(seq)

    def module_now(self) -> str:
        """Path of the module running now in any phase (``""`` outside modules or in step)."""
        if self._in_opt:
            return ""
        if _current_task() != -1:
            owner = self.backward_owner()
            while owner is not None and owner.kind != "module":
                owner = owner.parent
            return (owner.module or "") if owner is not None else ""
        return (self.stack[-1].module or "") if self.stack else ""

    def param_owner(self, p: torch.Tensor) -> str:
        """Path of the first module (``named_modules`` order) that registers parameter ``p``."""
        return self._owners.get(id(p), "")

    # ------------------------------------------------------------ lifecycle
    @property
    def attached(self) -> bool:
        """Whether module hooks are installed."""
        return bool(self._module_handles)

    def attach(self) -> Instrumentation:
        """Install module hooks (cheap while not started). Returns ``self``."""
        if self.attached:
            return self
        self._paths, self._owners = {}, {}
        hooks = _ModuleHooks(self._pre, self._post)
        self._module_handles.append(hooks)  # removed by detach, also if attaching fails
        try:
            for path, mod in self.model.named_modules():
                self._paths[id(mod)] = path
                for p in mod._parameters.values():  # parameters(recurse=False), cheaper
                    if p is not None:
                        self._owners.setdefault(id(p), path)
                if isinstance(mod, torch.jit.ScriptModule):
                    continue
                hooks.add(mod)
        except BaseException:
            self.detach()
            raise
        if not hooks:  # nothing to hook (TorchScript only): not attached
            self._module_handles = []
        return self

    def detach(self) -> None:
        """Remove the module hooks."""
        handles, self._module_handles = self._module_handles, []
        for h in handles:
            h.remove()

    def start(self) -> None:
        """Install the per-recording hooks and begin passing events (attaching if needed)."""
        if self.enabled:
            raise RuntimeError("this recording is already running; stop it first")
        if not self.attached:
            self.attach()
        self._reset()
        self.seq_start = _get_sequence_nr()
        obs = self.observers
        self._fn_obs = tuple(o for o in obs if type(o).function is not Observer.function)
        self._call_obs = tuple(o for o in obs if type(o).call is not Observer.call)
        self._ret_obs = tuple(o for o in obs if type(o).ret is not Observer.ret)
        self._seg_obs = tuple(o for o in obs if type(o).segment is not Observer.segment)
        self._seg_start_obs = tuple(
            o for o in obs if type(o).segment_start is not Observer.segment_start
        )
        self._contexts = _dispatch.contexts(self)
        entered = []
        try:
            for ctx in self._contexts:
                ctx.__enter__()
                entered.append(ctx)
            self._handles = _dispatch.global_handles(self)
            self.t0 = _perf()
            self.enabled = True
            # observers read the model's tensors (parameters, their storages): with the
            # function mode off, not as calls of the model's (~10 mode calls a module)
            with _no_torch_function():
                for o in obs:
                    o.start(self)
        except BaseException:
            self.enabled = False
            for ctx in reversed(entered):
                ctx.__exit__(None, None, None)
            self._contexts = []
            self._remove_handles()
            raise

    def stop(self) -> None:
        """Stop passing events and remove every per-recording hook (module hooks stay attached)."""
        was = self.enabled
        self.enabled = False
        try:
            if was:
                with _no_torch_function():
                    for o in reversed(self.observers):
                        o.stop(self)
        finally:
            try:
                for ctx in reversed(self._contexts):
                    ctx.__exit__(None, None, None)
            finally:
                self._contexts = []
                self._remove_handles()

    def _remove_handles(self) -> None:
        handles, self._handles = self._handles, []
        handles += self._bwd_handles
        self._bwd_handles = []
        for h in handles:
            h.remove()

    def __enter__(self) -> Instrumentation:
        self._auto_attached = not self.attached
        try:
            self.start()
        except BaseException:
            if self._auto_attached:
                self.detach()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.failed = self.stack[-1] if (exc is not None and self.stack) else None
        self.error = exc
        try:
            self.stop()
        finally:
            if self._auto_attached:
                self.detach()
                self._auto_attached = False

    # ------------------------------------------------------------ state
    def _reset(self) -> None:
        self.nodes: list[RawNode] = []
        self.stack: list[RawNode] = []
        self.index = CallIndex()
        self.seq_start = 0
        self.lost = 0.0  # seconds spent inside labkit's hooks
        self.t0 = 0.0
        self.top_calls = 0
        self.failed = None
        self.error = None
        self.backward_passes = 0
        self._call_counts: dict[str, int] = {}
        self._op_counts: dict[tuple[int, str], int] = {}
        self._contexts = []
        self._handles = []
        self._bwd_handles = []
        self._hooked_seq: set[int] = set()
        self._seg_hooks: dict[int, SegmentHook] = {}
        self._bwd_task: int | None = None
        self._seg_owner: RawNode | None = None
        self._seg_t0: float | None = None
        self._seg_lost = 0.0
        self._in_opt = 0
        self._last_phase = "forward"
        self.optimizer_name = ""  # class of the optimizer last stepped
        self.op: RawNode | None = None  # the torch-level op running now (ops=True)

    def new_node(self, kind: str, name: str, type_: str, parent: RawNode | None) -> RawNode:
        """Append a node (inputs and outputs of the graph are made by the graph observer)."""
        node = RawNode(len(self.nodes), kind, name, type_, parent)
        self.nodes.append(node)
        if parent is not None:
            parent.leaf = False
        return node

    # ------------------------------------------------------------ module hooks
    def _pre(
        self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        if not self.enabled:
            return
        t_in = _perf()
        path = self._paths.get(id(module))
        if path is None:
            return
        # observers read tensors' metadata (``t.shape``...): with the function mode off,
        # not as calls of the model's (each a Python mode call: ~8 a module call)
        with _no_torch_function():
            self._pre_observed(module, path, args, kwargs, t_in)

    def _pre_observed(
        self,
        module: torch.nn.Module,
        path: str,
        args: tuple[object, ...],
        kwargs: dict[str, object],
        t_in: float,
    ) -> None:
        stack = self.stack
        parent = stack[-1] if stack else None
        if parent is None:
            self._last_phase = "forward"
            for o in self.observers:
                o.top_call(module, args, kwargs)
        node = RawNode(len(self.nodes), "module", path, type(module).__name__, parent)
        self.nodes.append(node)
        if parent is not None:
            parent.leaf = False
        node.module = path
        node.call = k = self._call_counts.get(path, 0)
        self._call_counts[path] = k + 1
        node.key = f"{path}#{k}"
        node.seq0 = _get_sequence_nr()
        self.index.add(node)
        stack.append(node)
        for o in self._call_obs:
            o.call(node, module, args, kwargs)
        t_out = _perf()
        self.lost += t_out - t_in
        node.t0 = t_out
        node.lost0 = self.lost

    def _post(
        self,
        module: torch.nn.Module,
        args: tuple[object, ...],
        kwargs: dict[str, object],
        output: object,
    ) -> None:
        if not self.enabled:
            return
        t_in = _perf()
        stack = self.stack
        path = self._paths.get(id(module))
        if path is None or not stack:
            return
        while len(stack) > 1 and stack[-1].module != path:
            stack.pop()  # a child raised and the error was caught in this module
        node = stack.pop()
        node.fwd_time = (t_in - node.t0) - (self.lost - node.lost0)
        node.seq1 = _get_sequence_nr()
        with _no_torch_function():
            for o in self._ret_obs:
                o.ret(node, module, output)
            if not stack:
                self.top_calls += 1
                if torch.is_grad_enabled():
                    hook_graph(self, output)
        self.lost += _perf() - t_in

    # ------------------------------------------------------------ torch-level ops
    def begin_op(self, name: str) -> RawNode:
        """Called by the function mode before an op runs; returns its (pending) node."""
        parent = self.stack[-1]
        node = RawNode(-1, "op", name, name, parent)
        node.seq0 = _get_sequence_nr()
        self.op = node
        return node

    def end_op(
        self,
        node: RawNode,
        func: Callable[..., object],
        args: tuple[object, ...],
        kwargs: dict[str, object],
        out: object,
        elapsed: float,
        has_tensors: bool,
    ) -> None:
        """Called by the function mode after the op; keeps the node when it made tensors."""
        self.op = None
        node.seq1 = _get_sequence_nr()
        if not has_tensors:
            return
        parent = node.parent
        assert parent is not None
        node.id = len(self.nodes)
        self.nodes.append(node)
        parent.leaf = False
        k = self._op_counts.get((parent.id, node.name), 0)
        self._op_counts[(parent.id, node.name)] = k + 1
        node.key = f"{parent.key}/{node.name}#{k}"
        node.fwd_time = elapsed
        self.index.add(node)
        for o in self._fn_obs:
            o.function(node, func, args, kwargs, out)

    # ------------------------------------------------------------ optimizer, grads
    def _opt_pre(
        self, opt: torch.optim.Optimizer, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        if self.enabled:
            self._last_phase = "optimizer"
            self.optimizer_name = type(opt).__name__
            for o in self.observers:
                o.optimizer(opt, True)
            self._in_opt += 1

    def _opt_post(
        self, opt: torch.optim.Optimizer, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        if self.enabled:
            self._in_opt = max(0, self._in_opt - 1)
            for o in self.observers:
                o.optimizer(opt, False)

    def _grad(self, p: torch.Tensor) -> None:
        if self.enabled:
            for o in self.observers:
                o.grad(p)


class _ModuleHooks:
    """One forward pre-hook and one forward hook (both ``with_kwargs=True``) on many modules.

    Each goes into the module's hook tables as ``register_forward_pre_hook`` /
    ``register_forward_hook`` put it (last, with its kwargs flag), under one id per kind
    for all modules, drawn from ``RemovableHandle``'s counter so no other hook shares it.
    A ``RemovableHandle`` per hook cost ~10 us (weak references to three tables each): 0.2 s
    to attach 10,000 modules, once per timing pass. A module without those tables (another
    torch) gets its hooks through the public calls. :meth:`remove` takes every one out."""

    def __init__(self, pre: Callable[..., object], post: Callable[..., object]) -> None:
        self.pre, self.post = pre, post
        self.pre_id = RemovableHandle.next_id
        self.post_id = self.pre_id + 1
        RemovableHandle.next_id += 2
        self.tables: list[tuple[dict[int, object], ...]] = []
        self.handles: list[RemovableHandle] = []

    def __bool__(self) -> bool:
        return bool(self.tables or self.handles)

    def add(self, mod: torch.nn.Module) -> None:
        """Hook ``mod`` (after the hooks it has)."""
        d = mod.__dict__
        pre, pre_kw = d.get("_forward_pre_hooks"), d.get("_forward_pre_hooks_with_kwargs")
        post, post_kw = d.get("_forward_hooks"), d.get("_forward_hooks_with_kwargs")
        if all(isinstance(t, dict) for t in (pre, pre_kw, post, post_kw)):
            assert pre is not None and pre_kw is not None  # for mypy: dicts, checked above
            assert post is not None and post_kw is not None
            self.tables.append((pre, pre_kw, post, post_kw))
            pre[self.pre_id] = self.pre
            pre_kw[self.pre_id] = True
            post[self.post_id] = self.post
            post_kw[self.post_id] = True
            return
        self.handles.append(mod.register_forward_pre_hook(self.pre, with_kwargs=True))
        self.handles.append(mod.register_forward_hook(self.post, with_kwargs=True))

    def remove(self) -> None:
        """Take every hook out (each once, however often called)."""
        tables, self.tables = self.tables, []
        handles, self.handles = self.handles, []
        a, b = self.pre_id, self.post_id
        for pre, pre_kw, post, post_kw in tables:
            pre.pop(a, None)
            pre_kw.pop(a, None)
            post.pop(b, None)
            post_kw.pop(b, None)
        for h in handles:
            h.remove()
