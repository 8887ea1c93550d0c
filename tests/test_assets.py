"""Checking built widget bundles against their manifest and the sources."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from labkit._assets import (
    ENV_VAR,
    AssetReport,
    assets_dir,
    bundle_path,
    check_assets,
    source_entries,
)


def build(directory: Path, bundles: dict[str, bytes]) -> None:
    """Write bundles and a manifest the way widgets/build.mjs does."""
    directory.mkdir(parents=True, exist_ok=True)
    entries = []
    for name, data in bundles.items():
        (directory / f"{name}.js").write_bytes(data)
        entries.append(
            {
                "name": name,
                "file": f"{name}.js",
                "bytes": len(data),
                "sha256": hashlib.sha256(data).hexdigest(),
            }
        )
    (directory / "manifest.json").write_text(json.dumps({"version": 1, "bundles": entries}))


@pytest.fixture
def src(tmp_path: Path) -> Path:
    d = tmp_path / "src"
    d.mkdir()
    (d / "_shared.js").write_text("export const x = 1;\n")  # a helper: bundled into views
    (d / "memory.js").write_text('import { x } from "./_shared.js";\nexport default {};\n')
    return d


def test_ok(tmp_path: Path, src: Path):
    build(tmp_path / "static", {"memory": b"export{};"})
    report = check_assets(tmp_path / "static", src)
    assert report.ok
    assert report.bundles == ("memory",)


def test_nothing_built(tmp_path: Path, src: Path):
    report = check_assets(tmp_path, src)
    assert not report.ok
    assert report.problems == (f"no manifest.json in {tmp_path}: assets not built",)


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda f: f.unlink(), "is missing"),
        (lambda f: f.write_bytes(b"export{};;"), "has 10 bytes, manifest says 9"),
        (lambda f: f.write_bytes(b"export{}:"), "does not match its sha256"),
    ],
)
def test_damaged_bundle(tmp_path: Path, src: Path, damage, problem: str):
    build(tmp_path, {"memory": b"export{};"})
    damage(tmp_path / "memory.js")
    report = check_assets(tmp_path, src)
    assert not report.ok
    assert problem in report.problems[0]
    assert str(tmp_path / "memory.js") in report.problems[0]


def test_source_entry_not_built(tmp_path: Path, src: Path):
    (src / "graph.js").write_text("export default {};\n")
    build(tmp_path / "static", {"memory": b"export{};"})
    report = check_assets(tmp_path / "static", src)
    assert report.problems == ("widgets/src/graph.js is not built",)


def test_unreadable_manifest(tmp_path: Path):
    (tmp_path / "manifest.json").write_text("{not json")
    assert "is unreadable" in check_assets(tmp_path).problems[0]


def test_env_var_points_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert assets_dir() == tmp_path
    assert not check_assets().ok


def test_source_entries(src: Path, tmp_path: Path):
    assert source_entries(src) == ["memory"]  # helpers are not entries
    assert source_entries(tmp_path / "absent") is None


def test_bundle_path_names_the_fix(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="not built; fix: make lab"):
        bundle_path("graph", tmp_path)
    build(tmp_path, {"graph": b"x"})
    assert bundle_path("graph", tmp_path) == tmp_path / "graph.js"


def test_built_checkout_matches_sources():
    """The package's own static/ agrees with widgets/src (after `make`'s build)."""
    report = check_assets()
    assert report.ok, report.problems
    assert "memory" in report.bundles
    # views only: the helpers are inside the views, not bundles of their own
    assert not {"_charts", "_shared", "_ui", "_units"} & set(report.bundles)


def test_report_repr(tmp_path: Path):
    r = AssetReport(tmp_path, ("a",), ())
    assert repr(r) == f"AssetReport(directory={tmp_path!r}, bundles=('a',), problems=())"
