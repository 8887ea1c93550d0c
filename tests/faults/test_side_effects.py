"""Fault rows: module-level state the step changes, which labkit cannot put back, is named.

labkit puts back what the model, the inputs, the optimizer and the RNGs hold; a forward that
updates a module-level dict (``GLOBAL["calls"] += 1``) showed 18 after one ``labkit.trace``
and the notes said nothing. Now the globals of the modules the step's code lives in (the
model classes' ``forward``, the loss) are pictured before and after, and what changed is
named with how many times the passes ran the step; what only reads globals gets no note.
"""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit

HERE = __name__
GLOBAL = {"calls": 0}
SEEN: list[int] = []
COUNT = 0
CONFIG = {"scale": 2.0, "layers": [1, 2]}  # read by a forward, never written
BUFFER = torch.zeros(3)
LOSSES: list[float] = []


def _note(t: labkit.Trace) -> str | None:
    return next((n for n in t.meta.notes if n.startswith("module-level state")), None)


class _Counts(nn.Module):
    """The issue's case: a module-level dict updated by every forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        GLOBAL["calls"] += 1
        return self.fc(x)


class _Many(nn.Module):
    """A list appended to, an int rebound, a name created, a tensor changed in place."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        global COUNT, MADE_BY_FORWARD
        SEEN.append(x.shape[0])
        COUNT += 1
        MADE_BY_FORWARD = True
        with torch.no_grad():
            BUFFER.add_(1.0)
        return self.fc(x)


class _ReadsOnly(nn.Module):
    """Reads module-level config and changes its input in place (the snapshot restores it)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.mul_(1.0)  # in place on the input: put back by the snapshot, so not named
        return self.fc(x) * CONFIG["scale"] + len(CONFIG["layers"])  # type: ignore[arg-type]


def test_a_global_dict_the_forward_updates_is_named_with_the_run_count() -> None:
    GLOBAL["calls"] = 0
    t = labkit.trace(_Counts(), torch.randn(3, 4), warmup=1, repeat=3, time_budget=None)
    runs = GLOBAL["calls"]
    assert runs >= 1 + 1 + 3 + 3  # recording, warm-up, timed passes, op passes
    note = _note(t)
    assert note is not None, t.meta.notes
    assert f"{HERE}.GLOBAL (a dict)" in note, note
    assert f"ran the step {runs} times" in note, note
    assert "COUNT" not in note and "CONFIG" not in note, note  # only what changed


def test_memory_and_plan_name_it_with_one_run() -> None:
    GLOBAL["calls"] = 0
    rep = labkit.memory(_Counts(), torch.randn(3, 4))
    assert GLOBAL["calls"] == 1
    note = _note(rep.trace)
    assert note is not None and f"{HERE}.GLOBAL (a dict)" in note and "1 time" in note, note
    assert note in rep.trace.memory_meta.notes  # the memory report prints these
    plan = labkit.plan(_Counts(), torch.randn(3, 4))
    assert GLOBAL["calls"] == 2
    pnote = _note(plan.trace)
    assert pnote is not None and f"{HERE}.GLOBAL (a dict)" in pnote and "1 time" in pnote


def test_every_kind_of_global_change_is_named() -> None:
    mod = sys.modules[HERE]
    vars(mod).pop("MADE_BY_FORWARD", None)
    SEEN.clear()
    before_count, before_buffer = COUNT, BUFFER.clone()
    t = labkit.trace(_Many(), torch.randn(2, 4), repeat=2, warmup=0, time_budget=None)
    note = _note(t)
    assert note is not None, t.meta.notes
    for name in (
        "SEEN (a list)",
        "COUNT (an int)",
        "MADE_BY_FORWARD (new)",
        "BUFFER (a tensor, changed in place)",
    ):
        assert f"{HERE}.{name}" in note, note
    runs = len(SEEN)
    assert COUNT - before_count == runs and f"ran the step {runs} times" in note
    assert torch.equal(BUFFER, before_buffer + runs)  # left as the step made it: named, not undone
    del mod.MADE_BY_FORWARD


def test_the_loss_functions_module_is_watched_too() -> None:
    LOSSES.clear()
    y = torch.randint(0, 3, (5,))

    def loss(out: torch.Tensor) -> torch.Tensor:
        value = F.cross_entropy(out, y)
        LOSSES.append(float(value.detach()))
        return value

    # the model is torch's own (nothing of the user's in its forward); the loss is the user's
    t = labkit.trace(nn.Linear(4, 3), torch.randn(5, 4), loss=loss, repeat=2, warmup=0)
    note = _note(t)
    assert note is not None and f"{HERE}.LOSSES (a list)" in note, t.meta.notes
    assert f"ran the step {len(LOSSES)} times" in note


@pytest.mark.parametrize("entry", ["trace", "memory"])
def test_reading_globals_and_restored_inputs_are_not_named(entry: str) -> None:
    x = torch.randn(3, 4)
    if entry == "trace":
        t = labkit.trace(_ReadsOnly(), x, repeat=2, warmup=0)
    else:
        t = labkit.memory(_ReadsOnly(), x).trace
    assert _note(t) is None, t.meta.notes
    assert not any("cannot put back" in n for n in t.meta.notes)


def test_keep_step_still_names_what_every_pass_changed() -> None:
    GLOBAL["calls"] = 0
    t = labkit.trace(_Counts(), torch.randn(3, 4), repeat=2, warmup=0, keep_step=True)
    note = _note(t)
    assert note is not None and f"ran the step {GLOBAL['calls']} times" in note
