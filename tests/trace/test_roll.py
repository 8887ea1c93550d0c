from __future__ import annotations

import torch

import labkit
from labkit.trace.roll import RolledBlock, range_name
from tests.trace._models import Encoder, ResCNN, Tied


def test_identical_blocks_roll() -> None:
    t = labkit.trace(ResCNN(blocks=4), torch.randn(1, 3, 8, 8))
    blocks = t.rolled()
    top = [b for b in blocks if b.type == "Block"]
    assert len(top) == 1 and top[0].count == 4 and top[0].name == "blocks.0-3"
    assert repr(top[0]).startswith("RolledBlock(parent=")


def test_different_shapes_do_not_roll() -> None:
    t = labkit.trace(Encoder(layers=2), torch.randn(2, 5, 16))
    layers = [b for b in t.rolled() if b.type == "TransformerEncoderLayer"]
    assert layers and layers[0].count == 2
    tied = labkit.trace(Tied(), torch.randint(0, 20, (2, 3)))
    # the two calls of `mix` get different inputs' producers but equal shapes: they roll
    mix = [b for b in tied.rolled() if b.type == "Linear"]
    assert mix and mix[0].count == 2 and mix[0].name == "mix (x2)"


def test_range_name() -> None:
    assert range_name(["layers.0", "layers.1", "layers.2"]) == "layers.0-2"
    assert range_name(["a", "b"]) == "a (x2)"
    assert RolledBlock(None, (1, 2), "Linear", "x").count == 2
