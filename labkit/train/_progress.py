"""Where each forked DDP rank is, so a collective that timed out names the rank that hung.

When one rank hangs (a deadlocked data loader, an endless loop in its forward), the
others wait in the next collective until ``ddp_timeout`` and the first to give up raises:
the error torch reports names the rank that *waited*. :class:`RankProgress` is a few
integers in memory shared with the forked workers; each rank writes ``(step, phase)`` at
two hooks per step (a memory write each, no system call). When a worker's error is a
timeout, :func:`laggards` compares the slots: the ranks behind the furthest are the ones
that did not arrive.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

import lightning.pytorch as pl

PHASES = ("before the step", "in forward", "in backward")
_TIMEOUT_WORDS = ("timed out", "timeout", "time out")


class RankProgress(pl.Callback):
    """Shared ``(step, phase)`` per rank; phase 1: the batch started, 2: backward started.

    Args:
        world_size: Number of ranks (processes) of the fit.
    """

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self._slots: Any = multiprocessing.get_context("fork").Array(
            "q", 2 * world_size, lock=False
        )

    def _mark(self, trainer: pl.Trainer, phase: int) -> None:
        r = trainer.global_rank
        if r < self.world_size:
            self._slots[2 * r] = trainer.global_step
            self._slots[2 * r + 1] = phase

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        self._mark(trainer, 1)

    def on_before_backward(self, trainer: pl.Trainer, *args: object) -> None:
        self._mark(trainer, 2)

    def snapshot(self) -> list[tuple[int, int]]:
        """``(step, phase)`` of every rank, as last written."""
        return [(self._slots[2 * r], self._slots[2 * r + 1]) for r in range(self.world_size)]

    def attach(self, exc: BaseException) -> None:
        """Keep the snapshot on ``exc`` for :func:`labkit.train._launch.worker_error`."""
        exc.labkit_progress = self.snapshot()  # type: ignore[attr-defined]  # carried to the parent

    def __repr__(self) -> str:
        return f"RankProgress(world_size={self.world_size})"


def is_timeout(text: str) -> bool:
    """Whether a worker's error reads like a collective that timed out."""
    low = text.lower()
    return any(w in low for w in _TIMEOUT_WORDS)


def laggards(progress: list[tuple[int, int]]) -> list[int]:
    """Ranks behind the furthest one (empty when all are at the same place)."""
    if not progress:
        return []
    furthest = max(progress)
    return [r for r, p in enumerate(progress) if p < furthest]


def describe(progress: list[tuple[int, int]], rank: int) -> str:
    """``"step 3, in forward"`` for ``rank``."""
    step, phase = progress[rank]
    return f"step {step}, {PHASES[phase] if 0 <= phase < len(PHASES) else 'phase ' + str(phase)}"
