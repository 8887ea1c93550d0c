"""Display is registered by the views: labkit.show(x), the data classes' show/plot/HTML, and
IPython's HTML formatter; the data packages import nothing of the views (issue 28 item 1)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
import torch
from IPython.core.formatters import DisplayFormatter
from torch import nn

import labkit
from labkit import _display
from labkit.views.display import install, trace_html, trace_png
from labkit.views.show import TraceView


@pytest.fixture(scope="module")
def mlp_and_x() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4)), torch.randn(3, 8)


def test_labkit_show_opens_a_trace_a_memory_report_and_a_plan(mlp_and_x) -> None:
    model, x = mlp_and_x
    t = labkit.trace(model, x, repeat=0)
    view = labkit.show(t, metric="bwd_time")
    assert isinstance(view, TraceView) and view.graph.trace is t
    assert view.graph.metric == "bwd_time"
    rep = labkit.memory(model, x)
    view = labkit.show(rep)
    assert view.selected_index == 2 and view.graph.metric == "activations"
    assert rep.show().graph.metric == "activations"  # the method is the same display
    plan = labkit.plan(model, x)
    view = labkit.show(plan)
    assert view.titles == ("Graph (predicted)", "Profile (predicted)", "Memory (predicted)")
    assert view.graph.metric == "flops"
    with pytest.raises(TypeError, match=r"labkit.show\(x\) shows a Trace .* got Linear"):
        labkit.show(nn.Linear(2, 2))


def test_ipython_shows_a_trace_as_its_picture_not_html(cnn_trace) -> None:
    """Issue 37 item 1: a displayed Trace is image/png (+ text/plain), no text/html that an
    HTML sanitizer would show as ``<img src="data:...`` text."""
    from PIL import Image

    formatter = DisplayFormatter()
    assert formatter.format(cnn_trace)[0].get("text/html") == cnn_trace._repr_html_()
    install(formatter)
    assert formatter.formatters["image/png"].lookup_by_type(labkit.Trace) is trace_png
    data, meta = formatter.format(cnn_trace)
    assert set(data) == {"image/png", "text/plain"}
    png = data["image/png"]
    assert png.startswith(b"\x89PNG") and png == trace_png(cnn_trace)[0]
    assert meta["image/png"] == {"width": Image.open(io.BytesIO(png)).width // 2}  # drawn at 2x
    assert "data:image/png;base64," in trace_html(cnn_trace)  # _repr_html_ outside IPython


def test_a_kind_nothing_registers_names_the_fix() -> None:
    with pytest.raises(LookupError, match=r"'nothing.show'.*import labkit.views"):
        _display.display("nothing.show", object())


def test_the_data_packages_do_not_import_the_views() -> None:
    code = (
        "import sys, torch\n"
        "import labkit.trace.model, labkit.memory.attribution, labkit.plan.model\n"
        "t = labkit.trace(torch.nn.Linear(4, 2), torch.randn(2, 4), repeat=0)\n"
        "assert not any(m.startswith('labkit.views') for m in sys.modules), 'views loaded'\n"
        "assert t.plot('profile').startswith(b'\\x89PNG')  # the first display loads them\n"
        "assert 'labkit.views.display' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
