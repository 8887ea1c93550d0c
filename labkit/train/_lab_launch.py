"""A Lab's launch and ranks: the Trainer a fit runs, in this process, in forked processes
or in a subprocess, in the foreground or a background thread.

:class:`LabLaunch` is one of the parts :class:`~labkit.train.Lab` delegates to. Where the
processes come from is :mod:`labkit.train._launch`'s (its :class:`~labkit.train._launch.Plan`);
this runs the ``lightning.Trainer`` (its arguments and labkit's callbacks are
:mod:`labkit.train._lab_trainer`'s), in the foreground or a background thread, turning a
worker's failure into an error naming its rank, and ends the run's record.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from labkit.train import _launch
from labkit.train._events import EVENTS_FILE, EventLog, EventTail
from labkit.train._lab_trainer import _quiet_lightning, lab_callbacks, trainer_kwargs_of
from labkit.train.fit_options import FitOptions

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from labkit.train._lab_events import LiveView
    from labkit.train._lock import LogdirLock
    from labkit.train.lab import Lab
    from labkit.train.run import Run


class LabLaunch:
    """The launch side of a :class:`~labkit.train.Lab` (see the module docstring).

    Args:
        lab: The Lab whose model, data and Recipe are trained.
    """

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def run(
        self,
        o: FitOptions,
        plan: _launch.Plan,
        *,
        logdir: Path,
        ckpt: str | None,
        module: pl.LightningModule | None,
        run: Run,
        dash: LiveView | None,
        tail: EventTail,
        lock: LogdirLock,
    ) -> Run:
        """Train (in a background thread with ``o.background``), then end the record.

        Returns:
            ``run`` (still running when in the background).
        """

        def body() -> None:
            exc: BaseException | None = None
            try:
                tail.start()
                if plan.mode == "subprocess" or module is None:  # the subprocess builds it
                    self.fit_subprocess(o, ckpt, logdir)
                else:
                    self.fit_here(plan, o, ckpt=ckpt, logdir=logdir, module=module)
            except BaseException as e:
                exc = self.translate(e)
            finally:
                self.lab._events.finish(run, dash, tail, lock, exc)
            if exc is not None:
                raise exc

        if o.background:

            def bg() -> None:
                with contextlib.suppress(BaseException):
                    body()

            try:
                threading.Thread(target=bg, name="labkit-fit", daemon=True).start()
            except BaseException:
                lock.release()
                run._finish(None)
                raise
            return run
        body()
        return run

    @staticmethod
    def translate(exc: BaseException) -> BaseException:
        """A worker's failure as :class:`~labkit.train._launch.DDPWorkerError` naming its
        rank (caused by ``exc``); other errors as they are."""
        err = _launch.worker_error(exc)
        if err is not None:
            err.__cause__ = exc
            return err
        return exc

    def fit_subprocess(self, o: FitOptions, ckpt: str | None, logdir: Path) -> None:
        """Fit in a fresh Python process (CUDA already initialised here) and take its weights."""
        fit_kwargs = o.replace(
            ckpt_path=ckpt, resume=False, logdir=str(logdir), dashboard=False, background=False
        ).to_kwargs()
        proc = _launch.run_in_subprocess(self.lab, fit_kwargs, logdir)
        try:
            state = _launch.subprocess_result(proc, logdir)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.lab.model.load_state_dict(state)

    def fit_here(
        self,
        plan: _launch.Plan,
        o: FitOptions,
        *,
        ckpt: str | None,
        logdir: Path,
        module: pl.LightningModule,
    ) -> None:
        """Fit with a ``lightning.Trainer`` from this process (and its forked ranks)."""
        import lightning.pytorch as pl

        from labkit.train._callback import seed_all
        from labkit.train._lab_data import train_batches
        from labkit.train.guards import check_loaders

        lab = self.lab
        seed_all(o.seed)
        dm = lab.datamodule(o.seed)
        check_loaders(dm)  # an empty train/val loader is named, with or without a dry run
        if o.dry_run:
            lab.check(dm)
        sink = EventLog(logdir / EVENTS_FILE)
        callbacks, progress = lab_callbacks(
            lab, plan, o, ckpt=ckpt, logdir=logdir, module=module, sink=sink
        )
        kw = trainer_kwargs_of(lab, plan, o, logdir=logdir, n_batches=train_batches(dm))
        trainer_kwargs = dict(o.trainer_kwargs or {})
        extra = trainer_kwargs.pop("callbacks", [])  # added to labkit's, not instead
        kw["callbacks"] = [callbacks, *([extra] if isinstance(extra, pl.Callback) else extra)]
        kw.update(trainer_kwargs)
        sigint = signal.getsignal(signal.SIGINT)
        modes = [(m, m.training) for m in lab.model.modules()]  # trained in place: kept
        try:
            with _quiet_lightning(), _launch.rendezvous_env(plan):
                trainer = pl.Trainer(**kw)
                trainer.fit(module, datamodule=dm, ckpt_path=ckpt)
        except Exception as exc:
            if progress is not None:
                progress.attach(exc)  # where each rank was, for _launch.worker_error
            raise
        except SystemExit:
            # Lightning turns Ctrl-C / "interrupt kernel" into sys.exit(1) after a graceful
            # shutdown; in a notebook that would look like a crash: report it as stopped
            sink(
                {
                    "type": "end",
                    "status": "stopped",
                    "t": time.time(),
                    "error": "interrupted (KeyboardInterrupt); the last epoch checkpoint is kept",
                }
            )
        finally:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, sigint)  # Lightning leaves SIGINT ignored
            sink.close()
            for m, mode in modes:
                m.training = mode
        lab._binding.take_weights(module)
