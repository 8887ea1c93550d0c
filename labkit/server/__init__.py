"""labkit's Jupyter server extension: ``/labkit/api/doctor``, ``/promote`` and ``/stop``.

Enabled by ``jupyter-config/jupyter_server_config.d/labkit.json`` (installed
into ``<prefix>/etc/jupyter``), or by hand with
``jupyter server extension enable labkit.server --sys-prefix``.
"""

from __future__ import annotations

from typing import Any

from labkit._lazy import moved_modules

__all__: list[str] = []

# the stop registry moved to labkit/_stops.py (the dashboard, a view, registers fits in it
# and must not import the server); the old path stays importable
moved_modules({f"{__name__}.stops": "labkit._stops"})


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "labkit.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from labkit.server.handlers import setup_handlers

    setup_handlers(serverapp.web_app)
    serverapp.log.info(
        "labkit server extension loaded: GET /labkit/api/doctor, POST /labkit/api/promote, "
        "POST /labkit/api/stop"
    )
