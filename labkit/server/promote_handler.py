"""``POST /labkit/api/promote``: promote a notebook under the server's root to a script.

Body: ``{"path": "dir/train.ipynb", "force": false}`` (``path`` relative to the server
root, as the Contents API names files). Answers:

- 200 ``{"script": "dir/train.py", "warnings": [...]}``;
- 400 ``{"message": ..., "problems": [...]}`` for a notebook that cannot be promoted
  (every error names the cell and the name);
- 400 for a body over 64 KiB or nested too deeply, a path with a NUL byte or longer than
  4096 characters (see :mod:`labkit.server._request`);
- 403 for a path outside the server root; 404 for a missing or hidden notebook (hidden
  as the Contents API hides it, unless ``ContentsManager.allow_hidden``);
- 409 when the script exists and ``force`` is false (the front end asks, then resends).

Authenticated and XSRF-checked like every Jupyter API (``APIHandler``). Thin adapter over
:func:`labkit.promote.promote`, which runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from jupyter_core.paths import is_hidden
from jupyter_server.base.handlers import APIHandler
from tornado import web

from labkit.server._request import BadRequest, checked_path, json_body, quote

PROMOTE_ROUTE = "labkit/api/promote"


class PromoteHandler(APIHandler):
    """``POST /labkit/api/promote``: see the module docstring."""

    @web.authenticated
    async def post(self) -> None:
        from labkit.promote import NotebookError, PromoteError, TargetExistsError, promote

        try:
            body = json_body(self.request.body)
            path = checked_path(body.get("path"), '{"path": "<notebook>.ipynb"}')
        except BadRequest as exc:
            return self._answer(400, {"message": str(exc)})
        root = Path(self.settings.get("server_root_dir") or self.contents_manager.root_dir)
        root = root.expanduser().resolve()
        notebook = (root / path.lstrip("/")).resolve()
        if not notebook.is_relative_to(root):
            return self._answer(403, {"message": f"{path}: outside the server's root directory"})
        if notebook.suffix != ".ipynb":
            return self._answer(400, {"message": f"{path}: not a notebook (.ipynb)"})
        try:
            found = notebook.is_file()
        except OSError as exc:  # e.g. a name over the filesystem's 255 bytes
            return self._answer(400, {"message": f"the path {quote(path)}: {exc.strerror}"})
        if not found or self._hidden(root, path, notebook):  # hidden: the Contents API's rule
            return self._answer(404, {"message": f"{path}: no such notebook"})
        force = body.get("force") is True
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(None, lambda: promote(notebook, force=force))
        except TargetExistsError as exc:
            script = notebook.with_suffix(".py").relative_to(root).as_posix()
            return self._answer(409, {"message": str(exc).replace(str(root) + "/", ""),
                                      "script": script})  # fmt: skip
        except PromoteError as exc:
            problems = [p.to_dict() for p in exc.problems]
            for p in problems:
                p["message"] = str(p["message"]).replace(str(root) + "/", "")
            first = next(p["message"] for p in problems if p["severity"] == "error")
            return self._answer(400, {"message": first, "problems": problems})
        except (NotebookError, OSError) as exc:
            return self._answer(400, {"message": str(exc).replace(str(root) + "/", "")})
        assert result.script is not None
        self._answer(
            200,
            {
                "script": result.script.resolve().relative_to(root).as_posix(),
                "warnings": list(result.warnings),
            },
        )

    def _hidden(self, root: Path, path: str, notebook: Path) -> bool:
        """Whether the Contents API hides ``path`` (a dot name on the way, or a hidden flag)."""
        if getattr(self.contents_manager, "allow_hidden", False):
            return False
        try:
            return is_hidden(str(root / path.lstrip("/")), str(root))
        except ValueError:  # ".." through a symlink: judge where it leads
            return is_hidden(str(notebook), str(root))

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(payload))
