"""``POST /labkit/api/stop``: stop a running fit while its cell runs.

Body: ``{"token": "<the dashboard's stop token>"}``. Answers 200
``{"stopping": true}`` once the fit's stop file exists (the trainer stops every rank
after the current step), 400 for a malformed body, 404 when no running fit has the
token. Authenticated and XSRF-checked like every Jupyter API (``APIHandler``); a thin
adapter over :func:`labkit._stops.request`.
"""

from __future__ import annotations

import json
from typing import Any

from jupyter_server.base.handlers import APIHandler
from tornado import web

from labkit._stops import StopRequestError, UnknownStopToken, request
from labkit.server._request import BadRequest, json_body

STOP_ROUTE = "labkit/api/stop"


class StopHandler(APIHandler):
    """``POST /labkit/api/stop``: see the module docstring."""

    @web.authenticated
    def post(self) -> None:
        try:
            body = json_body(self.request.body)
        except BadRequest as exc:
            return self._answer(400, {"message": str(exc)})
        token = body.get("token")
        if not isinstance(token, str):
            return self._answer(400, {"message": 'send {"token": "<stop token>"}'})
        try:
            request(token)
        except StopRequestError as exc:
            code = 404 if isinstance(exc, UnknownStopToken) else 400
            return self._answer(code, {"message": str(exc)})
        except OSError as exc:
            return self._answer(500, {"message": f"could not write the stop file: {exc}"})
        self.log.info("labkit: stop requested through the server extension")
        self._answer(200, {"stopping": True})

    def _answer(self, status: int, payload: dict[str, Any]) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(json.dumps(payload))
