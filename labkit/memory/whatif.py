"""What-if: estimated peak savings from activation checkpointing per block and bf16 activations.

Estimates from one recorded step, to show beside what ``labkit.optimize`` measures:

- **checkpointing a block** drops the activations it saves for backward, except its
  input, which the checkpoint keeps; backward recomputes the block (one extra forward
  of it). Checkpointing several blocks keeps one block's activations at a time.
- **bf16 activations** (autocast) halve the float32 activations and temporaries alive
  at the peak, and add a bf16 copy of matmul/conv weights saved for backward. An upper
  bound: ops autocast keeps in float32 (a residual add with a float32 input, softmax,
  norms) do not halve, and the peak may move.

Savings only count where the peak holds those bytes: a peak in the optimizer step is
not lowered by either.
"""

from __future__ import annotations

from dataclasses import dataclass

from labkit._format import fmt_bytes, fmt_count, fmt_time
from labkit.trace.model import Trace

_CAST_TYPES = ("Linear", "Conv1d", "Conv2d", "Conv3d", "Bilinear", "LazyLinear")


@dataclass(frozen=True)
class Estimate:
    """One what-if estimate.

    Args:
        name: What would change, e.g. ``"checkpoint 'layers.0'"`` or ``"bf16 activations"``.
        kind: ``"checkpoint"`` or ``"bf16"``.
        saving: Estimated bytes off the peak.
        peak_after: Estimated peak afterwards.
        extra_time: Estimated extra seconds per step (the block's forward time, when the
            trace has times; 0 for bf16 and for untimed memory recordings).
        extra_flops: Forward FLOPs recomputed per step (from the trace's FLOPs).
        note: How it was estimated.

    Example:
        >>> e = rep.whatif().get("bf16 activations (autocast)")   # doctest: +SKIP
        >>> e.saving, e.peak_after                                 # doctest: +SKIP
    """

    name: str
    kind: str
    saving: int
    peak_after: int
    extra_time: float = 0.0
    extra_flops: int = 0
    note: str = ""


@dataclass(frozen=True)
class WhatIf:
    """Estimates for one recorded step; ``labkit.optimize`` measures the same changes.

    Args:
        peak: The recorded peak in bytes.
        estimates: One :class:`Estimate` per change, largest saving first.

    Example:
        >>> import torch, labkit
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        >>> w = labkit.memory(model, torch.randn(2, 4)).whatif()
        >>> [e.name for e in w.estimates]
        ['bf16 activations (autocast)']
        >>> print(w.table())                         # doctest: +SKIP
    """

    peak: int
    estimates: tuple[Estimate, ...]

    def __repr__(self) -> str:
        best = self.estimates[0] if self.estimates else None
        tail = f", best={best.name!r} -{fmt_bytes(best.saving)}" if best else ""
        return f"WhatIf(peak={fmt_bytes(self.peak)}, estimates={len(self.estimates)}{tail})"

    def get(self, name: str) -> Estimate:
        """The estimate called ``name``."""
        for e in self.estimates:
            if e.name == name:
                return e
        raise KeyError(f"no estimate {name!r}; have {[e.name for e in self.estimates]}")

    def table(self) -> str:
        """Text table: change, saving, peak after, extra compute (time when known, FLOPs)."""
        rows = [f"{'change':<36} {'saving':>11} {'peak after':>11} {'extra compute':>14}"]
        for e in self.estimates:
            extra = (
                fmt_time(e.extra_time)
                if e.extra_time
                else f"{fmt_count(e.extra_flops)}FLOP"
                if e.extra_flops
                else "-"
            )
            rows.append(
                f"{e.name:<36} {fmt_bytes(e.saving):>11} {fmt_bytes(e.peak_after):>11} {extra:>14}"
            )
        return "\n".join(rows)


def whatif(trace: Trace, blocks: list[str] | None = None) -> WhatIf:
    """Estimate checkpointing (per block, and all blocks together) and bf16 savings.

    Args:
        trace: A trace with a memory recording.
        blocks: Module paths to consider for checkpointing; by default the modules with
            children at depth 1 and 2 that save activations.

    Returns:
        A :class:`WhatIf`.
    """
    meta = trace.memory_meta
    if meta is None:
        raise ValueError("this trace has no memory recording: use labkit.memory(...) first")
    peak = meta.peak_bytes
    acts_at_peak = meta.peak_by_category.get("activations", 0)
    lowers = meta.peak_phase in ("forward", "backward")
    saved = meta.saved_by_module
    parents = {m.path.rsplit(".", 1)[0] if "." in m.path else "" for m in trace.modules if m.path}
    if blocks is None:
        blocks = [
            m.path
            for m in trace.modules
            if 1 <= m.depth <= 2 and m.path in parents and _subtree(saved, m.path) > 0
        ]
    out: list[Estimate] = []
    per: list[tuple[int, int]] = []
    for path in blocks:
        calls = trace.calls_of(path)
        if not calls:
            continue
        inner = _subtree(saved, path)
        kept = sum(t.nbytes for c in calls for t in c.inputs)
        raw = max(0, inner - kept)
        saving = min(raw, acts_at_peak) if lowers else 0
        per.append((saving, inner))
        extra = sum(c.fwd_time for c in calls)
        flops = int(sum(trace.total(c.id, "flops_fwd") for c in calls))
        out.append(
            Estimate(
                f"checkpoint '{path}'",
                "checkpoint",
                saving,
                peak - saving,
                extra,
                flops,
                f"saves {fmt_bytes(inner)} for backward, keeps its input {fmt_bytes(kept)}",
            )
        )
    if len(per) > 1:
        total = sum(s for s, _ in per) - max(i for _, i in per)
        total = max(0, min(total, acts_at_peak)) if lowers else 0
        extra = sum(e.extra_time for e in out)
        flops = sum(e.extra_flops for e in out)
        out.append(
            Estimate(
                f"checkpoint all {len(per)} blocks",
                "checkpoint",
                total,
                peak - total,
                extra,
                flops,
                "one block's activations are rebuilt at a time",
            )
        )
    fp32 = meta.peak_fp32_by_category
    halved = (fp32.get("activations", 0) + fp32.get("temporaries", 0)) // 2 if lowers else 0
    weights = sum(m.param_bytes for m in trace.modules if m.type in _CAST_TYPES and m.calls)
    bf16 = max(0, halved - weights // 2)
    note = (
        f"half of {fmt_bytes(2 * halved)} float32 activations and temporaries at the peak, "
        f"less bf16 weight copies {fmt_bytes(weights // 2)}"
    )
    out.append(Estimate("bf16 activations (autocast)", "bf16", bf16, peak - bf16, note=note))
    out.sort(key=lambda e: -e.saving)
    return WhatIf(peak, tuple(out))


def _subtree(saved: dict[str, int], path: str) -> int:
    prefix = path + "."
    return sum(n for m, n in saved.items() if m == path or m.startswith(prefix))
