from __future__ import annotations

import pytest
import torch

import labkit
from labkit.trace.model import MemorySample
from tests.trace._models import ResCNN


@pytest.fixture(scope="session")
def cnn_trace():
    torch.manual_seed(0)
    return labkit.trace(ResCNN(blocks=3), torch.randn(2, 3, 16, 16))


@pytest.fixture(scope="session")
def memory_trace(cnn_trace):
    """The CNN trace with hand-made memory samples (plain data)."""
    samples = (
        MemorySample(0.0, "forward", "stem", {"parameters": 1000, "activations": 100}),
        MemorySample(0.1, "forward", "blocks.0", {"parameters": 1000, "activations": 900}),
        MemorySample(
            0.2,
            "backward",
            "blocks.0",
            {"parameters": 1000, "gradients": 400, "activations": 600, "temporaries": 50},
        ),
        MemorySample(
            0.3, "optimizer", "", {"parameters": 1000, "gradients": 1000, "optimizer": 2000}
        ),
    )
    return cnn_trace.replace(memory=samples)
