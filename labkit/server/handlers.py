"""HTTP handlers of labkit's server extension (thin adapters over labkit.doctor)."""

from __future__ import annotations

import asyncio

from jupyter_server.base.handlers import APIHandler
from jupyter_server.utils import url_path_join
from tornado import web

from labkit import doctor

DOCTOR_ROUTE = "labkit/api/doctor"


class DoctorHandler(APIHandler):
    """``GET /labkit/api/doctor``: the doctor report as JSON, for logged-in users."""

    @web.authenticated
    async def get(self) -> None:
        loop = asyncio.get_running_loop()
        checks = await loop.run_in_executor(None, doctor.check)  # imports torch: off the loop
        self.set_header("Content-Type", "application/json")
        self.finish(doctor.to_json(checks))


def setup_handlers(web_app: web.Application) -> None:
    """Register labkit's routes under the server's base URL."""
    base_url = web_app.settings["base_url"]
    from labkit.server.promote_handler import PROMOTE_ROUTE, PromoteHandler
    from labkit.server.reattach_handler import REATTACH_ROUTE, ReattachHandler
    from labkit.server.stop_handler import STOP_ROUTE, StopHandler

    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base_url, DOCTOR_ROUTE), DoctorHandler),
            (url_path_join(base_url, PROMOTE_ROUTE), PromoteHandler),
            (url_path_join(base_url, STOP_ROUTE), StopHandler),
            (url_path_join(base_url, REATTACH_ROUTE), ReattachHandler),
        ],
    )
