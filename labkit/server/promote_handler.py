"""``POST /labkit/api/promote``: promote a notebook under the server's root to a script.

Body: ``{"path": "dir/train.ipynb", "force": false, "show_results": false, "verify":
false}`` (``path`` relative to the server root, as the Contents API names files; ``verify``
runs ``labkit promote --verify`` after writing and adds ``"verification": {"outcome",
"summary", "hidden", ...}``). Answers:

- 200 ``{"script": "dir/train.py", "warnings": [...], "report": {...}, "report_lines":
  [...]}`` (what the script leaves out, by cell and line: :mod:`labkit.promote.report`);
- 400 ``{"message": ..., "problems": [...]}`` for a notebook that cannot be promoted
  (every error names the cell and the name);
- 400 for a body over 64 KiB or nested too deeply, a path with a NUL byte or longer than
  4096 characters (see :mod:`labkit.server._request`);
- 403 for a path outside the server root; 404 for a missing or hidden notebook (hidden
  as the Contents API hides it, unless ``ContentsManager.allow_hidden``);
- 409 when the script exists and ``force`` is false (the front end asks, then resends);
- 413 for a notebook file over 256 MiB (``labkit.promote.notebook.MAX_NOTEBOOK_BYTES``);
- 500 ``{"message": ...}`` naming the failure (never a traceback) for anything else.

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

from labkit._format import first_line
from labkit.server._request import QUOTE, BadRequest, checked_path, json_body, quote

PROMOTE_ROUTE = "labkit/api/promote"


class PromoteHandler(APIHandler):
    """``POST /labkit/api/promote``: see the module docstring."""

    @web.authenticated
    async def post(self) -> None:
        try:
            status, payload = await self._promote()
        except Exception as exc:  # the last line: a 500 naming it, no traceback
            self.log.error("labkit promote failed: %s: %s", type(exc).__name__, quote(str(exc)))
            status, payload = (
                500,
                {
                    "message": f"labkit could not promote the notebook: {type(exc).__name__}: "
                    f"{first_line(str(exc))[:QUOTE]}"
                },
            )
        self._answer(status, payload)

    async def _promote(self) -> tuple[int, dict[str, Any]]:
        from labkit.promote import NotebookError, PromoteError, TargetExistsError, promote
        from labkit.promote.notebook import NotebookTooLargeError

        try:
            body = json_body(self.request.body)
            path = checked_path(body.get("path"), '{"path": "<notebook>.ipynb"}')
        except BadRequest as exc:
            return 400, {"message": str(exc)}
        root = Path(self.settings.get("server_root_dir") or self.contents_manager.root_dir)
        root = root.expanduser().resolve()
        try:
            notebook = (root / path.lstrip("/")).resolve()
        except (OSError, ValueError, RuntimeError) as exc:  # a symlink loop, ...
            return 400, {"message": f"the path {quote(path)}: {_reason(exc)}"}
        if not notebook.is_relative_to(root):
            return 403, {"message": f"{path}: outside the server's root directory"}
        if notebook.suffix != ".ipynb":
            return 400, {"message": f"{path}: not a notebook (.ipynb)"}
        try:
            found = notebook.is_file()
            hidden = found and self._hidden(root, path, notebook)  # the Contents API's rule
        except (OSError, ValueError) as exc:  # e.g. a name over the filesystem's 255 bytes
            return 400, {"message": f"the path {quote(path)}: {_reason(exc)}"}
        if not found or hidden:
            return 404, {"message": f"{path}: no such notebook"}
        force = body.get("force") is True
        show = body.get("show_results") is True
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(
                None, lambda: promote(notebook, force=force, show_results=show)
            )
        except TargetExistsError as exc:
            script = notebook.with_suffix(".py").relative_to(root).as_posix()
            return 409, {"message": _relative(str(exc), root), "script": script}
        except PromoteError as exc:
            problems = [p.to_dict() for p in exc.problems]
            for p in problems:
                p["message"] = _relative(str(p["message"]), root)
            first = next(p["message"] for p in problems if p["severity"] == "error")
            return 400, {"message": first, "problems": problems}
        except NotebookTooLargeError as exc:
            return 413, {"message": _relative(str(exc), root)}
        except (NotebookError, OSError, RecursionError, MemoryError) as exc:
            text = str(exc) or type(exc).__name__
            return 400, {"message": _relative(text, root)}
        assert result.script is not None
        answer: dict[str, Any] = {
            "script": result.script.resolve().relative_to(root).as_posix(),
            "warnings": list(result.warnings),
            "report": result.report.to_dict(),
            "report_lines": result.report.lines(),
        }
        if body.get("verify") is True:
            answer["verification"] = await loop.run_in_executor(
                None, lambda: _verified(result, root)
            )
        return 200, answer

    def _hidden(self, root: Path, path: str, notebook: Path) -> bool:
        """Whether the Contents API hides ``path`` (a dot name on the way, or a hidden flag)."""
        if getattr(self.contents_manager, "allow_hidden", False):
            return False
        try:
            return is_hidden(str(root / path.lstrip("/")), str(root))
        except ValueError:  # ".." through a symlink: judge where it leads
            return is_hidden(str(notebook), str(root))

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        if self._finished:  # pragma: no cover - the client went away meanwhile
            return
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(payload))


def _relative(message: str, root: Path) -> str:
    """``message`` without the server root's absolute path (the client names files from it)."""
    return message.replace(str(root) + "/", "")


def _reason(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _verified(result: Any, root: Path) -> dict[str, Any]:
    """``labkit promote --verify`` for the Promote request: the outcome as JSON, or why it
    could not be had (the notebook fails under Restart & Run All, the script fails)."""
    from labkit.promote import NotebookRunError, read_notebook
    from labkit.promote.verification import hidden_state, verify

    printed = frozenset(d.number for d in result.report.printed)
    try:
        trains = result.analysis is not None and result.analysis.fit is not None
        found = verify(result.notebook, result.script, results_of=printed, fit=trains)
        return dict(found.to_dict())
    except (NotebookRunError, RuntimeError, OSError) as exc:
        hidden = hidden_state(read_notebook(result.notebook))
        text = _relative(first_line(str(exc)) or type(exc).__name__, root)
        return {"outcome": "failed", "summary": f"could not verify: {text}", "hidden": list(hidden)}
