"""A built wheel carries everything JupyterLab needs: bundles, lab and server extensions."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_built_assets_and_jupyter_config(tmp_path: Path):
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip_wheel, "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("labkit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "labkit-0.1.0.data/data/"
    built = [
        p.relative_to(ROOT / "labkit" / "labextension")
        for p in (ROOT / "labkit" / "labextension").rglob("*")
        if p.is_file()
    ]
    assert built, "labkit/labextension is empty: run make lab"
    for rel in built:
        assert f"labkit/labextension/{rel}" in names
        assert f"{data}share/jupyter/labextensions/labkit/{rel}" in names
    assert f"{data}etc/jupyter/jupyter_server_config.d/labkit.json" in names
    assert "labkit/views/static/manifest.json" in names
    assert "labkit/py.typed" in names
