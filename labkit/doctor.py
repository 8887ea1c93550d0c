"""``labkit doctor``: is everything labkit needs installed, built and enabled?

:func:`check` is a pure function returning one :class:`Check` per piece:
library versions, devices, the widget bundles, the JupyterLab extension and
the Jupyter server extension. The CLI (``labkit doctor``) and the server
extension (``GET /labkit/api/doctor``) both render its result.

Heavy libraries are never imported here except torch (for devices); versions
come from package metadata.

Example:
    >>> from labkit.doctor import check, render
    >>> print(render(check()))  # doctest: +SKIP
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from labkit._assets import BUILD_FIX, check_assets

__all__ = ["Check", "check", "exit_code", "render", "to_json"]

Status = Literal["ok", "missing", "broken"]

SETUP_FIX = "make lab  (or: pip install -e '.[dev]' in the labkit checkout)"
LAB_EXTENSION = "labkit"
SERVER_EXTENSION = "labkit.server"

# (distribution name, import name)
LIBRARIES = (
    ("torch", "torch"),
    ("lightning", "lightning"),
    ("torch-geometric", "torch_geometric"),
    ("torchao", "torchao"),
    ("jupyterlab", "jupyterlab"),
    ("ipywidgets", "ipywidgets"),
    ("anywidget", "anywidget"),
)


@dataclass(frozen=True)
class Check:
    """The state of one piece of the environment.

    Args:
        name: What was checked, e.g. ``"torch"`` or ``"lab extension"``.
        status: ``"ok"``, ``"missing"`` or ``"broken"``.
        detail: A version, a device description, or what is wrong.
        required: Whether labkit needs it (``labkit doctor`` fails without it).
        fix: The command that repairs it (empty when ``status == "ok"``).

    Example:
        >>> Check("torch", "ok", "2.13.0").line()
        'ok       torch              2.13.0'
    """

    name: str
    status: Status
    detail: str = ""
    required: bool = True
    fix: str = ""

    @property
    def ok(self) -> bool:
        """True when the piece is present and working."""
        return self.status == "ok"

    @property
    def fails(self) -> bool:
        """True when a required piece is missing or broken."""
        return self.required and not self.ok

    def line(self) -> str:
        """One printable line: status, name, detail and, when not ok, the fix."""
        tag = self.status if self.ok or self.required else f"{self.status}*"
        text = f"{tag:<8} {self.name:<18} {self.detail}".rstrip()
        if not self.ok and self.fix:
            text += f"  -> fix: {self.fix}"
        return text

    def to_dict(self) -> dict[str, object]:
        """Plain-data form (what the server endpoint returns)."""
        return asdict(self)


def check() -> list[Check]:
    """Check libraries, devices, widget assets, and both Jupyter extensions.

    Returns:
        One :class:`Check` per piece, in a stable order.
    """
    checks = [_guarded(dist, _library, dist, module) for dist, module in LIBRARIES]
    checks += _guarded("devices", _devices)
    checks.append(_guarded("widget assets", _widget_assets))
    checks.append(_guarded("lab extension", _lab_extension))
    checks.append(_guarded("server extension", _server_extension))
    return checks


def _guarded(name: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Run one piece's check; an unexpected error becomes a "broken" line, not a traceback."""
    try:
        return fn(*args)
    except Exception as exc:
        broken = Check(name, "broken", f"check failed: {type(exc).__name__}: {exc}", fix=SETUP_FIX)
        return [broken] if fn is _devices else broken


def exit_code(checks: list[Check]) -> int:
    """0 when every required piece is ok, else 1."""
    return 1 if any(c.fails for c in checks) else 0


def render(checks: list[Check]) -> str:
    """Text report: one line per check and a closing verdict."""
    lines = [c.line() for c in checks]
    failing = [c.name for c in checks if c.fails]
    if failing:
        lines.append(f"\n{len(failing)} required piece(s) not ready: {', '.join(failing)}")
    else:
        lines.append("\nall required pieces ready")
    if any(not c.ok and not c.required for c in checks):
        lines.append("(* optional)")
    return "\n".join(lines)


def to_json(checks: list[Check]) -> str:
    """JSON report: ``{"ok": bool, "checks": [...]}``."""
    return json.dumps({"ok": exit_code(checks) == 0, "checks": [c.to_dict() for c in checks]})


# --------------------------------------------------------------------- pieces


def _library(dist: str, module: str) -> Check:
    try:
        version = metadata.version(dist)
    except metadata.PackageNotFoundError:
        return Check(dist, "missing", "not installed", fix=SETUP_FIX)
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        spec, version = None, f"{version} ({exc})"
    if spec is None:
        return Check(dist, "broken", f"{version}: module {module!r} not importable", fix=SETUP_FIX)
    return Check(dist, "ok", version)


def _devices() -> list[Check]:
    try:
        import torch
    except ImportError as exc:  # reported by the torch library check already
        return [Check("cpu", "broken", f"torch not importable ({exc})", fix=SETUP_FIX)]
    cpu = Check("cpu", "ok", f"{torch.get_num_threads()} threads, {os.cpu_count()} cores")
    if not torch.cuda.is_available():
        build = "CPU build of torch" if torch.version.cuda is None else "no device visible"
        return [cpu, Check("cuda", "missing", f"none ({build})", required=False)]
    checks = [cpu]
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        gib = props.total_memory / 2**30
        checks.append(Check(f"cuda:{i}", "ok", f"{props.name}, {gib:.1f} GiB"))
    return checks


def _widget_assets() -> Check:
    report = check_assets()
    if report.ok:
        return Check(
            "widget assets", "ok", f"{len(report.bundles)} bundle(s) in {report.directory}"
        )
    status: Status = "missing" if not report.bundles else "broken"
    return Check("widget assets", status, "; ".join(report.problems), fix=BUILD_FIX)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _lab_extension() -> Check:
    # Reads the same files as `jupyter labextension list` without importing
    # jupyterlab_server (2-3 s of imports).
    fix = "make lab  (builds extensions/ and links it into the environment)"
    try:
        from jupyter_core.paths import jupyter_config_path, jupyter_path
    except ImportError as exc:
        return Check(
            "lab extension", "missing", f"jupyter_core not importable ({exc})", fix=SETUP_FIX
        )
    paths = jupyter_path("labextensions")
    found = next(
        (Path(p, LAB_EXTENSION) for p in paths if Path(p, LAB_EXTENSION, "package.json").is_file()),
        None,
    )
    if found is None:
        detail = f"{LAB_EXTENSION!r} not installed (looked in {paths[0]} and {len(paths) - 1} more)"
        return Check("lab extension", "missing", detail, fix=fix)
    package = _read_json(found / "package.json")
    if "_build" not in package.get("jupyterlab", {}):
        return Check("lab extension", "broken", f"{found} was not built", fix=fix)
    app_dir = Path(os.environ.get("JUPYTERLAB_DIR", Path(sys.prefix, "share/jupyter/lab")))
    page_configs = [app_dir / "settings" / "page_config.json"]
    page_configs += [Path(d, "labconfig", "page_config.json") for d in jupyter_config_path()]
    disabled: set[str] = set()
    for path in page_configs:
        value = _read_json(path).get("disabledExtensions", {})
        disabled |= {k for k, v in value.items() if v} if isinstance(value, dict) else set(value)
    if any(k == LAB_EXTENSION or k.startswith(f"{LAB_EXTENSION}:") for k in disabled):
        fix = f"jupyter labextension enable {LAB_EXTENSION}"
        return Check("lab extension", "broken", "installed but disabled", fix=fix)
    return Check("lab extension", "ok", f"{package.get('version', '?')} at {found}")


def _server_extension() -> Check:
    # Merges jupyter_server_config.json and jupyter_server_config.d/*.json over
    # the config path, lowest priority first, as jupyter_server does.
    fix = f"jupyter server extension enable {SERVER_EXTENSION} --sys-prefix"
    if importlib.util.find_spec(SERVER_EXTENSION) is None:
        return Check(
            "server extension", "missing", f"{SERVER_EXTENSION} not importable", fix=SETUP_FIX
        )
    try:
        from jupyter_core.paths import jupyter_config_path
    except ImportError as exc:
        return Check(
            "server extension", "missing", f"jupyter_core not importable ({exc})", fix=SETUP_FIX
        )
    enabled = False
    for config_dir in reversed(jupyter_config_path()):
        files = sorted(Path(config_dir, "jupyter_server_config.d").glob("*.json"))
        files.append(Path(config_dir, "jupyter_server_config.json"))
        for path in files:
            extensions = _read_json(path).get("ServerApp", {}).get("jpserver_extensions", {})
            enabled = bool(extensions.get(SERVER_EXTENSION, enabled))
    if not enabled:
        return Check("server extension", "missing", f"{SERVER_EXTENSION} not enabled", fix=fix)
    return Check("server extension", "ok", f"{SERVER_EXTENSION} enabled")
