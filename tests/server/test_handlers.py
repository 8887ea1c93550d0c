"""labkit's server extension under a real ``jupyter server``."""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jupyter_process import JupyterProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    root = tmp_path_factory.mktemp("server-root")
    proc = JupyterProcess(root, app="server", log_path=root.parent / "server.log").start()
    yield proc
    proc.stop()


def test_doctor_endpoint_returns_the_report(server: JupyterProcess):
    data = server.get_json("labkit/api/doctor")
    assert data["ok"] is True, data
    by_name = {c["name"]: c for c in data["checks"]}
    assert by_name["torch"]["status"] == "ok"
    assert by_name["server extension"]["status"] == "ok"
    assert set(by_name["torch"]) == {"name", "status", "detail", "required", "fix"}


def test_doctor_endpoint_needs_the_token(server: JupyterProcess):
    with pytest.raises(urllib.error.HTTPError) as info:
        server.request("labkit/api/doctor", token=False)
    assert info.value.code == 403
    info.value.close()


def test_extension_is_listed_as_loaded(server: JupyterProcess):
    log = Path(server.log_path).read_text()
    assert "labkit server extension loaded" in log


def test_repr(server: JupyterProcess):
    assert repr(server) == f"JupyterProcess(app='server', url='{server.base_url}', running)"
