"""Hugging Face families beyond the first corpus, planned, measured and counted exactly.

For each tiny model (GPT-2, BART, Swin, Mistral with grouped-query attention and a sliding
window; see :mod:`tests.realworld.models`), on the loop as users write it:
``labkit.plan`` equals ``labkit.memory`` and torch's MemTracker to the byte, and
``labkit.trace``'s forward FLOPs equal ``FlopCounterMode`` over one plain forward. Swin's
plan was 2,048 B over both before the layer-norm gradient's layout rule
(``labkit/plan/_kernels.py``).
"""

from __future__ import annotations

import pytest
from torch.utils.flop_counter import FlopCounterMode

import labkit
from tests.plan._memtracker import memtracker_peak
from tests.realworld.models import build

FAMILIES = ["hf_gpt2", "hf_bart", "hf_swin", "hf_mistral"]


# MemTracker's module tracker warns on encoder-decoder backward hooks (BART) and on
# rotary-embedding modules called outside their parents' order (Mistral); its peak is
# still the step's (it equals labkit.memory's, which measures independently)
@pytest.mark.filterwarnings("ignore:Module is None. Skipping:UserWarning")
@pytest.mark.filterwarnings("ignore:The module hierarchy tracking maybe be messed up:UserWarning")
@pytest.mark.parametrize("name", FAMILIES)
def test_plan_equals_memory_and_memtracker_to_the_byte(name: str) -> None:
    case = build(name)
    assert case.make_optimizer is not None and case.loss is not None
    model, kw = case.model, case.kwargs
    plan = labkit.plan(
        model, None, loss=case.loss, optimizer=case.make_optimizer(model), model_kwargs=kw
    )
    measured = labkit.memory(
        model,
        None,
        loss=case.loss,
        optimizer=case.make_optimizer(model),
        model_kwargs=kw,
        progress=False,
    )
    ref = memtracker_peak(model, case.make_optimizer(model), (), case.loss, kw)
    assert plan.peak_bytes == measured.peak_bytes == ref, (plan.peak_bytes, measured, ref)
    assert plan.meta.peak_by_category == measured.meta.peak_by_category


@pytest.mark.parametrize("name", FAMILIES)
def test_trace_forward_flops_equal_torchs_flop_counter(name: str) -> None:
    case = build(name)
    t = labkit.trace(case.model, loss=case.loss, repeat=1, progress=False, **case.kwargs)
    with FlopCounterMode(display=False) as counter:
        case.model(**case.kwargs)
    assert t.rows()[0]["flops_fwd"] == counter.get_total_flops() > 0
