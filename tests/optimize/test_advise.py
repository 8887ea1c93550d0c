import pytest
import torch
from torch import nn

import labkit
from labkit.optimize import Advice, Recipe, Suggestion, advise
from labkit.optimize._cpu import native_bf16


class Block(nn.Module):
    def __init__(self, d: int = 64) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block() for _ in range(3)])
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        return self.head(self.blocks(x))


class HalfSoftmax(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return torch.softmax(self.proj(x).half(), dim=-1).float()


@pytest.fixture
def trace():
    torch.manual_seed(0)
    return labkit.trace(Net(), torch.randn(32, 64))


def test_gemm_and_checkpoint_advice(trace):
    advice = advise(trace)
    titles = [s.title for s in advice]
    ck = next(s for s in advice if "checkpoint" in s.change)
    assert ck.change == {"checkpoint": ("Block",)}
    assert ck.where == ("blocks.0", "blocks.1", "blocks.2") or set(ck.where) == {
        "blocks.0",
        "blocks.1",
        "blocks.2",
    }
    assert ck.title.startswith("3 Block blocks hold ")
    if native_bf16():
        gemm = next(s for s in advice if s.change == {"precision": "bf16-mixed"})
        assert gemm.title.startswith("GEMMs are 100% of FLOPs and ")
        assert gemm.title.endswith(": try bf16-mixed")
    assert all(0 <= s.share <= 1 for s in advice), titles
    recipes = advice.recipes()
    assert Recipe(checkpoint=("Block",)).label in recipes


def test_inference_advice_suggests_int8(trace):
    torch.manual_seed(0)
    t = labkit.trace(Net().eval(), torch.randn(32, 64), backward=False)
    advice = advise(t)
    q = next(s for s in advice if s.change == {"quantization": "int8-dynamic"})
    assert q.title.startswith("Linear layers are ") and "of FLOPs" in q.title
    assert not any("checkpoint" in s.change for s in advice)  # no backward, no checkpointing


def test_fp16_softmax_risk():
    torch.manual_seed(0)
    t = labkit.trace(HalfSoftmax(), torch.randn(4, 8))
    first = advise(t).suggestions[0]
    assert first.title == "softmax runs in fp16 in (top level): overflow risk, try bf16-mixed"
    assert first.change == {"precision": "bf16-mixed"}


def test_conv_bn_inference_advice():
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()).eval()
    t = labkit.trace(model, torch.randn(2, 3, 16, 16), backward=False)
    s = next(s for s in advise(t) if "fuse_conv_bn" in s.change)
    assert s.recipe() == Recipe(fuse_conv_bn=True, channels_last=True)


def test_timing_mode_note_and_repr():
    t = labkit.trace(nn.Linear(4, 4), torch.randn(2, 4), mode="timing")
    advice = advise(t)
    assert "mode='timing'" in advice.notes[0]
    assert repr(advice).startswith("Advice: nothing stands out")
    s = Suggestion("A: try B", "why", {"precision": "bf16-mixed"}, 0.5)
    assert repr(Advice((s,))).splitlines() == [
        "Advice (1 suggestions):",
        "  1. A: try B",
        "     why",
        "     change: {'precision': 'bf16-mixed'}",
    ]
    assert repr(s).startswith("Suggestion(title='A: try B'")


def test_bad_input():
    with pytest.raises(TypeError, match="advise\\(\\) needs a labkit Trace"):
        advise(nn.Linear(2, 2))  # type: ignore[arg-type]


def test_public_names():
    assert labkit.advise is advise and labkit.Recipe is Recipe
    assert labkit.compare is labkit.optimize.compare


def test_compare_verifies_a_suggestion():
    from labkit.optimize import compare

    torch.manual_seed(0)
    model, x = Net(), torch.randn(32, 64)
    advice = advise(labkit.trace(model, x))
    cmp = compare(model, x, advice.recipes(), steps=1, warmup=0, memory=False)
    assert [r.label for r in cmp.results][1:] == list(advice.recipes())
    assert all(r.error is None and r.speedup > 0 for r in cmp.results)


def test_int8_configs_are_each_suggested_fitting_the_shapes():
    torch.manual_seed(0)
    many = advise(labkit.trace(Net().eval(), torch.randn(32, 64), backward=False))
    few = advise(labkit.trace(Net().eval(), torch.randn(2, 64), backward=False), top=10)
    for advice, first in ((many, "int8-dynamic"), (few, "int8-weight-only")):
        kinds = [s.change.get("quantization") for s in advice if "quantization" in s.change]
        assert {"int8-dynamic", "int8-weight-only"} <= set(kinds)
        plain = [k for k, s in zip(kinds, advice, strict=False) if "compile" not in s.change]
        assert plain[0] == first  # the config that fits the Linear row count ranks first
    dyn = next(s for s in many if s.change == {"quantization": "int8-dynamic"})
    assert "Linear calls multiply 32 rows (median)" in dyn.detail


def test_advice_says_when_compare_measured_its_recipe_slower():
    from labkit.optimize import compare

    torch.manual_seed(0)
    model, x = Net().eval(), torch.randn(32, 64)
    t = labkit.trace(model, x, backward=False)
    recipes = {k: r for k, r in advise(t).recipes().items() if not r.compile}  # fast to run
    cmp = compare(model, x, recipes, mode="inference", steps=3, warmup=1, memory=False)
    again = {s.recipe().label: s for s in advise(t, top=10)}
    for r in cmp.results[1:]:
        s = again[r.label]
        # a speedup whose interval spans 1.0 is noise, kept as 1.0: not "slower"
        slower = r.speedup < 1 and not r.within_noise
        assert ("measured slower here" in s.title) == slower, (
            r.label,
            r.speedup,
            r.within_noise,
            s.title,
        )
        if slower:
            assert s.title.endswith(f"(measured slower here: {r.speedup:.2f}x)")
            assert "labkit.compare (inference) on this machine: measured" in s.detail
        # the row itself says why when it is surely slower (its interval below 1.0)
        if r.speedup < 0.95 and r.speedup_high is not None and r.speedup_high < 1.0:
            assert any(n.startswith("slower than fp32: measured ") for n in r.notes), r.notes
