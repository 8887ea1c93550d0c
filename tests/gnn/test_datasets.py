"""Datasets that need no download: SBM, KarateClub, FakeDataset, Planetoid files."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
import torch

from labkit.gnn import fake, karate, num_classes, planetoid_from_files, sbm, validate_graph


@pytest.mark.parametrize(("n", "c"), [(50, 2), (1000, 4), (5000, 7)])
def test_sbm_shape_split_and_determinism(n, c):
    a, b = sbm(n, c, seed=3), sbm(n, c, seed=3)
    assert a.num_nodes == n and num_classes(a) == c
    assert torch.equal(a.edge_index, b.edge_index) and torch.equal(a.x, b.x)
    assert not torch.equal(sbm(n, c, seed=4).edge_index, a.edge_index)
    validate_graph(a)
    masks = a.train_mask.int() + a.val_mask.int() + a.test_mask.int()
    assert bool((masks == 1).all())
    assert torch.bincount(a.y).tolist() == [n // c + (i < n % c) for i in range(c)]


def test_sbm_is_undirected_without_self_loops_and_homophilous():
    from torch_geometric.utils import is_undirected

    d = sbm(4000, 4, seed=0, avg_degree=12, homophily=0.8)
    src, dst = d.edge_index
    assert is_undirected(d.edge_index) and not bool((src == dst).any())
    assert 10 < d.num_edges / d.num_nodes < 12.5  # duplicates merge, self loops drop
    same = (d.y[src] == d.y[dst]).float().mean().item()
    assert same == pytest.approx(0.8, abs=0.02)


def test_sbm_bad_arguments():
    with pytest.raises(ValueError, match="num_classes >= 2"):
        sbm(10, 1)
    with pytest.raises(ValueError, match="homophily must be in"):
        sbm(10, 2, homophily=1.5)


def test_karate():
    d = karate()
    assert (d.num_nodes, d.num_edges, num_classes(d)) == (34, 156, 4)
    assert int(d.train_mask.sum()) == 4 and bool((d.test_mask == ~d.train_mask).all())
    validate_graph(d)


def test_fake_is_seeded_and_restores_the_global_rng():
    torch.manual_seed(123)
    random.seed(123)
    before = torch.rand(1), random.random()
    torch.manual_seed(123)
    random.seed(123)
    a = fake(300, 5, seed=1, num_features=8)
    after = torch.rand(1), random.random()
    assert torch.equal(before[0], after[0]) and before[1] == after[1]
    b = fake(300, 5, seed=1, num_features=8)
    assert torch.equal(a.edge_index, b.edge_index) and a.num_features == 8
    validate_graph(a)


def _write_planetoid(folder, name="cora", n_train=20, n_all=540, n_test=60, f=12, c=3):
    """Tiny files in the Planetoid format (pickled numpy arrays and a graph dict)."""
    rng = np.random.default_rng(0)
    n = n_all + n_test

    def onehot(k):
        y = np.zeros((k, c), dtype=np.float32)
        y[np.arange(k), rng.integers(0, c, k)] = 1
        return y

    parts = {
        "x": rng.random((n_train, f), dtype=np.float32),
        "y": onehot(n_train),
        "allx": rng.random((n_all, f), dtype=np.float32),
        "ally": onehot(n_all),
        "tx": rng.random((n_test, f), dtype=np.float32),
        "ty": onehot(n_test),
        "graph": {i: [int(j) for j in rng.integers(0, n, 3)] for i in range(n)},
    }
    for key, value in parts.items():
        with open(folder / f"ind.{name}.{key}", "wb") as fh:
            pickle.dump(value, fh)
    test_index = rng.permutation(np.arange(n_all, n))
    (folder / f"ind.{name}.test.index").write_text("\n".join(map(str, test_index)) + "\n")
    return n


def test_planetoid_from_files(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    n = _write_planetoid(raw)
    d = planetoid_from_files(raw, "Cora", root=tmp_path / "root")
    assert d.num_nodes == n and d.num_features == 12
    assert (int(d.train_mask.sum()), int(d.val_mask.sum()), int(d.test_mask.sum())) == (20, 500, 60)
    validate_graph(d)
    assert (tmp_path / "root" / "Cora" / "processed").is_dir()


def test_planetoid_missing_file_is_named_before_any_download(tmp_path):
    _write_planetoid(tmp_path)
    (tmp_path / "ind.cora.graph").unlink()
    with pytest.raises(FileNotFoundError, match=r"lacks ind\.cora\.graph .*nothing is downloaded"):
        planetoid_from_files(tmp_path, "cora", root=tmp_path / "root")
    with pytest.raises(ValueError, match="name must be one of"):
        planetoid_from_files(tmp_path, "reddit")
