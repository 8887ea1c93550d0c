"""The panels moved out of labkit.views (issue 28 item 1); every old import still works."""

from __future__ import annotations

import subprocess
import sys


def test_old_and_new_import_paths_give_the_same_classes() -> None:
    import labkit.panels
    import labkit.views
    from labkit.panels.attention import AttentionView
    from labkit.panels.optimize_panel import OptimizePanel
    from labkit.views.attention import AttentionView as OldAttentionView
    from labkit.views.optimize_panel import OptimizePanel as OldOptimizePanel

    assert labkit.panels.OptimizePanel is labkit.views.OptimizePanel is OptimizePanel
    assert OldOptimizePanel is OptimizePanel
    assert labkit.panels.AttentionView is labkit.views.AttentionView is AttentionView
    assert OldAttentionView is AttentionView
    assert sorted(labkit.panels.__all__) == ["AttentionView", "OptimizePanel"]


def test_import_labkit_panels_stays_light() -> None:
    code = (
        "import sys, labkit.panels; "
        "print([m for m in ('anywidget', 'torch', 'matplotlib') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
