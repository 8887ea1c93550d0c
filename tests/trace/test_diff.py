from __future__ import annotations

import torch
from torch import nn

import labkit
from tests.trace._models import MLP, ResCNN


def test_diff_reports_added_removed_and_shape_changes() -> None:
    a = labkit.trace(MLP(hidden=16), torch.randn(4, 8))
    wider = MLP(hidden=32)
    wider.extra = nn.Identity()
    b = labkit.trace(wider, torch.randn(4, 8))
    d = labkit.diff(a, b)
    rows = {r["path"]: r for r in d.rows}
    assert rows["extra"]["status"] == "added"
    assert rows["fc1"]["status"] == "changed"
    assert rows["fc1"]["shapes"] == ([[4, 16]], [[4, 32]])
    assert rows["fc1"]["params"] == (8 * 16 + 16, 8 * 32 + 32)
    back = labkit.diff(b, a)
    assert {r["path"]: r["status"] for r in back.rows}["extra"] == "removed"
    text = d.summary()
    assert "changed  fc1 (Linear)" in text and "output [[4, 16]] -> [[4, 32]]" in text
    assert repr(d) == "TraceDiff(MLP -> MLP: added=1, changed=4)"


def test_same_model_twice_is_structurally_same() -> None:
    model = ResCNN()
    x = torch.randn(2, 3, 12, 12)
    d = labkit.diff(labkit.trace(model, x), labkit.trace(model, x))
    assert d.changed() == []
    df = d.to_pandas()
    assert (df["flops_fwd_delta"] == 0).all()
    assert set(df["status"]) == {"same"}
