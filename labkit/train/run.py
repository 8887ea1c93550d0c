"""Run: the plain-data record of one ``Lab.fit`` call.

A Run holds the fit's settings, the per-step and per-epoch figures, the checkpoints it
wrote and how it ended. It is plain data (numbers, strings, lists, dicts): it saves to
JSON and loads back equal, and it is built from the same events the live dashboard
reads, so a run that trained in other processes (DDP) is recorded in the kernel too.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RUN_SCHEMA = "labkit.run"
RUN_VERSION = 1
STATUSES = ("created", "running", "finished", "stopped", "failed")


@dataclass
class Run:
    """What one ``Lab.fit`` did, as plain data.

    Args:
        logdir: Directory of the run: ``checkpoints/``, ``tensorboard/``, ``events.jsonl``,
            ``run.json``.
        config: The settings of the fit (max_epochs, devices, strategy, seed, recipe, ...).
        status: One of ``"created"``, ``"running"``, ``"finished"``, ``"stopped"``, ``"failed"``.
        steps: One dict per optimizer step on rank 0: ``step``, ``epoch``, ``loss``,
            ``step_time``, ``data_time``, ``samples`` and the training metrics.
        epochs: One dict per epoch: ``epoch`` plus the epoch-level metrics
            (``train_loss``, ``val_loss``, ...).
        checkpoints: Paths of the checkpoints written, in order.
        traces: Paths of the labkit traces sampled during training.
        error: The error message when ``status == "failed"``.
        notes: Plain sentences about choices labkit made (launch mode, resume, ...).
        ranks: With several processes, one dict per gathering (each epoch end): ``epoch``,
            ``step``, ``ranks`` (per-rank means per step: ``data_time``, ``forward_time``,
            ``backward_time``, ``comm_wait``, ``optimizer_time``, ``comm_time``,
            ``buckets``, ``bucket_bytes``, ...) and ``stragglers`` (see
            ``labkit.train._ranks``).

    Example:
        >>> run = Run(logdir="runs/a", config={"max_epochs": 1})
        >>> run.add_event({"type": "steps", "steps": [{"step": 1, "epoch": 0, "loss": 0.5}]})
        >>> run.losses
        [0.5]
        >>> Run.from_dict(run.to_dict()) == run
        True
    """

    logdir: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    status: str = "created"
    steps: list[dict[str, Any]] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    traces: list[str] = field(default_factory=list)
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    ranks: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._done = threading.Event()
        self._exc: BaseException | None = None
        if self.status in ("finished", "stopped", "failed"):
            self._done.set()

    # ------------------------------------------------------------------ events
    def add_event(self, event: dict[str, Any]) -> None:
        """Fold one training event into the record (see ``labkit.train._events``)."""
        kind = event.get("type")
        if kind == "start":
            self.status = "running"
            if event.get("resumed_from"):
                self.notes.append(f"resumed from {event['resumed_from']}")
        elif kind == "steps":
            for s in event["steps"]:
                # a resumed run repeats no step, but a stop-and-resume may: keep the last
                if self.steps and s["step"] <= self.steps[-1]["step"]:
                    self.steps = [x for x in self.steps if x["step"] < s["step"]]
                self.steps.append(dict(s))
        elif kind == "epoch":
            self.epochs = [e for e in self.epochs if e["epoch"] != event["epoch"]]
            self.epochs.append({k: v for k, v in event.items() if k != "type"})
        elif kind == "checkpoint":
            self.checkpoints.append(event["path"])
        elif kind == "trace":
            self.traces.append(event["path"])
        elif kind == "ranks":
            self.ranks.append({k: v for k, v in event.items() if k != "type"})
        elif kind == "end":
            self.status = event.get("status", "finished")
            self.error = event.get("error")

    # ------------------------------------------------------------------ views
    @property
    def losses(self) -> list[float]:
        """Training loss of every recorded step, in step order."""
        return [s["loss"] for s in self.steps]

    @property
    def stragglers(self) -> list[dict[str, Any]]:
        """Stragglers named at the last per-rank gathering (empty on one process)."""
        return list(self.ranks[-1]["stragglers"]) if self.ranks else []

    def summary(self) -> str:
        """The record in a few lines; with several processes, the per-rank step breakdown."""
        lines = [repr(self)]
        if self.ranks:
            from labkit.train._ranks import advice, table

            last = self.ranks[-1]
            lines += [f"per rank, epoch {last['epoch']} (to step {last['step']}):",
                      table(last["ranks"])]  # fmt: skip
            lines += [s["text"] for s in last["stragglers"]] or [
                f"no straggler (margin {last['margin']:.0%} of the others' median, at "
                f"least {1e3 * last['min_s']:g} ms per step)"]  # fmt: skip
            if not last["stragglers"]:  # a straggler's peers wait for it, not for the network
                rows = last["ranks"]
                lines += advice({k: sum(r[k] for r in rows) / len(rows)
                                 for k in ("step_time", "comm_wait", "data_time")})  # fmt: skip
        if self.error:
            lines.append(f"error: {self.error}")
        return "\n".join(lines)

    @property
    def last_checkpoint(self) -> str | None:
        """The newest checkpoint path, or None."""
        return self.checkpoints[-1] if self.checkpoints else None

    @property
    def done(self) -> bool:
        """Whether the fit has ended (finished, stopped or failed)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> Run:
        """Block until a background fit ends; re-raise its error. Returns ``self``."""
        if not self._done.wait(timeout):
            raise TimeoutError(f"the run in {self.logdir} is still {self.status} after {timeout} s")
        if self._exc is not None:
            raise self._exc
        return self

    def __await__(self) -> Any:
        """``await run`` in a notebook: waits without blocking widget messages."""
        import asyncio

        async def _wait() -> Run:
            while not self._done.is_set():
                await asyncio.sleep(0.1)
            return self.wait()

        return _wait().__await__()

    def _finish(self, exc: BaseException | None = None) -> None:
        self._exc = exc
        self._done.set()

    # ------------------------------------------------------------------ data
    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready plain data."""
        return {
            "schema": RUN_SCHEMA,
            "version": RUN_VERSION,
            "logdir": self.logdir,
            "config": self.config,
            "status": self.status,
            "steps": self.steps,
            "epochs": self.epochs,
            "checkpoints": self.checkpoints,
            "traces": self.traces,
            "error": self.error,
            "notes": self.notes,
            "ranks": self.ranks,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Run:
        """Read :meth:`to_dict` output."""
        if data.get("schema") != RUN_SCHEMA:
            raise ValueError(f"not a labkit run record (schema {data.get('schema')!r})")
        fields = {k: v for k, v in data.items() if k not in ("schema", "version")}
        return cls(**fields)

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the record as JSON, atomically; defaults to ``<logdir>/run.json``."""
        target = Path(path) if path is not None else Path(self.logdir) / "run.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        from labkit._paths import atomic_writer  # temp file, umask's mode, rename

        with atomic_writer(target, "w", what="run record", fsync=False) as fh:
            json.dump(self.to_dict(), fh, indent=1)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Run:
        """Read a record written by :meth:`save` (a file or a run directory)."""
        p = Path(path)
        if p.is_dir():
            p = p / "run.json"
        return cls.from_dict(json.loads(p.read_text()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Run) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]  # unhashable, as Python spells it

    def __repr__(self) -> str:
        last = f", loss={self.steps[-1]['loss']:.4g}" if self.steps else ""
        slow = "".join(f", straggler=rank {s['rank']} ({s['cause']})" for s in self.stragglers)
        return (
            f"Run(status={self.status!r}, steps={len(self.steps)}, epochs={len(self.epochs)}"
            f"{last}, checkpoints={len(self.checkpoints)}{slow}, logdir={self.logdir!r})"
        )
