from __future__ import annotations

import pytest

from labkit.train.run import Run


def test_events_fold_into_record_and_roundtrip(tmp_path):
    run = Run(logdir=str(tmp_path), config={"seed": 0})
    run.add_event({"type": "start", "total_steps": 4})
    run.add_event(
        {
            "type": "steps",
            "steps": [{"step": 1, "epoch": 0, "loss": 1.0}, {"step": 2, "epoch": 0, "loss": 0.5}],
        }
    )
    run.add_event({"type": "epoch", "epoch": 0, "val_loss": 0.4})
    run.add_event({"type": "checkpoint", "path": "a.ckpt"})
    # a resumed run that repeats step 2 replaces it
    run.add_event({"type": "steps", "steps": [{"step": 2, "epoch": 0, "loss": 0.6}]})
    run.add_event({"type": "end", "status": "finished"})
    assert run.losses == [1.0, 0.6]
    assert run.last_checkpoint == "a.ckpt" and run.status == "finished"
    path = run.save()
    assert Run.load(path) == run and Run.load(tmp_path) == run


def test_repr_and_bad_schema():
    run = Run(logdir="x")
    assert repr(run) == "Run(status='created', steps=0, epochs=0, checkpoints=0, logdir='x')"
    run.add_event({"type": "steps", "steps": [{"step": 1, "epoch": 0, "loss": 0.25}]})
    assert "loss=0.25" in repr(run)
    with pytest.raises(ValueError, match="not a labkit run record"):
        Run.from_dict({"schema": "other"})


def test_wait_reraises_and_times_out():
    run = Run()
    with pytest.raises(TimeoutError, match="still created"):
        run.wait(timeout=0.01)
    run._finish(ValueError("boom"))
    with pytest.raises(ValueError, match="boom"):
        run.wait()
