"""FLOPs of ``aten._grouped_mm`` (transformers 5's mixture-of-experts layers), which
``torch.utils.flop_counter`` has no formula for (it counts 0, and so did labkit, with a
caveat). The reference: the same model with ``experts_implementation="eager"`` (a loop of
plain matmuls over the experts) under ``FlopCounterMode``, forward and backward."""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import labkit


def _mixtral(experts: str) -> torch.nn.Module:
    from transformers import MixtralConfig, MixtralForCausalLM

    torch.manual_seed(0)
    cfg = MixtralConfig(
        experts_implementation=experts,
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32,
        attn_implementation="eager",
        num_local_experts=4,
        num_experts_per_tok=2,
    )
    return MixtralForCausalLM(cfg)


def test_grouped_experts_count_as_the_eager_experts_loop() -> None:
    ids = torch.randint(0, 64, (2, 8))
    grouped, eager = _mixtral("grouped_mm"), _mixtral("eager")
    t = labkit.trace(
        grouped, input_ids=ids, labels=ids.clone(), loss=lambda o: o.loss, repeat=1, progress=False
    )
    with FlopCounterMode(display=False) as fwd:
        out = eager(input_ids=ids, labels=ids.clone())
    with FlopCounterMode(display=False) as bwd:
        out.loss.backward()
    root = t.rows()[0]
    # 67,584 forward before: the experts' 98,304 were missing
    assert root["flops_fwd"] == fwd.get_total_flops() > 0
    assert root["flops_bwd"] == bwd.get_total_flops() > 0
    assert not any("_grouped_mm" in str(m) for m in t.meta.no_flop_formula)


@pytest.mark.parametrize(
    ("a", "b", "offs", "flops"),
    [
        ((16, 8), (2, 8, 8), [8, 16], 2 * 16 * 8 * 8),  # rows split among 2 experts
        ((2, 8, 8), (2, 8, 8), None, 2 * 2 * 8 * 8 * 8),  # batched
        ((8, 16), (16, 8), [8, 16], 2 * 8 * 16 * 8),  # K split: 2 stacked partial products
    ],
)
def test_the_formula_is_one_multiply_add_per_product_term(a, b, offs, flops) -> None:
    from labkit.trace._dispatch import EXTRA_FLOP_FORMULAS

    x = torch.randn(*a, dtype=torch.bfloat16)
    w = torch.randn(*reversed(b[-2:]), dtype=torch.bfloat16) if len(b) == 2 else None
    if w is None:
        w = torch.randn(b[0], b[2], b[1], dtype=torch.bfloat16).transpose(-2, -1)
    else:
        w = w.t()  # the kernel takes the second operand column-major
        x = x.t().contiguous().t() if offs is not None else x
    o = None if offs is None else torch.tensor(offs, dtype=torch.int32)
    with FlopCounterMode(display=False, custom_mapping=EXTRA_FLOP_FORMULAS) as counter:
        torch._grouped_mm(x, w, offs=o)
    assert counter.get_total_flops() == flops
