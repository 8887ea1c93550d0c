"""The diff view's static picture and HTML: colours by change, legend, hatching, toggle."""

from __future__ import annotations

import io

import torch
from PIL import Image
from torch import nn

import labkit
from labkit.views._contract import DiffViewTraits, problems
from labkit.views._keep import LABKIT_MIME
from labkit.views.diff import BLUE, RED, WHITE, DiffView, diff_html, diff_png, diverging


class Net(nn.Module):
    def __init__(self, hidden: tuple[int, ...] = (8, 8, 8)) -> None:
        super().__init__()
        self.blocks = nn.Sequential(
            *[nn.Sequential(nn.Linear(4, h), nn.ReLU(), nn.Linear(h, 4)) for h in hidden]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


X = torch.randn(2, 4)


def _pixels(png: bytes) -> list[tuple[int, int, int]]:
    img = Image.open(io.BytesIO(png)).convert("RGB")
    raw = img.tobytes()
    return [tuple(raw[i : i + 3]) for i in range(0, len(raw), 3)]  # type: ignore[misc]


def _near(p: tuple[int, int, int], c: tuple[int, int, int], tol: int = 6) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(p, c, strict=True))


def test_diverging_scale() -> None:
    assert diverging(0.0, 5.0) == WHITE and diverging(5.0, 5.0) == RED
    assert diverging(-9.0, 5.0) == BLUE  # beyond the scale: full
    mid = diverging(2.5, 5.0)
    assert WHITE[1] > mid[1] > RED[1]


def test_widened_block_is_red_and_nothing_is_blue() -> None:
    a = labkit.trace(Net(), X, repeat=0)
    b = labkit.trace(Net((8, 24, 8)), X, repeat=0)
    px = _pixels(diff_png(labkit.diff(a, b), "params"))
    assert sum(_near(p, RED) for p in px) > 500  # the widened block's boxes, and the legend
    legend_only = _pixels(diff_png(labkit.diff(a, a), "params"))
    assert sum(_near(p, RED) for p in legend_only) < sum(_near(p, RED) for p in px) / 2
    narrower = _pixels(diff_png(labkit.diff(b, a), "params"))
    assert sum(_near(p, BLUE) for p in narrower) > sum(_near(p, BLUE) for p in legend_only) + 500


def test_within_noise_boxes_are_hatched() -> None:
    t = labkit.trace(Net(), X, repeat=3)
    same = _pixels(diff_png(labkit.diff(t, t), "time"))  # every change 0, within noise
    exact = _pixels(diff_png(labkit.diff(t, t), "flops"))  # exact figures: no intervals
    ink = (107, 114, 128)
    assert sum(_near(p, ink, 20) for p in same) > 2 * sum(_near(p, ink, 20) for p in exact)


def test_html_has_a_section_per_metric_and_says_what_cannot_be_answered() -> None:
    a = labkit.trace(Net(), X, repeat=0)
    b = labkit.trace(Net((8, 24, 8)), X, repeat=0)
    d = labkit.diff(a, b)
    page = diff_html(d, "flops")
    assert page.count("<details") == 4 and page.count("<details open>") == 1
    assert "<details open><summary><b>flops</b>: FLOPs +" in page
    assert "has no times" in page  # repeat=0: time is named, not drawn
    assert "data:image/png;base64," in page and "<table>" in page
    view = d.show("params")
    assert isinstance(view, DiffView)
    assert repr(view).startswith("DiffView(params +")


def test_live_view_sends_each_metric_and_links_rows_to_boxes() -> None:
    a = labkit.trace(Net(), X, repeat=3)
    b = labkit.trace(Net((8, 24, 8)), X, repeat=3)
    view = DiffView(labkit.diff(a, b), metric="params")
    state = {name: getattr(view, name) for name in DiffViewTraits.__annotations__}
    assert not problems(state, DiffViewTraits, "DiffView")
    assert sorted(view.changes) == ["flops", "memory", "params", "time"]
    graph, params = view.graph, view.changes["params"]
    # every row of a module in the base graph names the box that draws it, and that box's
    # change is the row's module's change with its submodules'
    for row in params["rows"]:
        k = row["node"]
        assert k >= 0 and graph["name"][k] == row["module"] and graph["kind"][k] == "m"
    top = params["rows"][0]
    assert top["module"] in ("blocks.1.0", "blocks.1.2") and top["delta"].startswith("+")
    k = graph["name"].index("blocks.1")
    assert params["delta"][k] == (24 - 8) * (4 + 1) + (24 - 8) * 4  # both widened Linears
    assert params["delta"][graph["name"].index("blocks.0")] == 0
    assert not any(params["noise"])  # parameter counts are exact
    assert view.labels == ["a", "b"] and view.metric == "params"


def test_live_view_keeps_the_static_picture_of_the_metric_shown() -> None:
    a = labkit.trace(Net(), X, repeat=0)
    b = labkit.trace(Net((8, 24, 8)), X, repeat=0)
    view = DiffView(labkit.diff(a, b), metric="time")  # no timing passes: not answerable
    assert view.metric != "time" and "has no times" in view.changes["time"]["error"]
    data, _ = view._repr_mimebundle_()
    assert data["image/png"] and "text/html" not in data and LABKIT_MIME in data
    assert data["text/plain"].startswith("DiffView(") and "blocks.1" in data["text/plain"]
    view.metric = "params"
    assert view.to_png() == diff_png(labkit.diff(a, b), "params")
