"""``labkit.widgets`` (the views' former name) gives the very modules of ``labkit.views``,
whichever name a fresh interpreter imports first."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import sys
{first}
import labkit.views, labkit.views.graph, labkit.views._keep
import labkit.widgets, labkit.widgets.graph
from labkit.widgets._keep import LABKIT_MIME
from labkit.widgets.graph import GraphView
assert labkit.widgets is labkit.views, labkit.widgets
assert sys.modules["labkit.widgets.graph"] is labkit.views.graph
assert GraphView is labkit.views.graph.GraphView
assert LABKIT_MIME == labkit.views._keep.LABKIT_MIME
assert not any(n.startswith("labkit.widgets.") and m is not sys.modules["labkit.views." + n[15:]]
               for n, m in list(sys.modules.items()))
print("ok")
"""


@pytest.mark.parametrize("first", ["import labkit.widgets.graph", "import labkit.views.graph"])
def test_former_name_is_the_same_modules(first: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHECK.format(first=first)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_missing_module_names_the_views_package() -> None:
    import labkit.widgets  # noqa: F401

    with pytest.raises(ModuleNotFoundError, match=r"labkit\.views\.no_such_view"):
        __import__("labkit.widgets.no_such_view")
