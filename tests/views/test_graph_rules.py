"""The shared graph-rules fixture is what ``labkit.trace.graph`` draws now.

``widgets/test/graphcore.test.mjs`` checks the browser's copy of the rules against the
same file, so a change to the rules on one side only fails one of the two suites.
"""

from __future__ import annotations

import json

from tests.views.graph_rules_fixture import (
    FIXTURE,
    PROFILE_FIXTURE,
    dumps,
    fixture,
    profile_fixture,
)

REGENERATE = "rewrite it with `.venv/bin/python -m tests.views.graph_rules_fixture`"


def test_fixture_is_what_python_draws_now():
    assert FIXTURE.exists(), f"{FIXTURE} is missing; {REGENERATE}"
    stored = json.loads(FIXTURE.read_text(encoding="utf-8"))
    now = fixture()
    assert stored["torch"] == now["torch"], (
        f"the fixture was recorded with torch {stored['torch']}, this is {now['torch']}: the "
        f"ops it records may differ; {REGENERATE}"
    )
    for old, new in zip(stored["views"], now["views"], strict=True):
        assert old["graph"] == new["graph"], f"the GraphView payload changed; {REGENERATE}"
        for a, b in zip(old["cases"], new["cases"], strict=True):
            assert a == b, f"case {a['name']!r}: the graph rules changed; {REGENERATE}"
    assert stored == now, f"{FIXTURE.name} differs from what Python computes; {REGENERATE}"
    assert FIXTURE.read_text(encoding="utf-8") == dumps(now), f"not as written; {REGENERATE}"


def test_fixture_exercises_every_rule():
    data = fixture()
    rolled, flat = data["views"]
    g = rolled["graph"]
    assert {"i", "o", "m", "p"} <= set(g["kind"]), g["kind"]  # inputs, modules, ops
    assert g["rolled"] and g["rolled"][0][1] == 3  # a block rolled x 3
    assert not flat["graph"]["rolled"] and len(flat["graph"]["ids"]) > len(g["ids"])
    assert max(g["parent"]) > 0 and any(g["parent"][p] > 0 for p in g["parent"] if p >= 0)
    for view in data["views"]:
        drawn = {c["name"]: (c["boxes"], c["groups"]) for c in view["cases"]}
        # a call opened under a collapsed parent shows nothing more
        assert drawn["expanded under a collapsed parent"] == drawn["all collapsed"]
        # rolled, blocks.1 is drawn by blocks.0: opening it opens nothing; flat, it opens
        second, default = drawn["second call of the block expanded"], drawn["default (depth 2)"]
        assert (second == default) == view["rolled"]
        distinct = {json.dumps(d) for d in drawn.values()}
        assert len(distinct) == len(drawn) - 1 - view["rolled"], sorted(drawn)
        for c in view["cases"]:  # lifted edges join drawn boxes, never a frame or itself
            boxes = set(c["boxes"])
            assert all(s in boxes and d in boxes and s != d for s, d in c["edges"]), c["name"]
    # labels: a rolled block with its count, numbered children with their container
    assert "blocks.0-2 \u00d73" in rolled["labels"] and "blocks.0" not in rolled["labels"]
    assert {"blocks.0", "blocks.1", "blocks.2", "ResCNN", "conv1"} <= set(flat["labels"])
    assert FIXTURE.stat().st_size < 100_000


def test_profile_fixture_is_what_python_sends_now():
    assert PROFILE_FIXTURE.exists(), f"{PROFILE_FIXTURE} is missing; {REGENERATE}"
    stored = PROFILE_FIXTURE.read_text(encoding="utf-8")
    assert stored == dumps(profile_fixture()), f"the ProfileView payload changed; {REGENERATE}"
