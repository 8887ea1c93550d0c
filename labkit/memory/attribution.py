"""Attribution: the peak broken down by category and by module, and the report that holds it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from labkit._format import fmt_bytes, fmt_time
from labkit.memory.timeline import CATEGORIES, sparkline
from labkit.trace.model import MemoryMeta, MemorySample, Trace

if TYPE_CHECKING:
    from labkit.memory.tracker import MemoryTracker
    from labkit.memory.whatif import WhatIf


def memory_meta(tracker: MemoryTracker, device: str = "cpu") -> MemoryMeta:
    """Freeze a finished tracker's peak, attribution and allocator figures."""
    by_module: dict[str, dict[str, int]] = {}
    for (module, cat), n in sorted(tracker.peak_mod.items()):
        if n:
            by_module.setdefault(module, {})[CATEGORIES[cat]] = n
    fp32: dict[str, int] = {}
    for (_, cat), n in tracker.peak_fp32.items():
        if n:
            fp32[CATEGORIES[cat]] = fp32.get(CATEGORIES[cat], 0) + n
    notes = [
        "bytes are tensor storages (each counted once however many views share it); "
        "buffers count as parameters",
    ]
    if tracker.grads_before:
        notes.append(
            f"the parameters held .grad from an earlier backward "
            f"({fmt_bytes(tracker.grads_before)}) when the step began: counted from the start, "
            "as in a loop that does not call zero_grad(set_to_none=True) before backward"
        )
    if tracker.cuda:
        notes.append(
            "CUDA: the allocator rounds each block up (512 B at least) and keeps freed blocks "
            "reserved; see allocator for its figures"
        )
    if tracker.failed_module is not None:
        where = f"module '{tracker.failed_module}'" if tracker.failed_module else "outside modules"
        notes.append(f"recording ended by an error in {where}: the timeline stops there")
    return MemoryMeta(
        device=device,
        peak_bytes=tracker.peak,
        peak_time=round(tracker.peak_time, 9),
        peak_phase=tracker.peak_phase,
        peak_module=tracker.peak_module,
        peak_where=tracker.peak_where,
        start_bytes=tracker.start_bytes,
        end_bytes=tracker.total,
        peak_by_category={c: n for c, n in zip(CATEGORIES, tracker.peak_cat, strict=True) if n},
        peak_by_module=by_module,
        peak_fp32_by_category=fp32,
        saved_by_module=dict(sorted(tracker.saved_by_module.items())),
        resident_before=tracker.resident_before,
        largest=tuple(tracker.largest()),
        events=len(tracker.events),
        allocator=dict(tracker.cuda or {}),
        failed_module=tracker.failed_module,
        error=tracker.error,
        notes=tuple(notes),
    )


class MemoryReport:
    """Where the bytes of a recorded step went: timeline, peak, attribution, what-if.

    Holds the :class:`~labkit.trace.Trace` (whose ``memory`` and ``memory_meta`` carry
    all figures); every method is a pure function of it.

    Args:
        trace: A trace recorded with memory (``labkit.memory(...)`` or full mode).

    Example:
        >>> import torch, labkit
        >>> import torch.nn.functional as F
        >>> from torch import nn
        >>> model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
        >>> x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))
        >>> opt = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> rep = labkit.memory(model, x, loss=lambda out: F.cross_entropy(out, y), optimizer=opt)
        >>> rep.peak_bytes > 0, len(rep.by_module(top=2))
        (True, 2)
        >>> print(rep.summary())  # doctest: +SKIP
    """

    def __init__(self, trace: Trace) -> None:
        if trace.memory_meta is None:
            raise ValueError(
                "this trace has no memory recording: record it with labkit.memory(...) "
                "or labkit.trace(..., mode='full')"
            )
        self.trace = trace
        self.meta: MemoryMeta = trace.memory_meta

    def __repr__(self) -> str:
        m = self.meta
        return (
            f"MemoryReport(model={self.trace.meta.model}, device={m.device}, "
            f"peak={fmt_bytes(m.peak_bytes)} in {m.peak_phase} at {_where(m)}, "
            f"samples={len(self.trace.memory)})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoryReport) and self.trace == other.trace

    __hash__ = None  # type: ignore[assignment]  # unhashable, as Python spells it

    # ----------------------------------------------------------------- figures
    @property
    def samples(self) -> tuple[MemorySample, ...]:
        """The timeline (``Trace.memory``)."""
        return self.trace.memory

    @property
    def peak_bytes(self) -> int:
        """Most live tensor-storage bytes at any moment."""
        return self.meta.peak_bytes

    @property
    def peak_module(self) -> str:
        """Module running at the peak (``""`` when none)."""
        return self.meta.peak_module

    @property
    def peak_phase(self) -> str:
        """Phase at the peak."""
        return self.meta.peak_phase

    @property
    def allocator(self) -> dict[str, Any]:
        """CUDA allocator figures (empty on CPU)."""
        return self.meta.allocator

    def by_category(self) -> dict[str, int]:
        """Bytes per category at the peak, largest first."""
        return dict(sorted(self.meta.peak_by_category.items(), key=lambda kv: -kv[1]))

    def by_module(self, top: int | None = 10, *, inclusive: bool = False) -> list[dict[str, Any]]:
        """Modules by bytes held at the peak, largest first.

        Args:
            top: How many rows (``None`` for all).
            inclusive: Add each module's descendants to it.

        Returns:
            Rows ``{"module", "bytes", <category>: bytes, ...}``.
        """
        own = {m: dict(c) for m, c in self.meta.peak_by_module.items()}
        if inclusive:
            acc: dict[str, dict[str, int]] = {}
            for path, cats in own.items():
                for anc in _ancestors(path):
                    row = acc.setdefault(anc, {})
                    for c, n in cats.items():
                        row[c] = row.get(c, 0) + n
            own = acc
        rows: list[dict[str, Any]] = [
            {"module": m, "bytes": sum(c.values()), **c} for m, c in own.items()
        ]
        rows.sort(key=lambda r: (-r["bytes"], r["module"]))
        return rows if top is None else rows[:top]

    def live_between(
        self, start: float | None = None, end: float | None = None, top: int = 10
    ) -> list[dict[str, Any]]:
        """The largest storages alive at some moment of ``[start, end]`` (seconds since the
        recording began; default: at the peak), with category, module, op and the Python
        line when recorded with stacks. Drawn from the recording's biggest storages.
        """
        lo = self.meta.peak_time if start is None else start
        hi = lo if end is None else end
        rows = [
            r
            for r in self.meta.largest
            if r["start"] <= hi and (r["end"] is None or r["end"] >= lo)
        ]
        return [dict(r) for r in rows[:top]]

    def saved_by_module(self) -> dict[str, int]:
        """Activation bytes saved for backward per module (each storage once)."""
        return dict(sorted(self.meta.saved_by_module.items(), key=lambda kv: -kv[1]))

    def whatif(self, blocks: list[str] | None = None) -> WhatIf:
        """Estimated savings from activation checkpointing and bf16 activations."""
        from labkit.memory.whatif import whatif

        return whatif(self.trace, blocks=blocks)

    @property
    def process_peak_bytes(self) -> int:
        """The step's peak plus what the inputs' storages held beyond the batch (a dataset
        the batch is sliced from): the process's resident tensor bytes at the peak, as far
        as the step can see them."""
        return self.meta.peak_bytes + self.meta.resident_before

    def summary(self, top: int = 8) -> str:
        """A text report: peak, category breakdown, top modules, allocator, timeline."""
        m = self.meta
        lines = [
            f"{self.trace.meta.model} on {m.device}: step peak {fmt_bytes(m.peak_bytes)} in "
            f"{m.peak_phase}, {_where(m)}, at {fmt_time(m.peak_time)}",
            f"  start {fmt_bytes(m.start_bytes)} -> end {fmt_bytes(m.end_bytes)}",
        ]
        if m.resident_before:
            lines.append(
                f"  resident before the step, not counted: {fmt_bytes(m.resident_before)} "
                "(the inputs' storages beyond the batch, e.g. the dataset it is sliced from); "
                f"process peak {fmt_bytes(self.process_peak_bytes)}"
            )
        lines.append("  at the peak, by category:")
        lines += [f"    {c:<12} {fmt_bytes(n):>12}" for c, n in self.by_category().items()]
        lines.append("  at the peak, by module (self):")
        for r in self.by_module(top):
            cats = ", ".join(f"{c} {fmt_bytes(r[c])}" for c in CATEGORIES if r.get(c))
            lines.append(
                f"    {r['module'] or '(outside modules)':<24} {fmt_bytes(r['bytes']):>12}  {cats}"
            )
        if m.allocator:
            from labkit.memory._cuda import allocator_lines

            lines += allocator_lines(m.allocator)
        live = self.live_between(top=5)
        if live:
            lines.append("  largest storages live at the peak:")
            lines += [
                f"    {fmt_bytes(r['bytes']):>12}  {r['category']:<12} "
                f"{r['module'] or '(outside modules)'} {r['op']} {r['site']}".rstrip()
                for r in live
            ]
        if m.error:
            lines.append(f"  ended by {m.error} in '{m.failed_module}'")
        line = sparkline(self.samples)
        if line:
            lines.append(f"  timeline: {line}")
        lines += [f"  note: {n}" for n in m.notes]
        return "\n".join(lines)

    def show(self, **kwargs: Any) -> Any:
        """The step's graph, per-module profile and memory timeline in linked tabs, opened on
        the timeline and coloured by activation memory; see :class:`labkit.views.TraceView`."""
        from labkit import _display

        return _display.display("memory.show", self, **kwargs)

    # ----------------------------------------------------------------- files
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the underlying trace (versioned JSON)."""
        self.trace.save(path)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> MemoryReport:
        """Read a report written by :meth:`save`."""
        return cls(Trace.load(path))


def _where(m: MemoryMeta) -> str:
    if m.peak_where:
        return m.peak_where
    return f"module '{m.peak_module}'" if m.peak_module else "outside any module"


def _ancestors(path: str) -> list[str]:
    if not path:
        return [""]
    parts = path.split(".")
    return ["", *(".".join(parts[: i + 1]) for i in range(len(parts)))]
