"""CUDA caching-allocator figures for a recording: allocated vs reserved, fragmentation, retries."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from labkit._format import fmt_bytes

if TYPE_CHECKING:
    from labkit.memory.tracker import MemoryTracker

HISTORY_ENTRIES = 100_000


class CudaStats:
    """Reads ``torch.cuda.memory_stats`` around a recording (peak counters are reset at begin)."""

    def __init__(self, device: torch.device, history: str | os.PathLike[str] | None = None) -> None:
        self.device = device
        self.history = history
        self._start: dict[str, Any] = {}
        self._recording = False

    def __repr__(self) -> str:
        return f"CudaStats(device={self.device}, history={self.history!r})"

    def begin(self) -> None:
        torch.cuda.synchronize(self.device)
        if self.history is not None:
            # the allocator's own event history with stacks, for pytorch.org/memory_viz
            torch.cuda.memory._record_memory_history(max_entries=HISTORY_ENTRIES)
            self._recording = True
        torch.cuda.reset_peak_memory_stats(self.device)
        self._start = dict(torch.cuda.memory_stats(self.device))

    def stop_history(self) -> str | None:
        """Write the history snapshot (when asked for) and stop recording it."""
        if not self._recording:
            return None
        try:
            path = str(Path(self.history).expanduser())  # type: ignore[arg-type]  # set when recording
            torch.cuda.memory._dump_snapshot(path)
            return path
        finally:
            self._recording = False
            torch.cuda.memory._record_memory_history(enabled=None)

    def end(self, tracker: MemoryTracker) -> dict[str, Any]:
        """Allocator figures since :meth:`begin`, plus what the storage accounting did not see."""
        torch.cuda.synchronize(self.device)
        s = torch.cuda.memory_stats(self.device)
        s0 = self._start
        history = self.stop_history()

        def get(stats: dict[str, Any], key: str) -> int:
            return int(stats.get(key, 0))

        allocated = get(s, "allocated_bytes.all.current")
        reserved = get(s, "reserved_bytes.all.current")
        peak_alloc = get(s, "allocated_bytes.all.peak")
        peak_res = get(s, "reserved_bytes.all.peak")
        return {
            "device": str(self.device),
            "allocated": allocated,
            "reserved": reserved,
            "peak_allocated": peak_alloc,
            "peak_reserved": peak_res,
            # PyTorch's terms: fragmentation is inactive split bytes (free pieces of split
            # blocks, unusable for larger requests) over reserved; reserved - allocated is
            # the cache, free but kept for reuse
            "cached": reserved - allocated,
            "inactive_split_bytes": get(s, "inactive_split_bytes.all.current"),
            "peak_inactive_split_bytes": get(s, "inactive_split_bytes.all.peak"),
            "fragmentation_pct": _pct(get(s, "inactive_split_bytes.all.current"), reserved),
            "peak_fragmentation_pct": _pct(get(s, "inactive_split_bytes.all.peak"), peak_res),
            "largest_free_block": largest_free_block(self.device),
            "alloc_retries": get(s, "num_alloc_retries") - get(s0, "num_alloc_retries"),
            "ooms": get(s, "num_ooms") - get(s0, "num_ooms"),
            "segments": get(s, "segment.all.current"),
            "allocated_at_start": get(s0, "allocated_bytes.all.current"),
            "tracked_peak": tracker.dev_peak,
            "untracked_at_start": get(s0, "allocated_bytes.all.current") - tracker.start_cuda,
            **({"history": history} if history else {}),
        }


def allocator_lines(a: dict[str, Any]) -> list[str]:
    """The allocator's figures for a summary, each with what it means."""
    b = fmt_bytes
    lines = [
        "  CUDA allocator (PyTorch's terms):",
        f"    peak allocated {b(a['peak_allocated'])} (bytes in live tensors' blocks)",
        f"    peak reserved  {b(a['peak_reserved'])} (held from the driver: allocated + cache)",
        f"    cached now     {b(a.get('cached', a['reserved'] - a['allocated']))} "
        "(reserved, free, kept for reuse; not fragmentation)",
        f"    fragmentation  {a['fragmentation_pct']:.1f}% now, {a['peak_fragmentation_pct']:.1f}%"
        " at peak (inactive split bytes / reserved: free pieces of split blocks)",
    ]
    if a.get("alloc_retries") or a.get("ooms"):
        lines.append(
            f"    retries {a.get('alloc_retries', 0)} (cudaMalloc failed, cache flushed "
            f"and retried), OOMs {a.get('ooms', 0)}"
        )
    return lines


def largest_free_block(device: torch.device) -> int:
    """Largest reserved-but-unused block: the biggest tensor that fits without a new cudaMalloc."""
    best = 0
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device") not in (None, device.index if device.index is not None else 0):
            continue
        for block in seg.get("blocks", ()):
            if block.get("state") == "inactive":
                best = max(best, int(block.get("size", 0)))
    return best


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 3) if whole > 0 else 0.0
