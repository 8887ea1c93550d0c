"""PlainClock: the root module's forward and backward time with no hooks inside the model.

Module hooks send every call through PyTorch's slower hooked path (``Module._call_impl``
builds a closure, walks the hook dicts, ...), and part of that cost falls outside what
labkit's own clock can see. So the times a trace shows for the whole model come from
*hook-free* passes: only the root module carries a pre- and a post-hook (its own clock),
nothing inside it does. The post-hook puts one pre-hook on the output's autograd nodes,
which marks where the root's backward begins; an engine callback marks its end.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from labkit._tensors import named_tensors

_perf = time.perf_counter


class PlainClock:
    """Times each call of ``model`` (forward) and the backward that reaches its output.

    Args:
        model: The root module.

    Example:
        >>> import torch
        >>> model = torch.nn.Linear(4, 2)
        >>> clock = PlainClock(model).attach()
        >>> clock.start(); model(torch.randn(3, 4)).sum().backward(); clock.stop()
        >>> len(clock.forward), len(clock.backward)
        (1, 1)
        >>> clock.detach()
    """

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.enabled = False
        self.forward: list[float] = []
        self.backward: list[float] = []
        self._handles: list[Any] = []
        self._node_handles: list[Any] = []
        self._t0 = 0.0
        self._bwd_t0: float | None = None

    def __repr__(self) -> str:
        return (
            f"PlainClock(model={type(self.model).__name__}, attached={bool(self._handles)}, "
            f"enabled={self.enabled})"
        )

    def attach(self) -> PlainClock:
        """Put the two hooks on the root module (none inside it). Returns ``self``."""
        if not self._handles and not isinstance(self.model, torch.jit.ScriptModule):
            self._handles = [
                self.model.register_forward_pre_hook(self._pre),
                self.model.register_forward_hook(self._post),
            ]
        return self

    def detach(self) -> None:
        """Remove every hook this clock put on the model or its autograd graph."""
        self.stop()
        handles, self._handles = self._handles, []
        for h in handles:
            h.remove()

    def start(self) -> None:
        """Begin a pass: forget the previous figures."""
        self.forward, self.backward = [], []
        self._bwd_t0 = None
        self.enabled = True

    def stop(self) -> None:
        """End the pass and remove the autograd-node hooks."""
        self.enabled = False
        handles, self._node_handles = self._node_handles, []
        for h in handles:
            h.remove()

    def _pre(self, module: Any, args: Any) -> None:
        if self.enabled:
            self._t0 = _perf()

    def _post(self, module: Any, args: Any, output: Any) -> None:
        if not self.enabled:
            return
        self.forward.append(_perf() - self._t0)
        if torch.is_grad_enabled():
            seen: set[int] = set()
            for _, t in named_tensors(output):
                fn = t.grad_fn
                if fn is not None and id(fn) not in seen:
                    seen.add(id(fn))
                    self._node_handles.append(fn.register_prehook(self._backward_begins))

    def _backward_begins(self, grad_outputs: Any) -> None:
        if self.enabled and self._bwd_t0 is None:
            self._bwd_t0 = _perf()
            torch.autograd.Variable._execution_engine.queue_callback(self._backward_ends)

    def _backward_ends(self) -> None:
        if self._bwd_t0 is not None:
            self.backward.append(_perf() - self._bwd_t0)
            self._bwd_t0 = None
