"""``labkit doctor``: the report, its exit status, and a machine without assets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from labkit.doctor import LIBRARIES, Check, check, exit_code, render, to_json

LABKIT = Path(sys.executable).parent / "labkit"


def run_doctor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LABKIT), "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_doctor_exits_0_in_the_set_up_environment():
    proc = run_doctor()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "all required pieces ready" in proc.stdout
    for dist, _ in LIBRARIES:
        assert any(line.split()[:2] == ["ok", dist] for line in proc.stdout.splitlines()), dist
    for piece in ("cpu", "widget assets", "lab extension", "server extension"):
        assert f"ok       {piece}" in proc.stdout


def test_doctor_names_missing_widget_assets_and_the_fix(tmp_path: Path):
    proc = run_doctor(env={"LABKIT_WIDGET_ASSETS": str(tmp_path)})
    assert proc.returncode == 1
    line = next(ln for ln in proc.stdout.splitlines() if "widget assets" in ln)
    assert line.startswith("missing")
    assert str(tmp_path) in line
    assert "fix: make lab" in line
    assert "not ready: widget assets" in proc.stdout


def test_doctor_json(tmp_path: Path):
    proc = run_doctor("--json", env={"LABKIT_WIDGET_ASSETS": str(tmp_path)})
    data = json.loads(proc.stdout)
    assert data["ok"] is False
    by_name = {c["name"]: c for c in data["checks"]}
    assert by_name["widget assets"]["status"] == "missing"
    assert by_name["torch"]["status"] == "ok"
    assert set(by_name["torch"]) == {"name", "status", "detail", "required", "fix"}


def test_check_is_ordered_and_complete():
    names = [c.name for c in check()]
    assert names[: len(LIBRARIES)] == [dist for dist, _ in LIBRARIES]
    assert "cpu" in names
    assert any(n == "cuda" or n.startswith("cuda:") for n in names)
    assert names[-3:] == ["widget assets", "lab extension", "server extension"]


@pytest.mark.parametrize(
    ("checks", "code"),
    [
        ([Check("a", "ok", "1.0")], 0),
        ([Check("a", "ok"), Check("cuda", "missing", required=False)], 0),
        ([Check("a", "ok"), Check("b", "missing", fix="make lab")], 1),
        ([Check("b", "broken", "bad", fix="x")], 1),
    ],
)
def test_exit_code(checks: list[Check], code: int):
    assert exit_code(checks) == code
    assert json.loads(to_json(checks))["ok"] is (code == 0)


def test_render_lines():
    text = render(
        [
            Check("torch", "ok", "2.13.0"),
            Check("cuda", "missing", "none", required=False),
            Check("widget assets", "missing", "not built", fix="make lab"),
        ]
    )
    assert text.splitlines() == [
        "ok       torch              2.13.0",
        "missing* cuda               none",
        "missing  widget assets      not built  -> fix: make lab",
        "",
        "1 required piece(s) not ready: widget assets",
        "(* optional)",
    ]


def test_check_repr():
    c = Check("torch", "missing", "not installed", fix="make lab")
    assert repr(c) == (
        "Check(name='torch', status='missing', detail='not installed', required=True, "
        "fix='make lab')"
    )


def test_import_doctor_stays_light():
    heavy = ("lightning", "torch_geometric", "torchao", "torch")
    code = f"import sys, labkit.doctor; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    assert out.strip() == "[]"


def test_disabled_extensions_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A user config that disables both extensions makes doctor say so, with the fix."""
    (tmp_path / "labconfig").mkdir()
    (tmp_path / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"labkit": True}})
    )
    (tmp_path / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"labkit.server": False}}})
    )
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("JUPYTER_PREFER_ENV_PATH", "0")  # user config above the venv's
    by_name = {c.name: c for c in check()}
    lab, server = by_name["lab extension"], by_name["server extension"]
    assert (lab.status, lab.detail, lab.fix) == (
        "broken",
        "installed but disabled",
        "jupyter labextension enable labkit",
    )
    assert server.status == "missing"
    assert server.fix == "jupyter server extension enable labkit.server --sys-prefix"


def test_a_crashing_piece_is_reported_broken(monkeypatch: pytest.MonkeyPatch):
    import labkit.doctor as doctor

    def boom() -> None:
        raise RuntimeError("config unreadable")

    monkeypatch.setattr(doctor, "_lab_extension", boom)
    lab = next(c for c in doctor.check() if c.name == "lab extension")
    assert lab.status == "broken"
    assert lab.detail == "check failed: RuntimeError: config unreadable"
    assert lab.fix == doctor.SETUP_FIX
