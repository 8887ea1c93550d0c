"""Notebook-safe launching of one or several training processes.

Three ways a fit runs, chosen by :func:`plan`:

- ``"inline"``: in this process. One device, or under ``torchrun`` / SLURM where the
  processes already exist (Lightning reads their environment).
- ``"fork"``: several processes forked from this one (what Lightning calls
  ``ddp_notebook``): works from a notebook because nothing has to be pickled or
  re-imported. Forking is unsafe once CUDA is initialised in this process.
- ``"subprocess"``: when CUDA is already initialised here, the Lab is pickled with
  cloudpickle (classes defined in the notebook included) and a fresh Python process
  runs the fit, forking its workers before CUDA starts there.

In every mode rank 0 appends events to ``<logdir>/events.jsonl`` and this process tails
that file, so the dashboard and the Run record fill in the same way. A worker that dies
makes the launcher fail at once (torch.multiprocessing watches every child), and the
process group's timeout is short, so survivors of a dead peer do not wait 30 minutes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from torch.multiprocessing.spawn import ProcessRaisedException

    from labkit.train.lab import Lab

MODES = ("auto", "inline", "fork", "subprocess")


class DDPWorkerError(RuntimeError):
    """A training process died or raised; the message names its rank and its error."""

    def __init__(self, message: str, *, rank: int | None = None) -> None:
        super().__init__(message)
        self.rank = rank


def under_launcher() -> bool:
    """Whether torchrun (torchelastic), SLURM or MPI already created this process's peers."""
    env = os.environ
    return (
        "TORCHELASTIC_RUN_ID" in env
        or ("LOCAL_RANK" in env and "WORLD_SIZE" in env)
        or ("SLURM_NTASKS" in env and int(env.get("SLURM_NTASKS", "1")) > 1)
    )


def cuda_initialised() -> bool:
    """Whether CUDA has been initialised in this process (forking is unsafe then)."""
    return torch.cuda.is_available() and torch.cuda.is_initialized()


def in_notebook() -> bool:
    """Whether this runs inside a Jupyter kernel."""
    ip = sys.modules.get("IPython")
    if ip is None:
        return False
    shell = ip.get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def _count(devices: object) -> int:
    if isinstance(devices, int):
        return devices if devices > 0 else max(torch.cuda.device_count(), 1)
    if isinstance(devices, list | tuple):
        return len(devices)
    if isinstance(devices, str):
        if devices == "auto":
            return 1 if not torch.cuda.is_available() else torch.cuda.device_count()
        if devices.strip().lstrip("-").isdigit():
            return _count(int(devices))
        return len([d for d in devices.split(",") if d.strip()])
    return 1


@dataclass(frozen=True)
class Plan:
    """How a fit will run.

    Args:
        mode: ``"inline"``, ``"fork"`` or ``"subprocess"``.
        processes: Processes per node.
        reason: A sentence saying why this mode.
    """

    mode: str
    processes: int
    reason: str

    def __repr__(self) -> str:
        return f"Plan(mode={self.mode!r}, processes={self.processes}, reason={self.reason!r})"


def plan(
    *, devices: int | str | list[int], strategy: object, num_nodes: int, launch: str = "auto"
) -> Plan:
    """Decide how to launch a fit.

    Args:
        devices: Lightning's ``devices`` argument.
        strategy: Lightning's ``strategy`` argument.
        num_nodes: Number of nodes.
        launch: ``"auto"`` or a mode to force (``"subprocess"`` is also how tests check it).
    """
    if launch not in MODES:
        raise ValueError(f"launch must be one of {MODES}, got {launch!r}")
    n = _count(devices)
    if under_launcher():
        return Plan("inline", n, "processes were started by torchrun/SLURM: Lightning joins them")
    if launch != "auto":
        return Plan(launch, n, f"launch={launch!r} was asked for")
    if n <= 1 and num_nodes <= 1:
        return Plan("inline", 1, "one process")
    if num_nodes > 1:
        raise ValueError(
            f"num_nodes={num_nodes}: several nodes need a launcher; run the promoted script "
            "with torchrun on each node (see Lab.fit's docstring)"
        )
    if isinstance(strategy, str) and strategy not in ("auto", "ddp", "ddp_notebook", "ddp_fork"):
        return Plan("inline", n, f"strategy={strategy!r} launches its own processes")
    if cuda_initialised():
        return Plan(
            "subprocess",
            n,
            "CUDA is already initialised in this kernel, so its processes cannot be "
            "forked: the fit runs in a fresh subprocess instead",
        )
    return Plan("fork", n, f"{n} processes forked from this one (ddp_notebook)")


# what Lightning's launchers write into this process's environment for their workers
_RENDEZVOUS = ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NODE_RANK", "LOCAL_RANK", "RANK")


@contextmanager
def rendezvous_env(plan_: Plan) -> Iterator[None]:
    """Leave this process's environment as it was after a fit Lightning launched from it.

    Lightning's fork launcher writes ``MASTER_PORT`` (a free port it picks) into
    ``os.environ`` and reads it back at the next fit, so a second DDP fit in one notebook
    reused the first one's port and failed with EADDRINUSE whenever anything still held it
    (a rank being torn down, a kernel started from this process). A ``MASTER_PORT`` the user
    set themselves is kept; under torchrun/SLURM nothing is touched.
    """
    if plan_.mode != "fork" or under_launcher():
        yield
        return
    saved = {k: os.environ.get(k) for k in _RENDEZVOUS}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def ddp_strategy(plan_: Plan, strategy: object, timeout_s: float) -> object:
    """The Lightning strategy for ``plan_``: DDP with a short timeout, forked if asked."""
    if plan_.processes <= 1 and not under_launcher():
        return strategy
    if not (isinstance(strategy, str) and strategy in ("auto", "ddp", "ddp_notebook", "ddp_fork")):
        return strategy
    from lightning.pytorch.strategies import DDPStrategy

    kw: dict[str, Any] = {"timeout": timedelta(seconds=timeout_s)}
    if plan_.mode == "fork":
        kw["start_method"] = "fork"
    return DDPStrategy(**kw)


def worker_error(exc: BaseException) -> DDPWorkerError | None:
    """Turn torch.multiprocessing's exception for a dead or failing worker into a clear one."""
    from torch.multiprocessing.spawn import ProcessExitedException, ProcessRaisedException

    if isinstance(exc, ProcessRaisedException):
        tb = str(exc).strip().splitlines()
        last = next((ln for ln in reversed(tb) if ln.strip()), "unknown error")
        hung = _hung_rank(exc, last)
        if hung is not None:
            return hung
        return DDPWorkerError(
            f"DDP worker rank {exc.error_index} (pid {exc.error_pid}) failed: {last}\n"
            f"--- its traceback ---\n{exc}",
            rank=exc.error_index,
        )
    if isinstance(exc, ProcessExitedException):
        how = f"signal {exc.signal_name}" if exc.signal_name else f"exit code {exc.exit_code}"
        return DDPWorkerError(
            f"DDP worker rank {exc.error_index} (pid {exc.error_pid}) died ({how}); the other "
            "workers were stopped",
            rank=exc.error_index,
        )
    return None


def _hung_rank(exc: ProcessRaisedException, last: str) -> DDPWorkerError | None:
    """A timed-out collective: name the rank that did not arrive (see ``_progress``)."""
    from labkit.train._progress import describe, is_timeout, laggards

    progress = getattr(exc, "labkit_progress", None)
    # the timeout can be reported inside a comm hook's callback, whose traceback ends on
    # the hook's line: look for it in the whole report, not only its last line
    if not progress or not (is_timeout(last) or "timed out" in str(exc).lower()):
        return None
    behind = laggards(progress)
    if not behind:
        return None
    waited, first = exc.error_index, behind[0]
    names = ", ".join(str(r) for r in behind)
    return DDPWorkerError(
        f"DDP rank {names} did not arrive: rank {waited} waited in a collective at "
        f"{describe(progress, waited)} until ddp_timeout, while rank {first} was still at "
        f"{describe(progress, first)} (it hangs or is far slower there); rank {waited} "
        f"reported: {last}\n--- rank {waited}'s traceback ---\n{exc}",
        rank=first,
    )


# ---------------------------------------------------------------- subprocess mode
def run_in_subprocess(
    lab: Lab, fit_kwargs: dict[str, Any], logdir: Path
) -> subprocess.Popen[bytes]:
    """Pickle ``lab`` (cloudpickle) and start ``python -m labkit.train._launch`` on it."""
    import cloudpickle

    work = logdir / "launch"
    work.mkdir(parents=True, exist_ok=True)
    for stale in ("result.pt", "error.txt"):
        (work / stale).unlink(missing_ok=True)
    with open(work / "lab.pkl", "wb") as fh:
        cloudpickle.dump((lab, fit_kwargs), fh)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [env.get("PYTHONPATH", "")])
    from labkit.train._lock import INHERIT_ENV, LOCK_FILE

    env[INHERIT_ENV] = str((logdir / LOCK_FILE).resolve())  # fits for this process: its lock
    return subprocess.Popen([sys.executable, "-m", "labkit.train._launch", str(work)], env=env)


def subprocess_result(proc: subprocess.Popen[bytes], logdir: Path) -> dict[str, Any]:
    """Wait for the subprocess; return its trained state_dict or raise its error."""
    rc = proc.wait()
    work = logdir / "launch"
    if rc != 0:
        err = work / "error.txt"
        text = err.read_text() if err.exists() else f"the training subprocess exited with code {rc}"
        raise DDPWorkerError(f"training subprocess failed: {text}")
    from labkit.train.checkpoint import load_checkpoint

    return load_checkpoint(work / "result.pt")


def _main(work: str) -> int:  # pragma: no cover - runs in the subprocess
    import traceback

    import cloudpickle

    w = Path(work)
    with open(w / "lab.pkl", "rb") as fh:
        lab, kwargs = cloudpickle.load(fh)
    try:
        kwargs = {**kwargs, "launch": "fork" if kwargs.get("devices", 1) != 1 else "inline"}
        lab.fit(**kwargs)
        torch.save(lab.model.state_dict(), w / "result.pt")
    except BaseException as exc:
        (w / "error.txt").write_text(f"{type(exc).__name__}: {exc}\n\n{traceback.format_exc()}")
        return 1
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1]))
