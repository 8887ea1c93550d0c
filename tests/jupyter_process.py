"""A real Jupyter server (``jupyter lab`` or ``jupyter server``) as a child process.

Used by tests/browser (JupyterLab in Chromium) and tests/server (the labkit
server extension). It starts on a free 127.0.0.1 port with a random token in
its own process group, waits until ``/api/status`` answers, and on ``stop()``
terminates the whole group, then any descendant that escaped it (kernels run
in their own session), so no process outlives the test session.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterProcess:
    """``python -m jupyter <app>`` serving ``root_dir`` on 127.0.0.1.

    Args:
        root_dir: The server's root directory (notebooks are written here).
        app: ``"lab"`` or ``"server"``.
        log_path: Where the server's stdout and stderr go.
        startup_timeout: Seconds to wait for ``/api/status``.
    """

    def __init__(
        self, root_dir: Path, *, app: str = "lab", log_path: Path, startup_timeout: float = 60
    ) -> None:
        self.root_dir = Path(root_dir)
        self.app = app
        self.log_path = Path(log_path)
        self.startup_timeout = startup_timeout
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.proc: subprocess.Popen[bytes] | None = None
        self._seen: dict[int, psutil.Process] = {}

    def __repr__(self) -> str:
        state = "running" if self.proc and self.proc.poll() is None else "stopped"
        return f"JupyterProcess(app={self.app!r}, url={self.base_url!r}, {state})"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def url(self, path: str = "") -> str:
        """Absolute URL of ``path`` with the token as a query parameter."""
        sep = "&" if "?" in path else "?"
        return f"{self.base_url}{path.lstrip('/')}{sep}token={self.token}"

    def start(self) -> JupyterProcess:
        home = self.root_dir.parent / f"{self.root_dir.name}-home"
        env = {
            **os.environ,
            # keep the user's settings and workspaces out of the test
            "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
            "JUPYTER_RUNTIME_DIR": str(home / "runtime"),
            "PYTHONUNBUFFERED": "1",
        }
        cmd = [
            sys.executable,
            "-m",
            "jupyter",
            self.app,
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
        ]
        if os.geteuid() == 0:  # CI runs as root
            cmd.append("--ServerApp.allow_root=True")
        if self.app == "lab":
            cmd += [
                "--LabApp.news_url=",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ]
        # no "get notified about Jupyter news?" toast over the page
        notification = home / "settings" / "@jupyterlab" / "apputils-extension"
        notification.mkdir(parents=True, exist_ok=True)
        (notification / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"jupyter {self.app} exited with {self.proc.returncode} before answering; "
                    f"see {self.log_path}:\n{self.log_path.read_text()[-3000:]}"
                )
            try:
                self.get_json("api/status")
                return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        self.stop()
        raise TimeoutError(
            f"jupyter {self.app} did not answer /api/status within {self.startup_timeout} s; "
            f"see {self.log_path}"
        )

    def request(self, path: str, *, method: str = "GET", token: bool = True, body=None):
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base_url + path.lstrip("/"), data=data, method=method)
        if token:
            req.add_header("Authorization", f"token {self.token}")
        return urllib.request.urlopen(req, timeout=60)

    def get_json(self, path: str, **kwargs):
        with self.request(path, **kwargs) as resp:
            return json.loads(resp.read())

    def post(self, path: str, body, *, token: bool = True) -> tuple[int, dict]:
        """(status, answer) of a POST; ``body`` is JSON-encoded unless it is bytes. An error
        status is returned, not raised; an answer that is not JSON comes as ``{"raw": text}``."""
        try:
            with self.request(path, method="POST", body=body, token=token) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            with exc:
                text = exc.read()
            try:
                return exc.code, json.loads(text)
            except ValueError:
                return exc.code, {"raw": text.decode(errors="replace")[:500]}

    def descendants(self) -> list[psutil.Process]:
        """Live processes started by the server (kernels included), remembered across calls."""
        if self.proc is None:
            return []
        try:
            for p in psutil.Process(self.proc.pid).children(recursive=True):
                self._seen[p.pid] = p
        except psutil.NoSuchProcess:
            pass
        return [p for p in self._seen.values() if p.is_running()]

    def stop(self, timeout: float = 15) -> None:
        """SIGTERM the process group (the server shuts its kernels down), then SIGKILL leftovers."""
        if self.proc is None:
            return
        children = self.descendants()
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout)
        with contextlib.suppress(ProcessLookupError):  # anything left in the group
            os.killpg(self.proc.pid, signal.SIGKILL)
        _, alive = psutil.wait_procs(children, timeout=timeout)
        for p in alive:  # escaped the group (kernels run in their own session)
            p.kill()
        psutil.wait_procs(alive, timeout=timeout)
