"""Inputs given as labkit.trace takes them (keywords beside the batch), and a step that
starts with ``.grad`` left by an earlier backward: plan and measurement agree on both."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import labkit


class Tagger(nn.Module):
    """Keyword inputs, as a Hugging Face model takes them: ids, a mask and labels."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.fc = nn.Linear(16, 5)

    def forward(self, input_ids, attention_mask, labels):
        h = self.emb(input_ids) * attention_mask.unsqueeze(-1)
        logits = self.fc(h)
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def inputs():
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (4, 12))
    mask = torch.ones(4, 12)
    mask[:, 9:] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.randint(0, 5, (4, 12))}


def test_keyword_inputs_beside_or_inside_the_batch_record_the_same_step():
    model, kw = Tagger(), inputs()
    as_keywords = labkit.memory(model, loss=lambda out: out, **kw)
    model.zero_grad(set_to_none=True)
    as_dict = labkit.memory(model, kw, loss=lambda out: out)
    model.zero_grad(set_to_none=True)
    ids = kw.pop("input_ids")
    mixed = labkit.memory(model, (ids,), loss=lambda out: out, **kw)
    assert as_keywords.peak_bytes == as_dict.peak_bytes == mixed.peak_bytes > 0
    # the inputs count as inputs: int64 ids and labels, a float32 mask
    assert as_keywords.by_category()["inputs"] == 4 * 12 * (8 + 4 + 8)
    model.zero_grad(set_to_none=True)
    planned = labkit.plan(model, (ids,), loss=lambda out: out, **kw)
    assert planned.peak_bytes == mixed.peak_bytes


def test_a_plan_with_keyword_inputs_replans_at_other_batch_sizes():
    model, kw = Tagger(), inputs()
    planned = labkit.plan(model, loss=lambda out: out, **kw)
    bigger = labkit.plan(model, loss=lambda out: out, **{k: v.repeat(2, 1) for k, v in kw.items()})
    # the search replans the keyword inputs resized: batch 8 fits its own peak, not one byte less
    assert planned.max_batch_size(budget=bigger.peak_bytes) == 8
    assert planned.max_batch_size(budget=bigger.peak_bytes - 1) == 7


@pytest.mark.parametrize("call", [labkit.memory, labkit.plan])
def test_no_input_or_an_input_given_twice_is_named(call):
    model, kw = Tagger(), inputs()
    with pytest.raises(TypeError, match=r"needs the model's input: a batch .* keyword inputs"):
        call(model)
    with pytest.raises(TypeError, match=r"the input 'labels' is given twice"):
        call(model, kw, labels=kw["labels"])
    assert all(p.grad is None for p in model.parameters())  # nothing ran


def test_grads_left_by_an_earlier_backward_are_counted_and_said():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32))
    x = torch.randn(16, 64)
    fresh_plan, fresh = labkit.plan(model, x), labkit.memory(model, x)
    assert fresh_plan.peak_bytes == fresh.peak_bytes
    assert not any(".grad from an earlier backward" in n for n in fresh.meta.notes)
    # memory left no .grad behind: a plan after it is the plan before it
    assert all(p.grad is None for p in model.parameters())
    assert labkit.plan(model, x).peak_bytes == fresh_plan.peak_bytes
    # the user's own backward: the next step starts with every .grad allocated
    model(x).sum().backward()
    param_bytes = sum(p.numel() * 4 for p in model.parameters())
    again_plan, again = labkit.plan(model, x), labkit.memory(model, x)
    assert again_plan.peak_bytes == again.peak_bytes > fresh.peak_bytes
    for rep in (again_plan, again):
        note = f"held .grad from an earlier backward ({labkit._format.fmt_bytes(param_bytes)})"
        assert any(note in n for n in rep.meta.notes), rep.meta.notes
        assert f"note: the parameters {note}" in rep.summary()
