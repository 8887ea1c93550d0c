"""environment.yml is a valid conda environment for labkit."""

from __future__ import annotations

from pathlib import Path

import yaml

ENV_FILE = Path(__file__).resolve().parents[1] / "environment.yml"


def test_environment_yml_keys():
    env = yaml.safe_load(ENV_FILE.read_text())
    assert set(env) == {"name", "channels", "dependencies"}
    assert env["name"] == "labkit"
    assert env["channels"] == ["conda-forge"]
    deps = env["dependencies"]
    plain = [d for d in deps if isinstance(d, str)]
    assert "python=3.11" in plain
    assert "pip" in plain
    assert any(d.startswith("nodejs") for d in plain)
    pip_sections = [d["pip"] for d in deps if isinstance(d, dict)]
    assert pip_sections == [["-e .[dev]"]]
