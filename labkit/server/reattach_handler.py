"""``POST /labkit/api/reattach``: a reloaded page asks a busy kernel for its live dashboard.

Body: ``{"token": "<the dashboard's token>"}`` (the one Stop posts). Answers 200
``{"reattaching": true}`` once the request is left for the kernel (the dashboard's thread
sends its widget state again within :data:`labkit._reattach.POLL_S`), 400 for a malformed
body, 404 when no running fit has the token (it ended: ipywidgets restores the widget).
A thin adapter over :func:`labkit._reattach.request`.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from labkit._reattach import request
from labkit._stops import StopRequestError, UnknownStopToken
from labkit.server._request import BadRequest, json_body

REATTACH_ROUTE = "labkit/api/reattach"


class ReattachHandler(APIHandler):
    """``POST /labkit/api/reattach``: see the module docstring."""

    @web.authenticated
    def post(self) -> None:
        try:
            body = json_body(self.request.body)
        except BadRequest as exc:
            return self._answer(400, {"message": str(exc)})
        token = body.get("token")
        if not isinstance(token, str):
            return self._answer(400, {"message": 'send {"token": "<dashboard token>"}'})
        try:
            request(token)
        except StopRequestError as exc:
            code = 404 if isinstance(exc, UnknownStopToken) else 400
            return self._answer(code, {"message": str(exc)})
        except OSError as exc:
            return self._answer(500, {"message": f"could not leave the request: {exc}"})
        self._answer(200, {"reattaching": True})

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(payload))
