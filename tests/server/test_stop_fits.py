"""A stop request through the server's path stops real fits while the fit call runs.

The fit runs in the foreground (this thread blocks in ``lab.fit`` as a notebook cell
does); another thread does what ``POST /labkit/api/stop`` does with the dashboard's
token (:func:`labkit._stops.request`). One process, and DDP over two forked CPU
processes, where every rank has to see the file and stop together.
"""

from __future__ import annotations

import threading
import time

import pytest

from labkit import _stops as stops
from labkit.train import Lab
from tests.train._helpers import LOSS, datasets, mlp


def _stop_when_running(lab: Lab, after_steps: int, out: dict) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        run = lab.runs[-1] if lab.runs else None
        dash = lab.dashboard
        if run is not None and dash is not None and len(run.steps) >= after_steps:
            out["at_step"] = run.steps[-1]["step"]
            out["file"] = stops.request(dash.stop_token)
            out["t"] = time.monotonic()
            return
        time.sleep(0.02)


@pytest.mark.parametrize(
    "devices", [1, pytest.param(2, marks=pytest.mark.slow, id="ddp-2-cpu-processes")]
)
def test_server_stop_reaches_a_foreground_fit(tmp_path, monkeypatch, devices):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "runtime"))
    lab = Lab(mlp(), datasets(4096), loss=LOSS, batch_size=4, logdir=tmp_path / "run")
    total = 3 * 3072 // 4 // devices
    seen: dict = {}
    stopper = threading.Thread(target=_stop_when_running, args=(lab, 5, seen), daemon=True)
    stopper.start()
    run = lab.fit(max_epochs=3, devices=devices, accelerator="cpu", dashboard=True)
    ended = time.monotonic()
    stopper.join(5)
    assert seen, "the fit ended before the stop request was sent"
    assert seen["file"] == (tmp_path / "run" / "STOP").resolve()
    assert run.status == "stopped", (run.status, run.error)
    last = run.steps[-1]["step"]
    assert seen["at_step"] <= last < total, (seen, last, total)
    assert ended - seen["t"] < 15, ended - seen["t"]  # seen within a poll, not at the end
    assert (tmp_path / "run" / "checkpoints" / "last.ckpt").exists()
    dash = lab.dashboard
    dash.flush()
    assert dash.status == "stopped" and dash.stats["epoch"] == 1
    # the fit ended: its token no longer stops anything
    with pytest.raises(stops.UnknownStopToken):
        stops.request(dash.stop_token)
