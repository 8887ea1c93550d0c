"""Find and check the built front-end bundles of labkit's widgets.

``widgets/build.mjs`` bundles every view entry ``widgets/src/<name>.js`` (names not
starting with ``_``; the ``_*.js`` helpers are bundled into the views that import them)
into ``labkit/views/static/<name>.js`` and writes ``static/manifest.json`` listing
each bundle with its size and sha256. This module reads that manifest, checks
every bundle against it, and (in a source checkout) checks that every source
entry was built. ``labkit doctor`` reports the result (it reads this module, not the views).

The directory can be pointed elsewhere with the ``LABKIT_WIDGET_ASSETS``
environment variable (used by tests to simulate a machine without assets).

Example:
    >>> from labkit._assets import check_assets
    >>> report = check_assets()
    >>> report.ok  # doctest: +SKIP
    True
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

ENV_VAR = "LABKIT_WIDGET_ASSETS"
MANIFEST = "manifest.json"
BUILD_FIX = "make lab  (or: npm --prefix widgets ci && npm --prefix widgets run build)"

_PACKAGE_STATIC = Path(__file__).resolve().parent / "views" / "static"
_CHECKOUT_SRC = Path(__file__).resolve().parents[1] / "widgets" / "src"


def assets_dir() -> Path:
    """Directory holding the built bundles: ``$LABKIT_WIDGET_ASSETS`` or the package's."""
    override = os.environ.get(ENV_VAR)
    return Path(override) if override else _PACKAGE_STATIC


def source_entries(src_dir: Path | None = None) -> list[str] | None:
    """Names of the view entries in ``widgets/src/`` (None outside a source checkout).

    Helpers (``_*.js``) are not entries: they are bundled into the views.
    """
    src = src_dir if src_dir is not None else _CHECKOUT_SRC
    if not src.is_dir():
        return None
    return sorted(p.stem for p in src.glob("*.js") if not p.stem.startswith("_"))


@dataclass(frozen=True)
class AssetReport:
    """What :func:`check_assets` found.

    Args:
        directory: The directory that was checked.
        bundles: Bundle names listed in the manifest.
        problems: One sentence per missing, stale or corrupt piece.
    """

    directory: Path
    bundles: tuple[str, ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when the manifest exists and every bundle matches it."""
        return not self.problems


def check_assets(directory: Path | None = None, src_dir: Path | None = None) -> AssetReport:
    """Check the built widget bundles against their manifest and the sources.

    Args:
        directory: Where the bundles are; defaults to :func:`assets_dir`.
        src_dir: The ``widgets/src`` folder to compare with; defaults to the
            checkout's when there is one.

    Returns:
        An :class:`AssetReport`; ``report.ok`` is True when all is built.
    """
    directory = Path(directory) if directory is not None else assets_dir()
    manifest_path = directory / MANIFEST
    if not manifest_path.is_file():
        return AssetReport(directory, (), (f"no {MANIFEST} in {directory}: assets not built",))
    try:
        manifest = json.loads(manifest_path.read_text())
        entries = list(manifest["bundles"])
    except (ValueError, KeyError, TypeError) as exc:
        return AssetReport(directory, (), (f"{manifest_path} is unreadable ({exc})",))
    problems: list[str] = []
    names: list[str] = []
    for entry in entries:
        name, file = entry["name"], directory / entry["file"]
        names.append(name)
        if not file.is_file():
            problems.append(f"bundle {file} is missing")
        elif file.stat().st_size != entry["bytes"]:
            problems.append(
                f"bundle {file} has {file.stat().st_size} bytes, manifest says {entry['bytes']}"
            )
        elif hashlib.sha256(file.read_bytes()).hexdigest() != entry["sha256"]:
            problems.append(f"bundle {file} does not match its sha256 in the manifest")
    expected = source_entries(src_dir)
    if expected is not None:
        for name in sorted(set(expected) - set(names)):
            problems.append(f"widgets/src/{name}.js is not built")
    return AssetReport(directory, tuple(names), tuple(problems))


def bundle_path(name: str, directory: Path | None = None) -> Path:
    """Path of the built bundle ``name``; raises with the fix when it is not built."""
    path = (Path(directory) if directory is not None else assets_dir()) / f"{name}.js"
    if not path.is_file():
        raise FileNotFoundError(f"labkit widget bundle {path} is not built; fix: {BUILD_FIX}")
    return path
