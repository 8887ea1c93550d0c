"""``POST /labkit/api/reattach`` under a real ``jupyter server``: a running fit's token leaves
the request its dashboard's thread takes; unknown or malformed tokens are refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit import _reattach
from labkit import _stops as stops
from tests.jupyter_process import JupyterProcess

ROUTE = "labkit/api/reattach"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    root = tmp_path_factory.mktemp("reattach-root")
    proc = JupyterProcess(root, app="server", log_path=root.parent / "reattach.log").start()
    yield proc
    proc.stop()


def _registry(server: JupyterProcess) -> Path:
    # JupyterProcess gives the server (and so its kernels) this runtime dir
    return server.root_dir.parent / f"{server.root_dir.name}-home" / "runtime" / "labkit-stop"


def test_a_running_fits_token_leaves_a_request_for_its_dashboard(server, tmp_path):
    token = stops.register(tmp_path / "STOP", root=_registry(server))
    assert not _reattach.take(token, root=_registry(server))
    assert server.post(ROUTE, {"token": token}) == (200, {"reattaching": True})
    assert _reattach.take(token, root=_registry(server))  # what the dashboard's thread sees
    assert not _reattach.take(token, root=_registry(server))  # once
    assert not (tmp_path / "STOP").exists()  # a re-attach never stops the fit
    stops.unregister(token, root=_registry(server))
    code, body = server.post(ROUTE, {"token": token})
    assert code == 404 and "no running fit" in body["message"], body


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        ({}, 400, '{"token"'),
        ({"token": "../../etc/passwd"}, 400, "dashboard's token"),
        ({"token": "A" * 24}, 404, "no running fit"),
    ],
)
def test_bad_requests_name_the_fix(server, body, code, says):
    got, answer = server.post(ROUTE, body)
    assert got == code and says in answer["message"], answer


def test_without_the_server_token_nothing_is_left(server):
    code, _ = server.post(ROUTE, {"token": "A" * 24}, token=False)
    assert code == 403
