"""labkit's views: the Python side of its widgets (traits only), pure functions of a Trace.

(Formerly ``labkit.widgets``, which stays importable as the same modules.)

The front-end code lives in ``widgets/src/`` of the checkout and is bundled by
esbuild into ``labkit/views/static/`` (built, not committed). See
:mod:`labkit._assets` for how the built bundles are found and checked.

The views load lazily: ``import labkit.views`` does not import anywidget.

Panels that measure or act (``OptimizePanel``, ``AttentionView``) live in
:mod:`labkit.panels`, a layer above the views; the old ``from labkit.views import
OptimizePanel`` still works through the moved-names table (resolved on first use, not
exported here, so the views import nothing from the panels). The plumbing a widget outside
this package needs (``bundle_path``, ``KeepsPicture``, ``MONO``, ``png_img``,
``picture_bundle``, ``figure_bundle``, ``text_table``, ``ink_on``, ``optimize_picture``;
``profile_html`` for ``labkit.demo``; ``check_assets`` and
``BUILD_FIX`` for ``labkit doctor``) is public here too, so no other package imports a
private module.

Example:
    >>> from labkit.views import GraphView  # doctest: +SKIP
    >>> GraphView(labkit.trace(model, x))     # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labkit._lazy import lazy_exports, moved_modules
from labkit.views.display import install as _install

if TYPE_CHECKING:  # what the lazy names are, for mypy
    from labkit._assets import BUILD_FIX as BUILD_FIX
    from labkit._assets import bundle_path as bundle_path
    from labkit._assets import check_assets as check_assets
    from labkit.views._base import png_img as png_img
    from labkit.views._final_state import optimize_picture as optimize_picture
    from labkit.views._keep import MONO as MONO
    from labkit.views._keep import KeepsPicture as KeepsPicture
    from labkit.views._keep import picture_bundle as picture_bundle
    from labkit.views._static import figure_bundle as figure_bundle
    from labkit.views._static import ink_on as ink_on
    from labkit.views._static import profile_html as profile_html
    from labkit.views._static import text_table as text_table

_LAZY = {
    "GraphView": "labkit.views.graph",
    "ProfileView": "labkit.views.profile",
    "MemoryTimeline": "labkit.views.memory",
    "TraceView": "labkit.views.show",
    "Dashboard": "labkit.views.dashboard",
}
# names that moved up to labkit.panels: old imports keep working, nothing here imports them
_MOVED = {"AttentionView": "labkit.panels", "OptimizePanel": "labkit.panels"}
# plumbing for widgets outside this package (labkit.panels) and for labkit doctor
_PLUMBING = {
    "bundle_path": "labkit._assets",
    "check_assets": "labkit._assets",
    "BUILD_FIX": "labkit._assets",
    "KeepsPicture": "labkit.views._keep",
    "MONO": "labkit.views._keep",
    "png_img": "labkit.views._base",
    "picture_bundle": "labkit.views._keep",
    "figure_bundle": "labkit.views._static",
    "text_table": "labkit.views._static",
    "ink_on": "labkit.views._static",
    "optimize_picture": "labkit.views._final_state",
    "profile_html": "labkit.views._static",
}

__all__ = [*_LAZY, *_PLUMBING]


__getattr__, __dir__ = lazy_exports(__name__, {**_LAZY, **_PLUMBING}, moved=_MOVED)
moved_modules({f"{__name__}.{m}": f"labkit.panels.{m}" for m in ("attention", "optimize_panel")})

# Trace/MemoryReport/Plan .show(), .plot() and _repr_html_ reach the views through
# labkit._display; the data classes import nothing from here (labkit.show is display.show)
_install()
