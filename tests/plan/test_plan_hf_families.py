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


def _moe(name: str) -> tuple[object, dict[str, object]]:
    """A tiny mixture-of-experts causal LM: transformers 5 runs its experts through
    ``aten._grouped_mm``, whose meta kernel refuses float32 (CUDA's bfloat16 check)."""
    import torch
    from transformers import (
        MixtralConfig,
        MixtralForCausalLM,
        Qwen2MoeConfig,
        Qwen2MoeForCausalLM,
    )

    torch.manual_seed(0)
    common = {
        "vocab_size": 64,
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 32,
        "attn_implementation": "eager",
    }
    if name == "mixtral":
        model = MixtralForCausalLM(
            MixtralConfig(**common, num_local_experts=4, num_experts_per_tok=2)
        )
    else:
        model = Qwen2MoeForCausalLM(
            Qwen2MoeConfig(
                **common,
                num_experts=4,
                num_experts_per_tok=2,
                moe_intermediate_size=16,
                shared_expert_intermediate_size=16,
            )
        )
    ids = torch.randint(0, 64, (2, 8))
    return model, {"input_ids": ids, "labels": ids.clone()}


@pytest.mark.filterwarnings("ignore:Module is None. Skipping:UserWarning")
@pytest.mark.filterwarnings("ignore:The module hierarchy tracking maybe be messed up:UserWarning")
@pytest.mark.parametrize("name", ["mixtral", "qwen2_moe"])
def test_a_mixture_of_experts_plan_equals_memory_and_memtracker(name: str) -> None:
    # a PlanError in model.layers.0.mlp.experts before (_grouped_mm's meta kernel)
    import torch

    model, kw = _moe(name)
    assert isinstance(model, torch.nn.Module)

    def loss(out: object) -> torch.Tensor:
        return out.loss  # type: ignore[attr-defined]

    def adamw(m: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.AdamW(m.parameters(), lr=1e-3)

    plan = labkit.plan(model, None, loss=loss, optimizer=adamw(model), model_kwargs=kw)
    measured = labkit.memory(
        model, None, loss=loss, optimizer=adamw(model), model_kwargs=kw, progress=False
    )
    ref = memtracker_peak(model, adamw(model), (), loss, kw)
    assert plan.peak_bytes == measured.peak_bytes == ref, (plan.peak_bytes, measured, ref)
