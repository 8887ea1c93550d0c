"""Run: the plain-data record of one training run (``Lab.fit`` or a watched loop/trainer).

A Run holds the fit's settings, the per-step and per-epoch figures, the checkpoints it
wrote and how it ended. It is plain data (numbers, strings, lists, dicts): it saves to
JSON and loads back equal, and it is built from the same events the live dashboard
reads, so a run that trained in other processes (DDP) is recorded in the kernel too.
``config["source"]`` says what trained it: ``lab``, ``loop`` (:func:`labkit.watch`),
``lightning`` or ``transformers`` (``labkit.watch.lightning()/.transformers()``).

A Run returned by :func:`labkit.watch` is also the handle of the loop it watches while
that loop runs: ``run.step(loss=...)``, ``run.log(val_loss=...)``, ``run.stop()``, and a
context manager that ends it as ``finished``, ``stopped`` or ``failed``.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit._paths import InputFileError, read_input

RUN_SCHEMA = "labkit.run"
RUN_VERSION = 1
STATUSES = ("created", "running", "finished", "stopped", "failed")
MAX_RUN_BYTES = 256 << 20
"""Largest ``run.json`` :meth:`Run.load` reads (``max_bytes=`` raises it)."""

# each field of a run record and the JSON type it must have
_TYPES: dict[str, tuple[type, ...]] = {
    "logdir": (str,),
    "config": (dict,),
    "status": (str,),
    "steps": (list,),
    "epochs": (list,),
    "checkpoints": (list,),
    "traces": (list,),
    "error": (str, type(None)),
    "notes": (list,),
    "ranks": (list,),
    "started": (int, float, type(None)),
    "ended": (int, float, type(None)),
    "flops": (dict,),
}
_ITEMS: dict[str, type] = {
    "steps": dict,
    "epochs": dict,
    "checkpoints": str,
    "traces": str,
    "notes": str,
    "ranks": dict,
}


class RunFileError(ValueError):
    """A run record cannot be read; the message names the file and the field."""


class RunStopped(Exception):
    """Raised by ``run.step`` after Stop was asked; a ``with labkit.watch(...)`` block ends
    on it as a ``stopped`` run (nothing recorded is lost)."""


class RunClosedError(RuntimeError):
    """``run.step``/``run.log`` on a Run that is not a watched loop's, or whose loop ended."""


def read_json(path: Path, *, what: str, max_bytes: int) -> Any:
    """Parse a JSON file checked by :func:`labkit._paths.read_input`; errors name the file.

    Raises:
        RunFileError: the file is missing, not a regular file, too large, not UTF-8 or
            not valid (or too deeply nested) JSON.
    """
    try:
        text = read_input(path, what=what, max_bytes=max_bytes).decode("utf-8")
        return json.loads(text)
    except InputFileError as exc:
        raise RunFileError(str(exc)) from exc
    except UnicodeDecodeError as exc:
        raise RunFileError(
            f"{path}: the {what} is not UTF-8 text ({exc.reason} at byte "
            f"{exc.start}); the file is corrupt"
        ) from None
    except json.JSONDecodeError as exc:
        raise RunFileError(
            f"{path}: the {what} is not valid JSON (line {exc.lineno}, column {exc.colno}: "
            f"{exc.msg}); the file is truncated or corrupt"
        ) from None
    except RecursionError:
        raise RunFileError(f"{path}: the {what} nests too deeply to be one") from None


def _fields(data: Any, source: str) -> dict[str, Any]:
    """The constructor arguments in a run record's data, each checked (unknown keys dropped)."""
    if not isinstance(data, dict):
        raise RunFileError(
            f"{source}: a run record is a JSON object, this file holds a {_json_type(data)}"
        )
    if data.get("schema") != RUN_SCHEMA:
        raise RunFileError(
            f"{source}: not a labkit run record (field schema is "
            f"{data.get('schema')!r}, not {RUN_SCHEMA!r})"
        )
    version = data.get("version")
    if type(version) is not int or version != RUN_VERSION:  # True == 1 but is no version
        raise RunFileError(
            f"{source}: field version is {version!r}; this labkit reads run "
            f"records of version {RUN_VERSION}"
        )
    out: dict[str, Any] = {}
    for name, types in _TYPES.items():
        if name not in data:
            continue
        value: Any = data[name]
        if not isinstance(value, types):
            want = " or ".join(_json_type(t()) if t is not type(None) else "null" for t in types)
            raise RunFileError(
                f"{source}: field {name} is {_json_type(value)} {_cut(value)}; "
                f"a run record's {name} is {want}"
            )
        item = _ITEMS.get(name)
        if item is not None:
            items: list[Any] = data[name]
            bad = next((i for i, x in enumerate(items) if not isinstance(x, item)), None)
            if bad is not None:
                raise RunFileError(
                    f"{source}: field {name}[{bad}] is {_json_type(items[bad])} "
                    f"{_cut(items[bad])}; each is a {_json_type(item())}"
                )
        out[name] = value
    if "status" in out and out["status"] not in STATUSES:
        raise RunFileError(f"{source}: field status is {out['status']!r}; one of {STATUSES}")
    for i, s in enumerate(out.get("steps", [])):
        if not isinstance(s.get("step"), int) or isinstance(s.get("step"), bool):
            raise RunFileError(
                f"{source}: field steps[{i}].step is {s.get('step')!r}; "
                "each step has an integer step"
            )
    return out


def _json_type(value: Any) -> str:
    names = {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def _cut(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
        started: Wall-clock time the training started (seconds since the epoch), or None.
        ended: Wall-clock time the fit ended, or None.
        ranks: With several processes, one dict per gathering (each epoch end): ``epoch``,
            ``step``, ``ranks`` (per-rank means per step: ``data_time``, ``forward_time``,
            ``backward_time``, ``comm_wait``, ``optimizer_time``, ``comm_time``,
            ``buckets``, ``bucket_bytes``, ...) and ``stragglers`` (see
            ``labkit.train._ranks``).
        flops: FLOPs of one training step, counted once (``Lab.fit``: the first step on
            rank 0, by ``FlopCounterMode``): ``flops``, ``step``, ``device``,
            ``device_name``, ``dtype`` and ``how``; empty when not counted. The summary
            states achieved FLOP/s over the median step time (and MFU on a CUDA device
            whose peak labkit knows): :meth:`utilization`.

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
    started: float | None = None
    ended: float | None = None
    flops: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._done = threading.Event()
        self._exc: BaseException | None = None
        self._live: Any = None  # the watch of a loop still running (labkit.watch)
        if self.status in ("finished", "stopped", "failed"):
            self._done.set()

    # ------------------------------------------------------------------ events
    def add_event(self, event: dict[str, Any]) -> None:
        """Fold one training event into the record (see ``labkit.train._events``)."""
        kind = event.get("type")
        if kind == "start":
            self.status = "running"
            if self.started is None and isinstance(event.get("t"), int | float):
                self.started = float(event["t"])
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
        elif kind == "optimizer":
            self._optimizer_event(event)
        elif kind == "flops":
            self.flops = {k: v for k, v in event.items() if k not in ("type", "t")}
        elif kind == "end":
            self.status = event.get("status", "finished")
            self.error = event.get("error")
            if isinstance(event.get("t"), int | float):
                self.ended = float(event["t"])

    def _optimizer_event(self, event: dict[str, Any]) -> None:
        """The lr the optimizer really had at the first step (and its class)."""
        before = self.config.get("lr")
        if isinstance(before, int | float) and before != event["lr"]:
            self.notes.append(
                f"the optimizer trained at lr={event['lr']} (its param groups at "
                f"the first step), not the lr argument {before}"
            )
        self.config["lr"] = event["lr"]
        if self.config.get("optimizer") is None:
            self.config["optimizer"] = event.get("optimizer")

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
            lines += [
                f"per rank, epoch {last['epoch']} (to step {last['step']}):",
                table(last["ranks"]),
            ]
            lines += [s["text"] for s in last["stragglers"]] or [
                f"no straggler (margin {last['margin']:.0%} of the others' median, at "
                f"least {1e3 * last['min_s']:g} ms per step)"
            ]
            if not last["stragglers"]:  # a straggler's peers wait for it, not for the network
                rows = last["ranks"]
                lines += advice(
                    {
                        k: sum(r[k] for r in rows) / len(rows)
                        for k in ("step_time", "comm_wait", "data_time")
                    }
                )
        util = self.utilization()[2]
        if util:
            lines.append(f"utilization: {util}")
        if self.error:
            lines.append(f"error: {self.error}")
        return "\n".join(lines)

    def utilization(self) -> tuple[float | None, float | None, str]:
        """``(FLOP/s, MFU, sentence)``: the step's counted FLOPs over the median compute time
        of the steps not counted (the counted one ran with the counter's cost); ``(None,
        None, "")`` when no FLOPs were counted (a watched loop). MFU only on CUDA devices in
        labkit's table of peaks (:mod:`labkit._utilization`)."""
        f = self.flops
        if not f:
            return None, None, ""
        if not f.get("flops"):
            return None, None, str(f.get("how") or "no FLOPs counted for the step")
        times = [
            s["compute_time"]
            for s in self.steps
            if s.get("step") != f.get("step") and s.get("compute_time")
        ]
        if not times:
            return None, None, "no FLOP/s: no step ran besides the one whose FLOPs were counted"
        from statistics import median

        from labkit._utilization import utilization

        per = " per process" if int(self.config.get("processes") or 1) > 1 else ""
        return utilization(
            int(f["flops"]),
            median(times),
            str(f.get("device", "cpu")),
            str(f.get("device_name", "")),
            str(f.get("dtype", "fp32")),
            counted=str(f.get("how", "one step")),
            over=f"the median compute time of {len(times)} other steps{per}",
        )

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

    # ------------------------------------------------------------------ a watched loop
    def _watch(self, what: str) -> Any:
        live = self._live
        if live is None:
            if self.config.get("source", "lab") == "loop":
                raise RunClosedError(
                    f"{what} after the watched loop ended ({self.status}); start a new one "
                    "with labkit.watch(model, optimizer) for more steps"
                )
            raise RunClosedError(
                f"{what} is for a loop watched with labkit.watch(model, optimizer); this Run "
                f"records a {self.config.get('source', 'lab')} run"
            )
        return live

    @property
    def source(self) -> str:
        """What trained it: ``lab``, ``loop``, ``lightning`` or ``transformers``."""
        return str(self.config.get("source", "lab"))

    def step(self, loss: Any = None, **metrics: Any) -> None:
        """Record one optimizer step of a watched loop (see :func:`labkit.watch`).

        Args:
            loss: The step's loss: a scalar tensor (read lazily, no sync per step) or float.
            **metrics: More scalar figures of the step (tensors or floats); ``epoch=`` and
                ``samples=`` (the batch size, for throughput) are the step's epoch and size.

        Raises:
            RunStopped: Stop was asked (the dashboard's button, ``run.stop()``).
            RunClosedError: the loop's block has ended.
            TypeError, ValueError: no loss, a non-scalar loss, a Python int loss.
        """
        live = self._live  # the common case without a call more (once per optimizer step)
        (live if live is not None else self._watch("run.step")).step(loss, metrics)

    def log(self, **metrics: Any) -> None:
        """Record evaluation figures (``val_loss=...``) at the current step of a watched loop."""
        self._watch("run.log").log(metrics)

    def stop(self) -> None:
        """Ask a watched loop to stop: its next ``run.step`` raises :class:`RunStopped`."""
        self._watch("run.stop").request_stop()

    def close(self, exc: BaseException | None = None) -> None:
        """End a watched loop's run (``finished``, or ``stopped``/``failed`` by ``exc``);
        a ``with`` block does it. Idempotent."""
        live = self._live
        if live is not None:
            live.close(exc)

    def __enter__(self) -> Run:
        self._watch("with run")
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> bool:
        self.close(exc)
        return isinstance(exc, RunStopped)  # a Stop ends the block, not the program

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
            "started": self.started,
            "ended": self.ended,
            "flops": self.flops,
        }

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "<dict>") -> Run:
        """Read :meth:`to_dict` output; keys this labkit does not know are ignored.

        Raises:
            RunFileError: naming ``source`` and the field when the data is not a run record.
        """
        return cls(**_fields(data, source))

    def save(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the record as JSON, atomically; defaults to ``<logdir>/run.json``.

        Beside a ``run.json`` goes ``series.bin``: the record without its steps plus the
        steps as columns, which :func:`labkit.runs` reads without parsing the JSON.
        """
        target = Path(path) if path is not None else Path(self.logdir) / "run.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        from labkit._paths import atomic_writer  # temp file, umask's mode, rename
        from labkit.train.run_table import write_series

        with atomic_writer(target, "w", what="run record", fsync=False) as fh:
            json.dump(self.to_dict(), fh, indent=1)
        if target.name == "run.json":  # a run folder: labkit.runs reads its columns
            write_series(self, target.parent)
        return target

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, max_bytes: int = MAX_RUN_BYTES) -> Run:
        """Read a record written by :meth:`save` (a file or a run directory).

        Args:
            path: ``run.json`` or the run's logdir.
            max_bytes: Largest file read; larger ones are refused unread.

        Raises:
            RunFileError: naming the file (and the field) when it is missing, not a regular
                file, too large, not JSON or not a run record.
        """
        p = Path(path)
        if p.is_dir():
            p = p / "run.json"
        return cls.from_dict(read_json(p, what="run record", max_bytes=max_bytes), source=str(p))

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
