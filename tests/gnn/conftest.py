"""Shared fixtures of the graph-network tests, and the few third-party warnings they allow."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

# Import PyG once here, where its torch.jit.script DeprecationWarning (PyG 2.8 under torch
# 2.13) is allowed: test modules build models at collection time, outside any test's filters.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "`torch.jit.script` is deprecated", DeprecationWarning)
    import torch_geometric  # noqa: F401

HERE = Path(__file__).parent

# Warnings that third-party code emits here and that labkit cannot fix; every other warning
# stays an error (pyproject's filterwarnings = error).
ALLOWED = [
    # PyG 2.8 calls torch.jit.script at import; torch 2.13 deprecates it
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning",
    # Lightning 2.6 builds a torch LeafSpec, deprecated in torch 2.13
    "ignore:`isinstance(treespec, LeafSpec)` is deprecated:FutureWarning",
    # a whole graph is one batch: DataLoader workers would only add process start-up
    "ignore:.*does not have many workers:UserWarning",
]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.fspath).parents:
            for spec in ALLOWED:
                item.add_marker(pytest.mark.filterwarnings(spec))


@pytest.fixture(scope="session")
def sbm_small():
    from labkit.gnn import sbm

    return sbm(1000, 4, seed=0)


@pytest.fixture(scope="session")
def karate_graph():
    from labkit.gnn import karate

    return karate()
