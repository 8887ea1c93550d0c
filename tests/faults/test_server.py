"""Fault table, server extension (a real ``jupyter server``): hostile requests get a 400 with a
message, never a 500; the server log stays bounded; hidden notebooks are hidden as the
Contents API hides them; hostile notebook names promote to scripts that run nothing from
the name; hostile notebook content (lone surrogates, code too deep to parse, a file over
256 MiB) is answered with a 4xx naming the cell or the file."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.faults.test_promote_names import HOSTILE, LAB_CELLS, _same_code
from tests.jupyter_process import JupyterProcess
from tests.promote._notebooks import numbered, write_notebook
from tests.promote.test_analyze import FIT, HEAD, LAB, MODEL

SERVER_NAMES = {k: HOSTILE[k] for k in ("triple-double", "newline", "N-escape", "quotes")}
DEEP = {
    "sum": "x = " + "+".join(["1"] * 100_000),
    "unary": "x = " + "-" * 200_000 + "1",
}

PROMOTE, STOP = "labkit/api/promote", "labkit/api/stop"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    root = tmp_path_factory.mktemp("faults-root")
    for folder in (".hidden", "visible"):
        (root / folder).mkdir()
        write_notebook(root / folder / "h.ipynb", numbered(HEAD, MODEL, LAB, FIT))
    (root / "names").mkdir()
    for name in [*SERVER_NAMES.values(), "benign"]:
        write_notebook(root / "names" / f"{name}.ipynb", numbered(*LAB_CELLS))
    write_notebook(
        root / "surrogate.ipynb", numbered("x = 1", "y = '\ud800'\nprint(y)"), escaped=True
    )
    for kind, source in DEEP.items():
        write_notebook(root / f"deep-{kind}.ipynb", numbered("y = 2", source))
    with (root / "huge.ipynb").open("wb") as fh:  # sparse: 300 MiB that take no disk
        fh.truncate(300 << 20)
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
        (
            PROMOTE,
            json.dumps({"path": "a" * (10 << 20)}).encode(),
            r"the request body is 10485\d\d\d bytes; at most 65536",
        ),
        (
            PROMOTE,
            json.dumps({"path": "a" * 5000 + ".ipynb"}).encode(),
            r"the path is 5006 characters long; at most 4096",
        ),
        (PROMOTE, json.dumps({"path": "a" * 300 + ".ipynb"}).encode(), r"File name too long"),
        (PROMOTE, json.dumps({"path": "\ud800.ipynb"}).encode(), r"surrogates not allowed"),
    ],
    ids=[
        "nul-byte",
        "nested-body",
        "nested-stop-body",
        "10mb-path",
        "long-path",
        "long-name",
        "lone-surrogate-path",
    ],
)
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


@pytest.mark.parametrize("name", list(SERVER_NAMES.values()), ids=list(SERVER_NAMES))
def test_hostile_names_promote_to_scripts_that_run_nothing_from_them(
    server: JupyterProcess, name: str
) -> None:
    status, answer = _post(
        server, PROMOTE, json.dumps({"path": "names/benign.ipynb", "force": True}).encode()
    )
    assert status == 200, answer
    status, answer = _post(server, PROMOTE, json.dumps({"path": f"names/{name}.ipynb"}).encode())
    assert status == 200, answer
    assert answer["script"] == f"names/{name}.py"
    folder = server.root_dir / "names"
    _same_code((folder / f"{name}.py").read_text(), (folder / "benign.py").read_text(), name)
    (folder / f"{name}.py").unlink()


def test_a_lone_surrogate_in_a_cell_is_a_400_naming_the_cell(server: JupyterProcess) -> None:
    status, answer = _post(server, PROMOTE, json.dumps({"path": "surrogate.ipynb"}).encode())
    assert status == 400, answer
    assert answer["message"].startswith("cell 2 (In [2]) line 1 holds a lone surrogate (U+D800)")
    assert not (server.root_dir / "surrogate.py").exists()


@pytest.mark.parametrize("kind", list(DEEP))
def test_code_too_deep_to_parse_is_a_400_naming_the_cell(server: JupyterProcess, kind: str) -> None:
    status, answer = _post(server, PROMOTE, json.dumps({"path": f"deep-{kind}.ipynb"}).encode())
    assert status == 400, answer
    assert answer["message"].startswith("cell 2 (In [2]): the code nests too deeply")


def test_a_notebook_over_the_limit_is_a_413(server: JupyterProcess) -> None:
    status, answer = _post(server, PROMOTE, json.dumps({"path": "huge.ipynb"}).encode())
    assert status == 413, answer
    assert answer["message"].startswith("huge.ipynb: the notebook is 300.00 MiB (314572800 bytes)")
    assert "256.00 MiB" in answer["message"]
