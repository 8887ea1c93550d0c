"""Fault table, resume: the start event of a resumed run says the step it resumed from
(the dashboard counts its steps from there)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.faults._lab import FIT, lab


def _starts(logdir: Path) -> list[dict]:
    events = [json.loads(line) for line in (logdir / "events.jsonl").read_text().splitlines()]
    return [e for e in events if e["type"] == "start"]


def test_start_event_after_a_resume_names_the_step_resumed_from(tmp_path: Path) -> None:
    first = lab(tmp_path).fit(max_epochs=1, **FIT)
    steps_done = first.steps[-1]["step"]  # 32 samples, batches of 8: 4 steps
    resumed = lab(tmp_path).fit(max_epochs=2, resume=True, **FIT)
    starts = _starts(tmp_path)
    assert [s["start_step"] for s in starts] == [0, steps_done] == [0, 4]
    assert starts[1]["resumed_from"] == str(tmp_path / "checkpoints" / "last.ckpt")
    assert resumed.steps[0]["step"] == steps_done + 1  # the first step after it
