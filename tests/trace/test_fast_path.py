"""PyTorch's inference fast path for ``nn.TransformerEncoderLayer`` and
``nn.MultiheadAttention`` (fused kernels, taken in eval mode with gradients off) is turned
off by any torch-function mode, labkit's recording included: the trace says so, where the
user's own run would take it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import labkit


def _encoder() -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()


def test_an_eval_no_grad_encoder_is_recorded_off_its_fast_path_and_the_notes_say_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[int] = []
    fused = torch._transformer_encoder_layer_fwd

    def counting(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(1)
        return fused(*args, **kwargs)

    monkeypatch.setattr(torch, "_transformer_encoder_layer_fwd", counting)
    model, x = _encoder(), torch.randn(2, 10, 32)
    with torch.no_grad():
        model(x)
        assert len(calls) == 2  # the user's run: each layer fused
        calls.clear()
        trace = labkit.trace(model, x, backward=False, repeat=0, progress=False)
    assert calls == []  # the recording ran the standard path: what the note says
    note = next((n for n in trace.meta.notes if "inference fast path" in n), None)
    assert note is not None and "'layers.0'" in note, trace.meta.notes


def test_training_or_grad_on_says_nothing() -> None:
    model, x = _encoder(), torch.randn(2, 10, 32)
    for t in (
        labkit.trace(model.train(), x, repeat=0, progress=False),
        labkit.trace(model.eval(), x, repeat=0, progress=False),  # grads on: no fast path
    ):
        assert not any("fast path" in n for n in t.meta.notes), t.meta.notes
