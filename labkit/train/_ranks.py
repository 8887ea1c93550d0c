"""Per-rank step breakdown of a multi-process fit, and the stragglers it names.

Every rank times each step at Lightning's hooks (a ``perf_counter`` read each, no
collective): waiting for data (the previous step's end to this batch's start), forward,
backward, optimizer, and the gradient communication, through a DDP communication hook
that wraps the default all-reduce (``ddp_comm_hooks.default_hooks.allreduce_hook``) and
notes when each bucket was launched and when its future completed, with the bucket count
and bytes. Two communication figures come out of it:

- ``comm_wait``: the part of backward spent waiting for the all-reduce after the last
  bucket was launched (the communication not hidden behind backward compute, including
  waiting for a slower peer to send its gradients);
- ``comm_time``: the buckets' time in flight, launch to completion (it overlaps backward).

``backward_time`` is backward without ``comm_wait``, so ``data_time + forward_time +
backward_time + comm_wait + optimizer_time`` covers the step up to Lightning's own work
between hooks. On CUDA (NCCL) ``comm_time`` comes from CUDA events recorded in the hook
and its future, resolved one step later (never a synchronize per bucket); the host
clocks then measure launch, not GPU, time for the other figures.

Rank 0 gathers the ranks' sums at each epoch end in one collective
(``torch.distributed.all_gather`` of one vector per rank) and emits a ``ranks`` event.
Synchronous DDP makes every rank's wall step equal (a fast rank waits in the all-reduce),
so a straggler is found by its own work: a rank whose median step's own work (the step
without ``comm_wait``) exceeds the median of the other ranks' by ``margin`` (a fraction,
and at least ``min_s``) is named with the part whose mean exceeds most (``"data wait"``
or ``"compute"``) and the ranks that waited for it in the all-reduce.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

SUMS = (
    "step_time",
    "data_time",
    "forward_time",
    "backward_time",
    "optimizer_time",
    "comm_wait",
    "comm_time",
    "buckets",
    "bucket_bytes",
)
MARGIN = 0.20  # a straggler's own work exceeds the others' median by 20% ...
MIN_S = 0.005  # ... and by at least 5 ms per step (a busy shared CPU jitters by a few ms)
SKIP = 1  # steps left out at a fit's start: DDP builds its buckets in the first
CAUSES = {"data_time": "data wait", "compute_time": "compute"}


class RankStats(pl.Callback):
    """Times every step on every rank; rank 0 gathers the means at epoch ends.

    Args:
        sink: Receives the ``ranks`` events (rank 0 only).
        margin: Straggler margin, a fraction of the other ranks' median own work per step.
        min_s: Straggler margin's floor in seconds per step.
        skip: Steps left out at the fit's start (DDP builds its buckets in the first one).
        logdir: Run directory: every rank appends its own figures to
            ``<logdir>/ranks/rank_<N>.jsonl`` at each gathering (kept if rank 0 dies).

    Example:
        >>> RankStats(print)
        RankStats(margin=0.2, min_s=0.005, skip=1)
    """

    def __init__(
        self,
        sink: Callable[[dict[str, Any]], None],
        *,
        margin: float = MARGIN,
        min_s: float = MIN_S,
        skip: int = SKIP,
        logdir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.sink = sink
        self.logdir = Path(logdir) if logdir is not None else None
        self.margin = margin
        self.min_s = min_s
        self.skip = skip
        self.hooked = False
        self._sums = dict.fromkeys(SUMS, 0.0)
        self._n = 0
        self._own: list[float] = []  # each step's own work (data + compute), for its median
        self._seen = 0
        self._t = [0.0] * 5  # previous end, start, before backward, after backward, before opt
        self._launches: list[float] = []  # host launch times of this step's buckets
        self._done: list[float] = []  # host completion times (gloo/CPU)
        self._events: list[Any] = []  # this step's CUDA (start, end) event pairs
        self._last_events: list[Any] = []  # the previous step's, resolved this step
        self._bytes = 0
        self._active = False

    # ------------------------------------------------------------------ comm hook
    # no annotations: DDP checks them against dist.GradBucket, and they are strings here
    def _hook(self, process_group, bucket):  # type: ignore[no-untyped-def]
        """The default all-reduce (``default_hooks.allreduce_hook``: divide, all-reduce),
        noting the launch, the completion (host clock, or CUDA events) and the bytes."""
        import torch.distributed as dist

        group = process_group if process_group is not None else dist.group.WORLD
        assert group is not None  # DDP calls the hook only once the default group exists
        buf = bucket.buffer()
        self._bytes += buf.numel() * buf.element_size()
        self._launches.append(time.perf_counter())
        pair: list[Any] = []
        if buf.is_cuda:
            pair.append(torch.cuda.Event(enable_timing=True))
            pair[0].record()
            pair.append(None)
            self._events.append(pair)
        buf.div_(group.size())
        # the process group's own allreduce: what dist.all_reduce calls, without its
        # Python checks (they cost more than the rest of the hook on a slow CPU)
        fut = group.allreduce([buf]).get_future()
        if pair:

            def cuda_done(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
                end = torch.cuda.Event(enable_timing=True)
                end.record()  # on the stream the all-reduce result is synchronised with
                pair[1] = end
                return f.value()[0]

            return fut.then(cuda_done)
        done = self._done

        def host_done(f: torch.futures.Future[list[torch.Tensor]]) -> torch.Tensor:
            done.append(time.perf_counter())
            return f.value()[0]

        return fut.then(host_done)  # one callback, as allreduce_hook has

    # ------------------------------------------------------------------ hooks
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._active = trainer.world_size > 1
        model = trainer.strategy.model
        if self._active and isinstance(model, torch.nn.parallel.DistributedDataParallel):
            try:
                model.register_comm_hook(model.process_group, self._hook)
                self.hooked = True
            except RuntimeError:  # the strategy already has a comm hook (ddp_comm_hook=...)
                self.hooked = False

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._t[0] = time.perf_counter()

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        self._t[1] = time.perf_counter()
        self._launches.clear()
        self._done.clear()
        self._bytes = 0

    def on_before_backward(self, trainer: pl.Trainer, *args: object) -> None:
        self._t[2] = time.perf_counter()

    def on_after_backward(self, trainer: pl.Trainer, *args: object) -> None:
        self._t[3] = time.perf_counter()

    def on_before_optimizer_step(self, trainer: pl.Trainer, *args: object) -> None:
        self._t[4] = time.perf_counter()

    def on_train_batch_end(self, trainer: pl.Trainer, *args: object) -> None:
        now = time.perf_counter()
        prev, start, before_bwd, after_bwd, before_opt = self._t
        self._t[0] = now
        self._seen += 1
        if not self._active or self._seen <= self.skip:
            self._events, self._last_events = [], self._events
            return
        wait = max(0.0, after_bwd - self._launches[-1]) if self._launches else 0.0
        wait = min(wait, after_bwd - before_bwd)
        s = self._sums
        s["step_time"] += now - prev
        s["data_time"] += start - prev
        s["forward_time"] += before_bwd - start
        s["backward_time"] += after_bwd - before_bwd - wait
        s["optimizer_time"] += now - before_opt
        s["comm_wait"] += wait
        s["comm_time"] += self._in_flight()
        s["buckets"] += len(self._launches)
        s["bucket_bytes"] += self._bytes
        self._own.append(now - prev - wait)
        self._n += 1

    def _in_flight(self) -> float:
        """This step's bucket time in flight (host clock), or the previous step's CUDA time."""
        if not self._events and not self._last_events:
            return sum(d - t for t, d in zip(self._launches, self._done, strict=False))
        total = 0.0
        pairs = [p for p in self._last_events if p[1] is not None]
        if pairs:
            pairs[-1][1].synchronize()  # one wait per step, on a step that has ended
            total = sum(a.elapsed_time(b) for a, b in pairs) / 1000.0
        self._events, self._last_events = [], self._events
        return total

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._gather(trainer)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._n:  # steps since the last epoch end (a fit stopped by max_steps mid-epoch)
            self._gather(trainer)

    def _gather(self, trainer: pl.Trainer) -> None:
        """One ``all_gather`` of every rank's sums; rank 0 emits the ``ranks`` event."""
        if not self._active:
            return
        own = statistics.median(self._own) if self._own else 0.0
        self._write_own(trainer, own)
        vec = torch.tensor(
            [float(self._n), own, *self._sums.values()],
            dtype=torch.float64,
            device=trainer.strategy.root_device,
        )
        parts = [torch.empty_like(vec) for _ in range(trainer.world_size)]
        torch.distributed.all_gather(parts, vec)  # the one collective of the gathering
        rows = torch.stack(parts).cpu().tolist()
        self._sums = dict.fromkeys(SUMS, 0.0)
        self._n = 0
        self._own = []
        if not trainer.is_global_zero:
            return
        ranks = [per_rank(r, row) for r, row in enumerate(rows)]
        self.sink(
            {
                "type": "ranks",
                "t": time.time(),
                "epoch": trainer.current_epoch,
                "step": trainer.global_step,
                "comm_hook": self.hooked,
                "margin": self.margin,
                "min_s": self.min_s,
                "ranks": ranks,
                "stragglers": stragglers(ranks, margin=self.margin, min_s=self.min_s),
            }
        )

    def _write_own(self, trainer: pl.Trainer, own: float) -> None:
        """This rank's figures, appended to its own file (one line per gathering)."""
        if self.logdir is None:
            return
        row = per_rank(trainer.global_rank, [float(self._n), own, *self._sums.values()])
        path = self.logdir / "ranks" / f"rank_{trainer.global_rank}.jsonl"
        with contextlib.suppress(OSError):  # a full disk must not stop the fit here
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as fh:
                fh.write(
                    json.dumps({"epoch": trainer.current_epoch, "step": trainer.global_step, **row})
                    + "\n"
                )

    def __repr__(self) -> str:
        return f"RankStats(margin={self.margin}, min_s={self.min_s}, skip={self.skip})"


def per_rank(rank: int, row: list[float]) -> dict[str, Any]:
    """A rank's gathered vector ``[steps, median own work, *sums]`` as per-step means."""
    n = int(row[0])
    d: dict[str, Any] = {"rank": rank, "steps": n, "own_median": row[1]}
    for name, total in zip(SUMS, row[2:], strict=True):
        d[name] = total / n if n else 0.0
    d["buckets"] = round(d["buckets"], 3)
    d["bucket_bytes"] = round(d["bucket_bytes"])
    d["compute_time"] = d["forward_time"] + d["backward_time"] + d["optimizer_time"]
    return d


def stragglers(
    ranks: list[dict[str, Any]], *, margin: float = MARGIN, min_s: float = MIN_S
) -> list[dict[str, Any]]:
    """Ranks whose own work per step exceeds the other ranks' median, with the cause.

    Args:
        ranks: Per-rank figures (:func:`per_rank`): ``own_median`` (the median step's own
            work, data + compute; without it the means' sum), ``data_time``,
            ``compute_time``, ``comm_wait`` (means per step).
        margin: Fraction of the others' median own work to exceed.
        min_s: The excess must also be at least this many seconds per step.

    Returns:
        One dict per straggler: ``rank``, ``cause`` (``"data wait"`` or ``"compute"``),
        ``excess`` (seconds per step over the others' median), ``own`` and ``others``
        (own work per step, its and the others' median), ``waited_by`` (ranks whose
        all-reduce wait is at least half the excess) and ``text``, a sentence.

    Example:
        >>> r = [{"rank": 0, "data_time": 0.001, "compute_time": 0.01, "comm_wait": 0.03},
        ...      {"rank": 1, "data_time": 0.031, "compute_time": 0.01, "comm_wait": 0.0}]
        >>> stragglers(r)[0]["cause"]
        'data wait'
    """
    out = []
    for me in ranks:
        others = [r for r in ranks if r["rank"] != me["rank"] and r.get("steps", 1)]
        if not others or not me.get("steps", 1):
            continue

        def med(key: str, rows: list[dict[str, Any]] = others) -> float:
            return statistics.median(r[key] for r in rows)

        own = _own(me)
        base = statistics.median(_own(r) for r in others)
        excess = own - base
        if excess <= max(margin * base, min_s):
            continue
        parts = {k: me[k] - med(k) for k in CAUSES}
        key = max(parts, key=parts.__getitem__)
        waited = [r["rank"] for r in others if r["comm_wait"] >= excess / 2]
        text = (
            f"rank {me['rank']} is a straggler: {1e3 * own:.1f} ms/step of its own work vs "
            f"{1e3 * base:.1f} ms on the others (median), +{1e3 * excess:.1f} ms, mostly "
            f"{CAUSES[key]} (+{1e3 * parts[key]:.1f} ms)"
        )
        if waited:
            w = ", ".join(str(r) for r in waited)
            ms = 1e3 * med("comm_wait", [r for r in others if r["rank"] in waited])
            who = f"ranks {w} wait" if len(waited) > 1 else f"rank {w} waits"
            text += f"; {who} for it in the all-reduce ({ms:.1f} ms/step)"
        out.append(
            {
                "rank": me["rank"],
                "cause": CAUSES[key],
                "excess": excess,
                "own": own,
                "others": base,
                "waited_by": waited,
                "text": text,
            }
        )
    return out


def _own(r: dict[str, Any]) -> float:
    """A rank's own work per step: the median step's, else the mean data + compute."""
    if r.get("own_median"):
        return float(r["own_median"])
    return float(r["data_time"] + r["compute_time"])


def table(ranks: list[dict[str, Any]]) -> str:
    """Per-rank means as a monospace table (milliseconds per step)."""
    cols = (
        "step_time",
        "data_time",
        "forward_time",
        "backward_time",
        "comm_wait",
        "optimizer_time",
        "comm_time",
    )
    heads = ("step", "data", "forward", "backward", "comm wait", "optimizer", "in flight")
    lines = ["rank " + " ".join(f"{h:>10}" for h in heads) + "    buckets       bytes"]
    for r in ranks:
        cells = " ".join(f"{1e3 * r[c]:>10.2f}" for c in cols)
        lines.append(f"{r['rank']:>4} {cells} {r['buckets']:>10.1f} {r['bucket_bytes']:>11,}")
    return "\n".join(lines) + "\n(ms per step, means over the epoch's steps after warm-up)"


def advice(r: dict[str, Any], *, share: float = 0.25) -> list[str]:
    """What to try when all-reduce wait or data wait takes over ``share`` of the step.

    Args:
        r: Means per step: ``step_time``, ``comm_wait``, ``data_time``.
        share: The share of the step above which a part is called dominant.

    Returns:
        Sentences (empty when neither dominates).

    Example:
        >>> advice({"step_time": 0.01, "comm_wait": 0.004, "data_time": 0.0})[0][:33]
        'waiting for the all-reduce is 40%'
    """
    out = []
    step = r.get("step_time") or 0.0
    if step and r.get("comm_wait", 0.0) / step > share:
        out.append(
            f"waiting for the all-reduce is {r['comm_wait'] / step:.0%} of the step: compare "
            "runs with Lightning's DDPStrategy(bucket_cap_mb=..., gradient_as_bucket_view=True, "
            "static_graph=True, ddp_comm_hook=default_hooks.bf16_compress_hook), fewer "
            "all-reduces through trainer_kwargs={'accumulate_grad_batches': k}, or a larger "
            "batch per process; find_unused_parameters=True adds a graph walk per step"
        )
    if step and r.get("data_time", 0.0) / step > share:
        out.append(
            f"waiting for data is {r['data_time'] / step:.0%} of the step: load in workers "
            "(Lab(num_workers=N)) and pin memory for a GPU (DataLoader(pin_memory=True))"
        )
    return out


PARTS = ("step_time", "data_time", "forward_time", "backward_time", "optimizer_time")
MAX_KEPT = 4096  # per-step figures kept per part between two gatherings (then thinned)


class StepClock:
    """Per-rank step breakdown for training labkit does not drive (a plain loop, a Trainer).

    The same figures and ``ranks`` event as :class:`RankStats`, from the moments such a
    loop shows without a Lightning hook: the step's first forward (``forward_start``, a
    forward pre-hook), its last forward's end (``forward_end``), the optimizer step
    (``before_optimizer``) and the step's end (``step_end``). No communication hook is put
    on the user's own DDP model (it could never be taken off), so the all-reduce wait is
    estimated at each gathering: synchronous DDP makes every rank wait in backward for the
    slowest, so a rank's backward beyond the fastest rank's backward is its ``comm_wait``
    (``comm_wait_estimated`` in the event). Each part is its median over the steps (the
    ``ranks`` event's per-step figures), so one slow step on a busy machine does not move
    it; the parts then need not add up to the step exactly. With gradient accumulation the
    forward part runs from the first forward to the last one's end (the backwards between
    included).
    A collective before the hooked forward makes every rank wait there for the slowest
    one's data: the data wait is then every rank's, and no straggler is named by it. A
    Hugging Face ``Trainer`` has two: its token-count gather
    (``average_tokens_across_devices``, for a model taking loss keywords) and, as its
    callbacks see the model DDP wraps, DDP's buffer broadcast (``ddp_broadcast_buffers``).

    Args:
        sink: Receives the ``ranks`` events (rank 0 only).
        world: Number of processes.
        rank: This process's global rank.
        device: Where the gathered vector lives (CPU for gloo, the GPU for NCCL).
        logdir: Run directory (each rank appends to ``ranks/rank_<N>.jsonl``).
        margin, min_s, skip: As :class:`RankStats`.

    Example:
        >>> clock = StepClock(print, world=2, rank=0, device=torch.device("cpu"))
        >>> clock.step_end(); clock.steps
        0
    """

    def __init__(
        self,
        sink: Callable[[dict[str, Any]], None],
        *,
        world: int,
        rank: int,
        device: torch.device,
        logdir: str | os.PathLike[str] | None = None,
        margin: float = MARGIN,
        min_s: float = MIN_S,
        skip: int = SKIP,
    ) -> None:
        self.sink = sink
        self.world = world
        self.rank = rank
        self.device = device
        self.logdir = Path(logdir) if logdir is not None else None
        self.margin = margin
        self.min_s = min_s
        self.skip = skip
        self._parts: list[list[float]] = [[] for _ in PARTS]
        self.steps = 0
        self._seen = 0
        self._prev = time.perf_counter()
        self._fwd0: float | None = None
        self._fwd1: float | None = None
        self._opt: float | None = None

    def restart(self) -> None:
        """A new run of steps: the time before it is no data wait."""
        self._prev = time.perf_counter()
        self._fwd0 = self._fwd1 = self._opt = None

    def forward_start(self, *args: object, **kwargs: object) -> None:
        if self._fwd0 is None:
            self._fwd0 = time.perf_counter()

    def forward_end(self, *args: object, **kwargs: object) -> None:
        self._fwd1 = time.perf_counter()

    def before_optimizer(self, *args: object, **kwargs: object) -> None:
        self._opt = time.perf_counter()

    def step_end(self) -> None:
        """One optimizer step ended: its parts go into the sums (after ``skip`` steps)."""
        now = time.perf_counter()
        prev, self._prev = self._prev, now
        start = self._fwd0 if self._fwd0 is not None else prev
        before_bwd = self._fwd1 if self._fwd1 is not None else start
        before_opt = self._opt if self._opt is not None else now
        self._fwd0 = self._fwd1 = self._opt = None
        self._seen += 1
        if self._seen <= self.skip:
            return
        for kept, value in zip(
            self._parts,
            (
                now - prev,
                start - prev,
                before_bwd - start,
                max(0.0, before_opt - before_bwd),
                now - before_opt,
            ),
            strict=True,
        ):
            kept.append(value)
            if len(kept) > MAX_KEPT:
                del kept[::2]  # thinned: a long epoch keeps a spread of its steps
        self.steps += 1

    def gather(self, epoch: int, step: int) -> None:
        """One ``all_gather`` of every rank's sums (a collective: every rank calls it)."""
        import torch.distributed as dist

        # each part's median step, times the steps: per_rank's means are then medians (a
        # busy machine's odd slow step does not move them)
        n = self.steps
        sums = dict.fromkeys(SUMS, 0.0)
        for name, kept in zip(PARTS, self._parts, strict=True):
            sums[name] = statistics.median(kept) * n if kept else 0.0
        vec = torch.tensor([float(n), 0.0, *sums.values()], dtype=torch.float64, device=self.device)
        parts = [torch.empty_like(vec) for _ in range(self.world)]
        dist.all_gather(parts, vec)
        rows = torch.stack(parts).cpu().tolist()
        self._parts = [[] for _ in PARTS]
        self.steps = 0
        if not any(row[0] for row in rows):
            return  # no step since the last gathering, on any rank
        ranks = estimate_waits([per_rank(r, row) for r, row in enumerate(rows)])
        self._write_own(ranks[self.rank], epoch, step)
        if self.rank != 0:
            return
        self.sink(
            {
                "type": "ranks",
                "t": time.time(),
                "epoch": epoch,
                "step": step,
                "comm_hook": False,
                "comm_wait_estimated": True,
                "margin": self.margin,
                "min_s": self.min_s,
                "ranks": ranks,
                "stragglers": stragglers(ranks, margin=self.margin, min_s=self.min_s),
            }
        )

    def _write_own(self, row: dict[str, Any], epoch: int, step: int) -> None:
        if self.logdir is None:
            return
        path = self.logdir / "ranks" / f"rank_{self.rank}.jsonl"
        with contextlib.suppress(OSError):  # a full disk must not stop the training here
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as fh:
                fh.write(json.dumps({"epoch": epoch, "step": step, **row}) + "\n")

    def __repr__(self) -> str:
        return f"StepClock(world={self.world}, rank={self.rank}, steps={self.steps})"


def estimate_waits(ranks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Split each rank's backward into its own work and its all-reduce wait (estimated).

    Synchronous DDP ends every rank's backward together, so the fastest rank's backward
    (per step, mean) is the work; the rest of a rank's backward is waiting for a slower
    rank. ``compute_time`` is recomputed without the wait.

    Example:
        >>> r = estimate_waits([{"rank": 0, "steps": 1, "forward_time": 0.01,
        ...     "backward_time": 0.05, "optimizer_time": 0.0},
        ...     {"rank": 1, "steps": 1, "forward_time": 0.04, "backward_time": 0.02,
        ...     "optimizer_time": 0.0}])
        >>> [round(x["comm_wait"], 3) for x in r]
        [0.03, 0.0]
    """
    active = [r for r in ranks if r.get("steps")]
    if not active:
        return ranks
    floor = min(r["backward_time"] for r in active)
    for r in active:
        r["comm_wait"] = r["backward_time"] - floor
        r["backward_time"] = floor
        r["compute_time"] = r["forward_time"] + r["backward_time"] + r["optimizer_time"]
    return ranks
