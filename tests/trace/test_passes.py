"""The timing passes keep what each hooked pass timed without building a Trace per pass:
the same keys, parents and times as the Trace the pass's recorder would have built."""

from __future__ import annotations

import torch
from torch import nn

from labkit.trace import _passes
from labkit.trace.recorder import Recorder


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc, self.act = nn.Linear(4, 4), nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)) + x  # an op node beside the module calls (ops mode)


def _fields(step: _passes._PassStep) -> list[tuple[object, ...]]:
    return [
        (n.id, n.key, n.kind, n.parent, n.fwd_time, n.bwd_time, n.bwd_self_time) for n in step.nodes
    ]


def test_a_pass_keeps_what_its_trace_would_say() -> None:
    model = nn.Sequential(_Block(), nn.Sequential(_Block(), _Block()), nn.Linear(4, 2))
    x = torch.randn(3, 4)
    for mode in ("step", "ops"):
        rec = Recorder(model, mode=mode).attach()
        try:
            rec.start()
            model(x).sum().backward()
            light = _passes._end_pass(rec)
            built = _passes._PassStep.of(rec._build())  # the Trace of the same recording
        finally:
            rec.detach()
        assert _fields(light) == _fields(built)
        assert [n.kind for n in light.nodes].count("module") == 12
        assert ("op" in [n.kind for n in light.nodes]) == (mode == "ops")
        # a module call's backward holds its module calls' (ops mode: the ops own them)
        by_kind = "module" if mode == "step" else "op"
        assert any(n.bwd_self_time > 0 for n in light.nodes if n.kind == by_kind)
        if mode == "step":
            assert any(n.bwd_time > n.bwd_self_time > 0 for n in light.nodes)
        assert (light.forward_time, light.backward_time, light.outside_bwd_time) == (
            built.forward_time,
            built.backward_time,
            built.outside_bwd_time,
        )
        assert light.forward_time > 0 and not light.cuda
