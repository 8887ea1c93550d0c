"""The front end's types come from the Python side: the contract's traits match the widget
classes, the generated TypeScript matches the contract, and the output mimetype has one
definition (``_keep.LABKIT_MIME``, generated into the lab extension's ``mime.ts``)."""

from __future__ import annotations

import importlib.util
import re
import types
import typing
from pathlib import Path

import anywidget
import pytest
import traitlets as t

from labkit.panels import AttentionView, OptimizePanel
from labkit.views import Dashboard, GraphView, MemoryTimeline, ProfileView
from labkit.views._contract import VIEW_TRAITS, problems
from labkit.views._keep import LABKIT_MIME
from labkit.views.diff import DiffView
from labkit.views.runs import RunsView

ROOT = Path(__file__).resolve().parents[2]
CLASSES = {
    "graph": GraphView,
    "profile": ProfileView,
    "memory": MemoryTimeline,
    "dashboard": Dashboard,
    "optimize_panel": OptimizePanel,
    "attention": AttentionView,
    "runs": RunsView,
    "diff": DiffView,
}


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_contract_types", ROOT / "scripts" / "gen_contract_types.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_view_bundle_has_its_traits():
    views = sorted(
        p.stem for p in (ROOT / "widgets" / "src").glob("*.js") if not p.stem.startswith("_")
    )
    assert sorted(VIEW_TRAITS) == sorted(CLASSES) == views


def _kind(tp) -> set[type]:
    """The traitlets a contract type may be synced as."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_kind(a) for a in typing.get_args(tp) if a is not type(None)))
    if typing.is_typeddict(tp) or origin is dict:
        return {t.Dict}
    if origin is list:
        return {t.List}
    return {{int: t.Int, float: t.Float, str: t.Unicode, bool: t.Bool}[tp]}


@pytest.mark.parametrize("view", sorted(CLASSES))
def test_synced_traits_are_the_contracts(view: str):
    cls, contract = CLASSES[view], VIEW_TRAITS[view]
    base = set(anywidget.AnyWidget.class_trait_names(sync=True))
    synced = {n: tr for n, tr in cls.class_traits(sync=True).items() if n not in base}
    hints = typing.get_type_hints(contract)
    assert sorted(synced) == sorted(hints), f"{cls.__name__} vs {contract.__name__}"
    for name, trait in synced.items():
        kind = t.Unicode if isinstance(trait, t.Enum) else type(trait)  # Enum of names
        where = f"{cls.__name__}.{name}"
        assert kind in _kind(hints[name]), f"{where}: {kind.__name__} vs {hints[name]}"
        nullable = type(None) in typing.get_args(hints[name])
        assert trait.allow_none == nullable, f"{where}: allow_none={trait.allow_none}"


def _sends_its_traits(view) -> None:
    contract = VIEW_TRAITS[next(k for k, c in CLASSES.items() if isinstance(view, c))]
    state = {name: getattr(view, name) for name in typing.get_type_hints(contract)}
    wrong = problems(state, contract, type(view).__name__)
    assert not wrong, "\n".join(wrong[:10])


def test_views_send_what_their_traits_say(cnn_trace, memory_trace, tmp_path: Path):
    """Every synced trait's value, on real objects, against the view's TypedDict."""
    import torch

    from labkit.train.run_table import runs
    from tests.views.test_runs_view import _run

    for view in (GraphView(cnn_trace), ProfileView(cnn_trace), MemoryTimeline(memory_trace)):
        _sends_its_traits(view)
    _run(tmp_path / "a", 0.1, [1.0, 0.8, 0.6, 0.5])
    _run(tmp_path / "b", 0.01, [1.0, 0.95, 0.9, 0.85], t0=5000.0)
    _sends_its_traits(runs(tmp_path).show())
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    _sends_its_traits(OptimizePanel(model, torch.randn(2, 4), mode="inference"))


def test_generated_files_are_current():
    gen = _generator()
    assert gen.stale() == [], "run: python scripts/gen_contract_types.py"


def test_generated_types_follow_the_contract():
    text = _generator().contract_types()
    for view, contract in VIEW_TRAITS.items():
        assert f"export interface {contract.__name__} {{" in text
        assert f"  {view}: {contract.__name__};" in text
    assert "  metrics: NodeMetrics;" in text  # an alias is named, not spelled out
    assert "  selected: string | null;" in text  # Unicode(allow_none=True)
    assert "  options?: SelectOption[];" in text  # total=False keys are optional
    assert "  hints: Record<string, string>;" in text  # the private base's fields are inlined
    assert "_FieldBase" not in text


def test_a_contract_change_makes_the_file_stale(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    gen = _generator()
    target = tmp_path / "_contract_types.d.ts"
    target.write_text(gen.contract_types())
    monkeypatch.setattr(gen, "CONTRACT_TS", target)
    monkeypatch.setattr(gen, "MIME_TS", ROOT / "extensions" / "src" / "mime.ts")
    assert gen.stale() == []
    contract = VIEW_TRAITS["memory"]
    monkeypatch.setitem(contract.__annotations__, "zoom", float)
    monkeypatch.setattr(contract, "__required_keys__", contract.__required_keys__ | {"zoom"})
    assert gen.stale() == [target]
    assert "  zoom: number;" in gen.contract_types()
    assert gen.main(["--check"]) == 1


def test_mime_has_one_definition():
    mime_ts = (ROOT / "extensions" / "src" / "mime.ts").read_text()
    assert re.findall(r"export const LABKIT_MIME = '([^']+)';", mime_ts) == [LABKIT_MIME]
    fallback = (ROOT / "extensions" / "src" / "fallback.ts").read_text()
    assert "import { LABKIT_MIME } from './mime';" in fallback
    for path in (ROOT / "extensions" / "src").glob("*.ts"):
        if path.name != "mime.ts":
            assert "vnd.labkit.view" not in path.read_text(), (
                f"{path.name} writes the MIME type again"
            )
