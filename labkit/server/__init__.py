"""labkit's Jupyter server extension: ``/labkit/api/doctor``, ``/promote`` and ``/stop``.

Enabled by ``jupyter-config/jupyter_server_config.d/labkit.json`` (installed
into ``<prefix>/etc/jupyter``), or by hand with
``jupyter server extension enable labkit.server --sys-prefix``.
"""

from __future__ import annotations

from typing import Any

__all__: list[str] = []


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "labkit.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from labkit.server.handlers import setup_handlers

    setup_handlers(serverapp.web_app)
    serverapp.log.info(
        "labkit server extension loaded: GET /labkit/api/doctor, POST /labkit/api/promote, "
        "POST /labkit/api/stop"
    )
