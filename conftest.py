"""Collect the examples in labkit's docstrings as tests (``pytest`` runs them with the suite).

Only ``labkit/`` is collected this way (the tests' own modules are not). An example that
needs a GPU, a browser or a fitted model says ``# doctest: +SKIP``; every other one runs.
PyG's import-time ``torch.jit.script`` DeprecationWarning (PyG 2.8 under torch 2.13) is
allowed in doctests, as in ``tests/gnn``; every other warning stays an error.
"""

from __future__ import annotations

import warnings
from functools import cache
from pathlib import Path

import pytest
from _pytest.doctest import DoctestModule

LABKIT = Path(__file__).parent / "labkit"
_ALLOWED = "ignore:`torch.jit.script` is deprecated:DeprecationWarning"


@cache
def _import_pyg() -> None:
    """Import PyG once with its import-time warning allowed (as tests/gnn/conftest.py does):
    a first import that fails on the warning would leave it half-initialised."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
        import torch_geometric  # noqa: F401


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix == ".py" and LABKIT in file_path.parents:
        _import_pyg()
        return DoctestModule.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if LABKIT in Path(item.fspath).parents:
            item.add_marker(pytest.mark.filterwarnings(_ALLOWED))
