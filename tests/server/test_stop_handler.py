"""``POST /labkit/api/stop`` under a real ``jupyter server``: the token a kernel registered
creates that fit's stop file, and nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from labkit import _stops as stops
from tests.jupyter_process import JupyterProcess

ROUTE = "labkit/api/stop"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    root = tmp_path_factory.mktemp("stop-root")
    proc = JupyterProcess(root, app="server", log_path=root.parent / "stop-server.log").start()
    yield proc
    proc.stop()


def _registry(server: JupyterProcess) -> Path:
    # JupyterProcess gives the server (and so its kernels) this runtime dir
    return server.root_dir.parent / f"{server.root_dir.name}-home" / "runtime" / "labkit-stop"


def _post(server: JupyterProcess, body, *, token: bool = True) -> tuple[int, dict]:
    return server.post(ROUTE, body, token=token)


def test_registered_token_creates_the_stop_file(server, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    token = stops.register(run / "STOP", root=_registry(server))
    assert not (run / "STOP").exists()
    assert _post(server, {"token": token}) == (200, {"stopping": True})
    assert (run / "STOP").exists()
    stops.unregister(token, root=_registry(server))
    code, body = _post(server, {"token": token})
    assert code == 404 and "no running fit" in body["message"], body


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        ({}, 400, '{"token"'),
        ({"token": "../../etc/passwd"}, 400, "stop token"),
        ({"token": "A" * 24}, 404, "no running fit"),
        (["token"], 400, '{"token"'),
    ],
)
def test_bad_requests_name_the_fix(server, body, code, says):
    got, answer = _post(server, body)
    assert got == code and says in answer["message"], answer


def test_entry_that_is_not_a_stop_file_is_refused(server, tmp_path):
    registry = _registry(server)
    token = stops.register(tmp_path / "STOP", root=registry)
    (registry / token).write_text(str(tmp_path / "notes.txt"))  # a tampered entry
    code, answer = _post(server, {"token": token})
    assert code == 400 and "does not name a labkit stop file" in answer["message"], answer
    assert not (tmp_path / "notes.txt").exists()


def test_needs_the_token(server, tmp_path):
    token = stops.register(tmp_path / "STOP", root=_registry(server))
    code, _ = _post(server, {"token": token}, token=False)
    assert code == 403 and not (tmp_path / "STOP").exists()


def test_default_registry_follows_the_runtime_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTER_RUNTIME_DIR", str(tmp_path / "rt"))
    assert stops.registry_dir() == tmp_path / "rt" / "labkit-stop"
