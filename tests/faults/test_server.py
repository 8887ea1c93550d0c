"""Fault table, server extension (a real ``jupyter server``): hostile requests get a 400 with a
message, never a 500; the server log stays bounded; hidden notebooks are hidden as the
Contents API hides them."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.jupyter_process import JupyterProcess
from tests.promote._notebooks import numbered, write_notebook
from tests.promote.test_analyze import FIT, HEAD, LAB, MODEL

PROMOTE, STOP = "labkit/api/promote", "labkit/api/stop"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    root = tmp_path_factory.mktemp("faults-root")
    for folder in (".hidden", "visible"):
        (root / folder).mkdir()
        write_notebook(root / folder / "h.ipynb", numbered(HEAD, MODEL, LAB, FIT))
    proc = JupyterProcess(root, app="server", log_path=root.parent / "faults-server.log").start()
    yield proc
    proc.stop()


def _post(server: JupyterProcess, route: str, data: bytes) -> tuple[int, dict]:
    return server.post(route, data)


@pytest.mark.parametrize(
    ("route", "data", "message"),
    [
        (PROMOTE, json.dumps({"path": "a\0b.ipynb"}).encode(), r"contains a NUL byte"),
        (PROMOTE, b"[" * 30_000 + b"]" * 30_000, r"nests JSON too deeply"),
        (STOP, b"[" * 30_000 + b"]" * 30_000, r"nests JSON too deeply"),
        (PROMOTE, json.dumps({"path": "a" * (10 << 20)}).encode(),
         r"the request body is 10485\d\d\d bytes; at most 65536"),
        (PROMOTE, json.dumps({"path": "a" * 5000 + ".ipynb"}).encode(),
         r"the path is 5006 characters long; at most 4096"),
        (PROMOTE, json.dumps({"path": "a" * 300 + ".ipynb"}).encode(), r"File name too long"),
    ],
    ids=["nul-byte", "nested-body", "nested-stop-body", "10mb-path", "long-path", "long-name"],
)  # fmt: skip
def test_hostile_requests_get_400_with_a_message(
    server: JupyterProcess, route: str, data: bytes, message: str
) -> None:
    status, answer = _post(server, route, data)
    assert status == 400, answer
    assert re.search(message, answer["message"]), answer
    assert len(answer["message"]) < 300


def test_server_log_lines_stay_bounded(server: JupyterProcess) -> None:
    _post(server, PROMOTE, json.dumps({"path": "b" * (10 << 20)}).encode())
    _post(server, PROMOTE, json.dumps({"path": "c" * 4000 + "\0"}).encode())
    longest = max(len(line) for line in server.log_path.read_text(errors="replace").splitlines())
    assert longest < 2000


def test_hidden_notebook_is_hidden_like_the_contents_api(server: JupyterProcess) -> None:
    with pytest.raises(urllib.error.HTTPError) as info:  # the reference: the Contents API
        server.get_json("api/contents/.hidden/h.ipynb")
    assert info.value.code == 404
    info.value.close()
    status, answer = _post(server, PROMOTE, json.dumps({"path": ".hidden/h.ipynb"}).encode())
    assert status == 404 and answer["message"] == ".hidden/h.ipynb: no such notebook"
    assert not (server.root_dir / ".hidden" / "h.py").exists()
    status, answer = _post(server, PROMOTE, json.dumps({"path": "visible/h.ipynb"}).encode())
    assert status == 200 and answer["script"] == "visible/h.py"  # the same notebook, visible
