"""``POST /labkit/api/promote`` under a real ``jupyter server``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.jupyter_process import JupyterProcess
from tests.promote._notebooks import numbered, write_notebook
from tests.promote.test_analyze import FIT, HEAD, LAB, MODEL

ROUTE = "labkit/api/promote"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterProcess]:
    root = tmp_path_factory.mktemp("promote-root")
    (root / "sub").mkdir()
    write_notebook(root / "sub" / "train.ipynb", numbered(HEAD, MODEL, LAB, FIT))
    write_notebook(root / "broken.ipynb", numbered(HEAD, "m = width + 1"))
    (root / "bad.ipynb").write_text("{nope")
    outside = root.parent / "outside.ipynb"
    write_notebook(outside, numbered(HEAD, MODEL, LAB, FIT))
    (root / "link.ipynb").symlink_to(outside)
    proc = JupyterProcess(root, app="server", log_path=root.parent / "promote-server.log").start()
    yield proc
    proc.stop()


def _post(server: JupyterProcess, body: dict, *, token: bool = True) -> tuple[int, dict]:
    return server.post(ROUTE, body, token=token)


def _scripts(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*.py"))


def test_promote_writes_the_script_then_asks_before_overwriting(server: JupyterProcess):
    status, data = _post(server, {"path": "sub/train.ipynb"})
    assert status == 200, data
    assert data["script"] == "sub/train.py" and data["warnings"] == []
    assert data["report_lines"] == ["left out of the script: nothing"]
    assert data["report"]["groups"] == [] and data["report"]["counts"] == {}
    assert (server.root_dir / "sub" / "train.py").read_text().startswith("#!/usr/bin/env python")
    status, data = _post(server, {"path": "sub/train.ipynb"})
    assert status == 409 and data["script"] == "sub/train.py"
    assert "exists; pass --force" in data["message"]
    status, data = _post(server, {"path": "sub/train.ipynb", "force": True})
    assert status == 200, data


def test_errors_name_the_cell_and_write_nothing(server: JupyterProcess):
    status, data = _post(server, {"path": "broken.ipynb"})
    assert status == 400
    assert "cell 2 (In [2]) line 1 uses undefined name 'width'" in data["message"]
    assert {p["name"] for p in data["problems"] if p["severity"] == "error"} >= {"width"}
    assert str(server.root_dir) not in json.dumps(data)  # no server paths leak
    status, data = _post(server, {"path": "bad.ipynb"})
    assert status == 400 and "bad.ipynb: not a notebook" in data["message"]
    assert "broken.py" not in _scripts(server.root_dir) and "bad.py" not in _scripts(
        server.root_dir
    )


@pytest.mark.parametrize("path", ["../outside.ipynb", "sub/../../outside.ipynb", "link.ipynb"])
def test_paths_outside_the_root_are_refused(server: JupyterProcess, path: str):
    status, data = _post(server, {"path": path})
    assert status == 403 and "outside the server's root" in data["message"]
    assert not (server.root_dir.parent / "outside.py").exists()


@pytest.mark.parametrize(
    ("body", "status"),
    [({}, 400), ({"path": ""}, 400), ({"path": "sub"}, 400), ({"path": "nope.ipynb"}, 404)],
)
def test_bad_requests(server: JupyterProcess, body: dict, status: int):
    assert _post(server, body)[0] == status


def test_request_without_token_is_refused(server: JupyterProcess):
    before = _scripts(server.root_dir)
    status, _ = _post(server, {"path": "sub/train.ipynb", "force": True}, token=False)
    assert status == 403
    assert _scripts(server.root_dir) == before


def test_the_answer_carries_the_report_and_show_results(server: JupyterProcess):
    root = server.root_dir
    write_notebook(root / "shown.ipynb", numbered(HEAD, MODEL + "\nmodel", LAB, FIT))
    status, data = _post(server, {"path": "shown.ipynb"})
    assert status == 200, data
    assert data["report"]["groups"] == [
        {
            "reason": "displayed result",
            "items": [
                {
                    "cell": 2,
                    "label": "cell 2 (In [2])",
                    "line": 3,
                    "source": "model",
                    "reason": "displayed result",
                }
            ],
        }
    ]
    assert "    cell 2 (In [2]) line 3: model" in data["report_lines"]
    status, data = _post(server, {"path": "shown.ipynb", "force": True, "show_results": True})
    assert status == 200 and data["report"]["counts"] == {"results printed": 1}
    assert "\nprint(model)\n" in (root / "shown.py").read_text()


def test_verify_after_writing(server: JupyterProcess):
    root = server.root_dir
    write_notebook(root / "v.ipynb", numbered("import math", "x = math.sqrt(16)\nprint(x)", "x"))
    status, data = _post(server, {"path": "v.ipynb", "verify": True, "show_results": True})
    assert status == 200, data
    assert data["verification"]["outcome"] == "identical"
    assert data["verification"]["summary"] == "identical (2 lines)"
    write_notebook(root / "w.ipynb", numbered("print(1)", "print(y)"))  # y: the kernel's history
    status, data = _post(server, {"path": "w.ipynb", "verify": True})
    assert status == 400 and "'y'" in data["message"]  # refused before anything runs
