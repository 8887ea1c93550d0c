"""Plan: a predicted step, the same plain data as a measured one, labelled "predicted"."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from labkit._format import fmt_bytes, fmt_count
from labkit.memory.attribution import MemoryReport
from labkit.trace.model import Trace


@dataclass(frozen=True)
class PlanRequest:
    """What a plan was made of, to plan it again at other batch sizes.

    Args:
        model: The model planned.
        batch: Its inputs as ``(args, kwargs)``.
        options: ``labkit.plan``'s options (loss, optimizer, recipe, device, keep_output).
    """

    model: Any
    batch: tuple[tuple[Any, ...], dict[str, Any]]
    options: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"PlanRequest(model={type(self.model).__name__}, options={sorted(self.options)})"


PREDICTED_NOTE = "predicted on fake tensors (FakeTensorMode): nothing of this size was allocated"


class Plan(MemoryReport):
    """One training step predicted without running it: a :class:`~labkit.trace.Trace` whose
    ``meta.mode`` is ``"plan"``, with the graph, FLOPs per module and the memory timeline.

    Everything a :class:`~labkit.memory.MemoryReport` offers works on it (``peak_bytes``,
    ``by_category()``, ``by_module()``, ``whatif()``), and ``plan.trace`` goes wherever a
    trace goes (``labkit.diff``, views). ``summary()`` and ``show()`` say "predicted".

    Args:
        trace: A trace made by :func:`labkit.plan` (``meta.mode == "plan"``).
        seconds: How long planning took.
        request: What was planned (model, batch, options), for :meth:`max_batch_size`
            (not saved with the file).

    Example:
        >>> import torch, labkit
        >>> from torch import nn
        >>> model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        >>> x = torch.randn(32, 8)
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> p = labkit.plan(model, x, optimizer=opt)
        >>> p.peak_bytes == labkit.memory(model, x, optimizer=opt).peak_bytes  # as measured
        True
        >>> print(p.summary())                                 # doctest: +SKIP
        >>> p.max_batch_size(budget=8 * 2**30)                 # doctest: +SKIP
    """

    def __init__(
        self, trace: Trace, *, seconds: float = 0.0, request: PlanRequest | None = None
    ) -> None:
        if trace.meta.mode != "plan":
            raise ValueError(
                f"this trace was measured (mode={trace.meta.mode!r}), not planned: wrap it in "
                "labkit.MemoryReport, or make a plan with labkit.plan(model, batch)"
            )
        super().__init__(trace)
        self.seconds = seconds
        self.request = request

    def __repr__(self) -> str:
        return (
            f"Plan(model={self.trace.meta.model}, device={self.meta.device}, "
            f"peak={fmt_bytes(self.peak_bytes)} in {self.peak_phase}, "
            f"flops={fmt_count(self.total_flops)})"
        )

    @property
    def total_flops(self) -> int:
        """Forward and backward FLOPs of the step (``FlopCounterMode``'s formulas)."""
        return self.trace.total_flops

    @property
    def peak_where(self) -> str:
        """Where the predicted peak is, in words (module, phase, optimizer step)."""
        m = self.meta
        return m.peak_where or (f"module '{m.peak_module}'" if m.peak_module else m.peak_phase)

    def flops_by_module(self) -> dict[str, tuple[int, int]]:
        """``{module path: (forward FLOPs, backward FLOPs)}``, submodules included, over
        all its calls."""
        t = self.trace
        out: dict[str, tuple[int, int]] = {}
        for n in t.nodes:
            if n.kind == "module":
                f, b = out.get(n.module or "", (0, 0))
                out[n.module or ""] = (
                    f + int(t.total(n.id, "flops_fwd")),
                    b + int(t.total(n.id, "flops_bwd")),
                )
        return out

    def summary(self, top: int = 8) -> str:
        """The memory report's text, headed "predicted", with the step's FLOPs."""
        head = (
            f"PREDICTED step of {self.trace.meta.model} (labkit.plan: fake tensors, nothing "
            f"allocated; planned in {self.seconds:.2f} s)\n"
            f"  FLOPs forward+backward: {fmt_count(self.total_flops)}"
        )
        return head + "\n" + super().summary(top)

    def show(self, **kwargs: Any) -> Any:
        """The graph, profile and memory views of the plan, each tab titled "(predicted)"."""
        from labkit import _display

        return _display.display("plan.show", self, **kwargs)

    def compare(self, measured: MemoryReport) -> dict[str, Any]:
        """Predicted next to measured: peak and each category, with the relative error.

        Args:
            measured: The same step measured with :func:`labkit.memory`.

        Returns:
            ``{"peak": (predicted, measured, error), <category>: (...), ...}``; error is
            ``(predicted - measured) / measured`` (0 when both are 0).
        """
        rows: dict[str, Any] = {"peak": _row(self.peak_bytes, measured.peak_bytes)}
        pc, mc = self.meta.peak_by_category, measured.meta.peak_by_category
        for cat in dict.fromkeys([*pc, *mc]):
            rows[cat] = _row(pc.get(cat, 0), mc.get(cat, 0))
        return rows

    def beside(self, measured: MemoryReport) -> str:
        """A monospace table of :meth:`compare`: predicted, measured and error per row."""
        lines = [f"{'':<12} {'predicted':>12} {'measured':>12} {'error':>8}"]
        for what, (pred, real, err) in self.compare(measured).items():
            lines.append(f"{what:<12} {fmt_bytes(pred):>12} {fmt_bytes(real):>12} {err:>+8.2%}")
        m = measured.meta
        lines.append(
            f"peak where   predicted {self.peak_where}; measured "
            f"{m.peak_where or m.peak_module or m.peak_phase}"
        )
        return "\n".join(lines)

    def max_batch_size(
        self, budget: int | None = None, *, margin: float = 0.08, limit: int = 1 << 20
    ) -> int:
        """The largest batch whose predicted peak fits ``budget``: this plan's model, batch
        and options given to :func:`labkit.plan.max_batch_size`."""
        if self.request is None:
            raise ValueError(
                "this plan cannot re-plan at other batch sizes (loaded from a file, or its "
                "batch has no batch dimension to scale): call "
                "labkit.plan.max_batch_size(model, make_batch, budget=...)"
            )
        from labkit.plan.batch import max_batch_size  # the search plans: it sits above plans

        r = self.request
        args, kwargs = r.batch
        return max_batch_size(
            r.model, args, budget, margin=margin, limit=limit, inputs=kwargs, **r.options
        ).batch

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Plan:
        """Read a plan written by :meth:`save`."""
        return cls(Trace.load(path))


def _row(pred: int, real: int) -> tuple[int, int, float]:
    err = (pred - real) / real if real else (0.0 if pred == 0 else float("inf"))
    return pred, real, err
