"""Lab.fit(dashboard=True) shows labkit.views' Dashboard, found through labkit._display (the
trainer imports no view), and streams every step into it."""

from __future__ import annotations

from labkit.train import Lab
from labkit.views.dashboard import Dashboard
from tests.train._helpers import LOSS, datasets, mlp


def test_fit_with_a_dashboard_fills_the_widgets_dashboard(tmp_path) -> None:
    lab = Lab(mlp(), datasets(), loss=LOSS, batch_size=16, logdir=tmp_path)
    run = lab.fit(max_epochs=1, seed=0, dashboard=True, accelerator="cpu")
    assert run.status == "finished"
    assert isinstance(lab.dashboard, Dashboard)
    assert lab.dashboard.status == "finished"
    assert lab.dashboard.stats["step"] == len(run.losses) > 0
