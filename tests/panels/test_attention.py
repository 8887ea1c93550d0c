"""AttentionView (Python side): traits, picking a node, per-head sums, static HTML, repr."""

from __future__ import annotations

import json

import pytest

# PyG 2.8 calls torch.jit.script when imported; torch 2.13 deprecates it (not labkit's to fix)
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning"
)


@pytest.fixture(scope="module")
def view():
    import torch

    from labkit.gnn import GAT, karate
    from labkit.panels import AttentionView

    torch.manual_seed(0)
    data = karate()
    return AttentionView(GAT(data.num_features, 4, 4, heads=3, out_heads=2), data, node=0)


def test_initial_view_is_plain_json_and_sums_to_one(view):
    payload = json.loads(json.dumps(view.view))
    assert payload["node"] == 0 and payload["hops"] == 2 and payload["heads"] == [2, 3]
    assert (view.num_nodes, view.max_hops, view.head) == (34, 2, -1)
    assert view.head_sums() == pytest.approx([1.0, 1.0], abs=1e-5)


def test_picking_a_node_recomputes_the_neighbourhood(view):
    view.node = 33
    assert view.view["node"] == 33 and view.view["nodes"][0] == 33
    assert all(e["dst"] == 33 for e in view.view["edges"] if e["hop"] == 1)
    assert view.head_sums() == pytest.approx([1.0, 1.0], abs=1e-5)
    view.hops = 1
    assert {e["hop"] for e in view.view["edges"]} == {1}
    view.hops, view.node = 2, 0


def test_bad_pick_is_refused_and_the_old_one_kept(view):
    with pytest.raises(ValueError, match=r"node must be in \[0, 34\), got 99"):
        view.node = 99
    assert view.node == 0 and view.view["node"] == 0
    from labkit.gnn import GAT, karate
    from labkit.panels import AttentionView

    with pytest.raises(ValueError, match=r"head must be -1 \(mean\) or in \[0, 1\), got 3"):
        AttentionView(GAT(34, 4, 4), karate(), head=3)


def test_static_png_html_and_repr(view):
    assert view.to_png().startswith(b"\x89PNG")
    page = view.to_html()
    assert "Attention into node 0 (GAT)" in page and "<th>head 1</th>" in page
    assert 'src="data:image/png;base64,' in page
    # the table's style attribute is double-quoted: MONO's single-quoted font names inside
    assert 'style="font-family: var(--jp-code-font-family, ui-monospace, &#x27;DejaVu' in page
    assert "style='" not in page
    data, _ = view._repr_mimebundle_()
    assert {"application/vnd.jupyter.widget-view+json", "image/png", "text/plain"} <= set(data)
    assert "text/html" not in data  # a sanitizer would show its <th> tags as text
    lines = data["text/plain"].splitlines()
    assert "Attention into node 0 (GAT)" in lines and lines[
        lines.index("Attention into node 0 (GAT)") + 1
    ].split() == ["from", "head", "0", "head", "1", "mean"]
    assert repr(view) == "AttentionView(model=GAT, node=0, hops=2, head='mean', nodes=34)"


def test_ring_layout_puts_hop_k_on_circle_k(view):
    import math

    from labkit.panels.attention import ring_layout

    pos = ring_layout(view.view)
    hops = {view.view["node"]: 0}
    for e in view.view["edges"]:
        hops.setdefault(e["src"], e["hop"])
    assert set(pos) == set(view.view["nodes"])
    for n, (x, y) in pos.items():
        assert math.hypot(x, y) == pytest.approx(hops[n])
