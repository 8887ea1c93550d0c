"""labkit.tune against brute force, and the parts it is made of.

The brute-force tests plan every grid point (batch sizes x checkpoint none / the repeated
blocks / the set tune chose x precision) with ``labkit.plan`` and time every point that
fits side by side with the pick (interleaved rounds, seconds per sample). The pick must
fit the budget when measured, and no fitting grid point may be faster per sample beyond
the intervals: its samples/s interval must not lie wholly above the pick's.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from torch import nn

import labkit
from labkit._interleave import interleaved, ratio_interval
from labkit.optimize import Recipe, _tune_ckpt, _tune_flops, _tune_heats, _tune_space
from labkit.optimize._tune_batch import batch_dim, ladder, maker
from labkit.optimize._tune_race import Entry, race
from labkit.optimize._tune_run import Runner, optimizer_for
from labkit.optimize.tune import Candidate, Choice, tune
from tests.realworld.models import gpt
from tests.realworld.test_leaves_as_found import _assert_same, _world


# ---------------------------------------------------------------------------- models
class Residual(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class ResMLP(nn.Module):
    def __init__(self, d_in: int = 8, d: int = 16, depth: int = 3) -> None:
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.blocks = nn.ModuleList([Residual(d) for _ in range(depth)])
        self.head = nn.Linear(d, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x)


@dataclass
class Setting:
    model: nn.Module
    args: tuple[Any, ...]
    loss: Any
    optimizer: Any
    sizes: list[int]
    precisions: list[str]
    blocks: str
    plans: dict[tuple[Recipe, int], labkit.Plan] = field(default_factory=dict)


def _resmlp() -> Setting:
    torch.manual_seed(0)
    model = ResMLP()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return Setting(
        model, (torch.randn(16, 8),), None, opt, [16, 128], ["32", "bf16-mixed"], "blocks.*"
    )


def _gpt() -> Setting:
    case = gpt(0, batch=4, n_layer=2)
    opt = case.make_optimizer(case.model)
    return Setting(case.model, case.args, case.loss, opt, [4, 32], ["32"], "transformer.h.*")


def _plan(s: Setting, recipe: Recipe, n: int) -> labkit.Plan:
    """``labkit.plan`` of ``recipe`` at batch ``n`` (each planned once per setting)."""
    key = (recipe, n)
    if key not in s.plans:
        args, _ = maker(s.args, {}, batch_dim(s.args, {}))(n)
        s.plans[key] = labkit.plan(s.model, args, loss=s.loss, optimizer=s.optimizer, recipe=recipe)
    return s.plans[key]


def _times(s: Setting, points: list[tuple[Recipe, int]], rounds: int = 7) -> list[list[float]]:
    """Each point's seconds per sample, round by round, from one interleaved run of all."""
    make = maker(s.args, {}, batch_dim(s.args, {}))
    runners = {r: Runner(s.model, r, s.optimizer, s.loss) for r, _ in points}
    inputs = [make(n) for _, n in points]

    def sample(k: int, i: int, timed: bool) -> float:
        (recipe, n), (args, kwargs) = points[k], inputs[k]
        return runners[recipe].seconds(args, kwargs) / n

    return interleaved(list(range(len(points))), sample, warmup=1, rounds=rounds)


@pytest.fixture
def one_thread() -> Any:
    """One torch thread: on a loaded 2-core machine two threads make step times swing tenfold."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---------------------------------------------------------------------------- brute force
@pytest.mark.slow
@pytest.mark.parametrize("build", [_resmlp, _gpt], ids=["resmlp", "gpt"])
def test_pick_fits_and_no_fitting_grid_point_is_faster(build: Any, one_thread: Any) -> None:
    s = build()
    big = s.sizes[-1]
    none_big = _plan(s, Recipe(), big).peak_bytes
    blocks_big = _plan(s, Recipe(checkpoint=(s.blocks,)), big).peak_bytes
    assert blocks_big < none_big  # checkpointing the blocks frees memory at the big batch
    budget = (blocks_big + none_big) // 2  # the big batch fits only when checkpointed
    space = {"precision": s.precisions, "checkpoint": ["none", "auto", "blocks"]}
    choice = tune(
        s.model,
        s.args,
        budget,
        loss=s.loss,
        optimizer=s.optimizer,
        space=space,
        batch_sizes=s.sizes,
        budget_s=10,
        plan_s=600,
        steps=5,
    )

    assert choice.measured_peak is not None and choice.measured_peak <= budget
    assert choice.predicted_peak <= budget
    assert choice.predicted_peak == _plan(s, choice.recipe, choice.batch_size).peak_bytes

    # the grid: every batch size x checkpoint none/blocks/chosen x precision, planned
    chosen = {
        c.batch_size: c.recipe.checkpoint
        for c in choice.candidates
        if c.recipe is not None and c.recipe.checkpoint and c.recipe.checkpoint != (s.blocks,)
    }
    grid: dict[tuple[Recipe, int], int] = {}
    for n in s.sizes:
        for p in s.precisions:
            for ck in {(), (s.blocks,), chosen.get(n, ())}:
                r = Recipe(precision=p, checkpoint=ck)
                grid[(r, n)] = _plan(s, r, n).peak_bytes
    planned = {
        (c.recipe, c.batch_size): c.predicted_peak
        for c in choice.candidates
        if c.recipe is not None and c.predicted_peak is not None
    }
    for key, peak in grid.items():  # tune's plans are the grid's, byte for byte
        if key in planned:
            assert planned[key] == peak, key
    fitting = [k for k, peak in grid.items() if peak <= budget]
    assert (Recipe(), big) not in fitting  # the budget does bind

    # every fitting grid point timed side by side with the pick; faster beyond the interval:
    # the paired 99% interval of its speed over the pick's lies wholly above 1
    pick = (choice.recipe, choice.batch_size)
    points = [pick, *[k for k in fitting if k != pick]]
    times = _times(s, points)
    for (recipe, n), t in zip(points[1:], times[1:], strict=True):
        iv = ratio_interval(times[0], t, level=0.99)  # its speed over the pick's
        assert iv.low <= 1.0, (
            f"{recipe.label} @ batch {n} is {iv.estimate:.2f}x [{iv.low:.2f}-{iv.high:.2f}] "
            f"as fast as the pick {choice.label}: faster beyond the interval"
        )


# ---------------------------------------------------------------------------- leaves as found
@pytest.fixture(scope="module")
def tuned_gpt() -> tuple[Choice, dict[str, Any], dict[str, Any]]:
    """A small tune of nanoGPT after one step of the user's loop; the world before and after."""
    case = gpt(0, batch=4, n_layer=2, dropout=0.1)  # dropout: the steps draw random numbers
    opt = case.make_optimizer(case.model)
    torch.manual_seed(1)
    case.step(opt)  # .grad and AdamW state exist, as in a real session
    before = _world(case, opt)
    choice = tune(
        case.model,
        case.args,
        64 * 2**20,
        loss=case.loss,
        optimizer=opt,
        space={"precision": ["32"], "checkpoint": ["none", "blocks"]},
        batch_sizes=[4],
        budget_s=3,
        steps=2,
        warmup=0,
    )
    return choice, before, _world(case, opt)


def test_model_optimizer_inputs_and_rng_are_as_found(tuned_gpt: Any) -> None:
    _, before, after = tuned_gpt
    _assert_same(after, before, "after labkit.tune")


def test_choice_repr_summary_and_html(tuned_gpt: Any) -> None:
    choice, _, _ = tuned_gpt
    text = repr(choice)
    assert text.startswith(f"Choice({choice.recipe!r}, batch_size={choice.batch_size}, ")
    parts = (
        "predicted_peak=",
        "measured_peak=",
        "budget=64.00 MiB",
        "samples_per_s=",
        f"candidates={len(choice.candidates)}",
        f"ended_by={choice.ended_by!r}",
    )
    for part in parts:
        assert part in text
    c = choice.candidates[0]
    assert c.status == "picked" and repr(c).startswith(f"Candidate({c.label!r}, batch=")
    summary = choice.summary()
    assert summary.splitlines()[0].startswith(f"tune on cpu: {choice.label}")
    for cand in choice.candidates:  # one row per candidate, with its verdict
        assert any(
            line.startswith(cand.label) and cand.status in line for line in summary.splitlines()
        )
    assert "achieved" in choice.utilization and "no MFU on cpu" in choice.utilization
    assert choice.flops_per_s is not None and choice.flops_per_s > 0
    html = choice.to_html()
    assert html.count("<tr") == len(choice.rows()) and "<script" not in html
    assert choice.samples_per_s_low <= choice.samples_per_s <= choice.samples_per_s_high


def test_every_fitting_candidate_is_timed_or_says_why(tuned_gpt: Any) -> None:
    choice, _, _ = tuned_gpt
    timed = [c for c in choice.candidates if c.samples_per_s is not None]
    assert timed and all(c.rounds >= 1 for c in timed)
    for c in choice.candidates:
        assert c.status in ("picked", "slower", "within noise", "not timed", "skipped")
        if c.status in ("slower", "within noise"):
            assert c.slower_by is not None and "faster" in c.reason
    # checkpointing the blocks fits, but so does the same step without: not worth timing
    (dominated,) = [c for c in choice.candidates if c.status == "skipped"]
    assert dominated.recipe == Recipe(checkpoint=("transformer.h.*",))
    assert dominated.predicted_peak is not None and dominated.samples_per_s is None
    assert "fp32 fits at batch 4 without checkpointing" in dominated.reason


# ---------------------------------------------------------------------------- the parts
def test_planning_stops_at_plan_s_saying_so() -> None:
    model = ResMLP()
    choice = tune(
        model,
        torch.randn(4, 8),
        2**20,
        batch_sizes=[4, 8],
        budget_s=1,
        plan_s=1e-3,
        steps=2,
        warmup=0,
    )
    skipped = [c for c in choice.candidates if c.status == "skipped"]
    assert skipped and all(c.batch_size == 8 and "used its plan_s" in c.reason for c in skipped)
    rows = [r for r in choice.rows() if r[5].startswith("skipped")]
    assert len(rows) == len({c.label for c in skipped}) and all(r[1] == "8" for r in rows)
    assert choice.batch_size == 4 and any("planning stopped early" in n for n in choice.notes)


def test_a_model_too_large_to_plan_is_measured_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # the real plan with a limit this ResMLP passes: tune gets a real PlanTooLarge
    import functools

    from labkit.optimize import _tune_search

    small = functools.partial(_tune_search.plan, max_module_calls=3)
    monkeypatch.setattr(_tune_search, "plan", small)
    choice = tune(
        ResMLP(),
        torch.randn(4, 8),
        2**30,
        batch_sizes=[4, 8],
        budget_s=1,
        plan_s=60,
        steps=2,
        warmup=0,
    )
    notes = " ".join(choice.notes)
    assert "the plan cannot run this model (labkit.plan refused ResMLP" in notes, notes
    assert "measured instead with labkit.memory" in notes
    at_4 = [c for c in choice.candidates if c.batch_size == 4]
    assert at_4 and all(c.measured == "measured" and c.predicted_peak for c in at_4)
    at_8 = [c for c in choice.candidates if c.batch_size == 8]
    assert at_8 and all(c.reason.startswith("not measured: the model cannot") for c in at_8)


def test_greedy_takes_most_freed_per_second_until_the_excess_is_covered() -> None:
    blocks = [
        _tune_ckpt.Block("a", freed=800, seconds=1.0),
        _tune_ckpt.Block("b", freed=900, seconds=3.0),
        _tune_ckpt.Block("c", freed=100, seconds=1.0),
    ]
    order = sorted(blocks, key=lambda b: -b.per_second)
    assert [b.path for b in order] == ["a", "b", "c"]
    # the estimate keeps one module's activations (backward rebuilds one at a time)
    assert _tune_ckpt.choose(order, excess=0) == ["a"]
    assert _tune_ckpt.choose(order, excess=800) == ["a", "b"]
    assert _tune_ckpt.choose(order, excess=850) == ["a", "b", "c"]
    assert _tune_ckpt.choose(order, excess=0, start=1) == ["a", "b"]


def test_greedy_replaces_modules_by_the_block_around_them() -> None:
    order = [
        _tune_ckpt.Block("h.0.mlp", freed=500, seconds=1.0),
        _tune_ckpt.Block("h.0", freed=700, seconds=2.0),
        _tune_ckpt.Block("h.0.mlp.fc", freed=100, seconds=1.0),
        _tune_ckpt.Block("h.1", freed=600, seconds=2.0),
    ]
    assert _tune_ckpt.choose(order, excess=10**9) == ["h.0", "h.1"]


def test_ranked_blocks_of_a_plan_and_the_repeated_stack() -> None:
    model = ResMLP(depth=3)
    p = labkit.plan(model, torch.randn(32, 8))
    times = {f"blocks.{i}": 1e-3 for i in range(3)} | {f"blocks.{i}.mlp": 1e-3 for i in range(3)}
    ranked = _tune_ckpt.ranked(p.trace, p.saved_by_module(), times)
    paths = [b.path for b in ranked]
    assert set(paths) == set(times)  # modules that hold others and are called
    assert all(b.freed > 0 for b in ranked)
    assert _tune_ckpt.repeated_blocks(model) == ("blocks.*",)
    assert _tune_ckpt.repeated_blocks(nn.Linear(2, 2)) == ()
    seq = nn.Sequential(Residual(4), Residual(4))
    assert _tune_ckpt.repeated_blocks(seq) == ("0", "1")


def test_chosen_checkpoint_is_verified_by_planning() -> None:
    s = _resmlp()
    budget = (
        _plan(s, Recipe(checkpoint=("blocks.*",)), 128).peak_bytes
        + _plan(s, Recipe(), 128).peak_bytes
    ) // 2
    from labkit.optimize._tune_search import Search

    search = Search(
        s.model, maker(s.args, {}, 16), 16, None, s.optimizer, budget, lambda f, m: None
    )
    drafts = search.setup(_tune_space.SetUp(Recipe(), "auto"), [128])
    auto = drafts[-1]
    assert auto.recipe is not None and auto.recipe.checkpoint
    assert auto.fits and auto.peak == _plan(s, auto.recipe, 128).peak_bytes <= budget
    assert any("greedily" in n for n in search.notes)


@pytest.mark.parametrize(
    ("space", "labels", "refused"),
    [
        ({"precision": ["32", "bf16-mixed"]}, ["fp32", "bf16-mixed"], 0),
        (
            {"checkpoint": ["none", "auto", "blocks"]},
            ["fp32", "fp32 + ckpt(auto)", "fp32 + ckpt(blocks)"],
            0,
        ),
        ({"precision": ["16-mixed"], "quantization": [None, "int8-dynamic"]}, ["16-mixed"], 1),
        ([Recipe(), Recipe(), {"precision": "bf16-mixed"}], ["fp32", "bf16-mixed"], 0),
        ({"checkpoint": [("layers.*",)]}, ["ckpt(layers.*)"], 0),
    ],
)
def test_space_expands_and_names_refused_combinations(
    space: Any, labels: list[str], refused: int
) -> None:
    setups, bad = _tune_space.expand(space, torch.device("cpu"))
    assert [s.label for s in setups] == labels
    assert len(bad) == refused
    for combo, why in bad:
        assert "quantization='int8-dynamic'" in combo and "16-mixed" in why


def test_a_checkpoint_value_that_is_no_pattern_is_named() -> None:
    with pytest.raises(TypeError, match=r"checkpoint takes 'none', 'auto', 'blocks'.* got 5"):
        _tune_space.expand({"checkpoint": [5]}, torch.device("cpu"))


def test_default_space_on_this_cpu() -> None:
    space = _tune_space.default_space(torch.device("cpu"))
    assert space["checkpoint"] == ["none", "auto"] and space["compile"] == [None]
    assert ("bf16-mixed" in space["precision"]) == labkit.optimize._cpu.native_bf16()


def test_batches_follow_the_plans_batch_dimension() -> None:
    x, y, mask = torch.randn(4, 3), torch.arange(4), torch.ones(7)
    make = maker((x,), {"y": y, "mask": mask}, batch_dim((x,), {"y": y}))
    (xb,), kw = make(10)
    assert xb.shape == (10, 3) and kw["y"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert kw["mask"] is mask  # not of the batch's size: left as it is
    assert ladder(8, None) == [2, 4, 8, 16, 32, 64, 128]
    assert ladder(1, None)[0] == 1 and ladder(8, [64, 8, 8]) == [8, 64]


def test_optimizer_is_rebuilt_for_the_copy_with_a_copy_of_its_state() -> None:
    model = ResMLP()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.05)
    model(torch.randn(2, 8)).sum().backward()
    opt.step()
    work = labkit.optimize.apply(model)
    new = optimizer_for(work, model, opt)
    assert type(new) is torch.optim.AdamW and new.param_groups[0]["lr"] == 3e-4
    assert new.param_groups[0]["params"][0] is work.inp.weight
    a, b = opt.state[model.inp.weight]["exp_avg"], new.state[work.inp.weight]["exp_avg"]
    assert torch.equal(a, b) and a.data_ptr() != b.data_ptr()


def test_race_drops_the_measurably_slower_and_keeps_the_rest() -> None:
    gen = random.Random(0)

    def run(base: float) -> Any:
        return lambda: base * (1 + 0.01 * gen.random())

    entries = [Entry(0, 10, run(1.0)), Entry(1, 10, run(2.0)), Entry(2, 10, run(1.0005))]
    result = race(entries, warmup=1, rounds=3, budget_s=0.5, level=0.95)
    assert result.leader in (0, 2)
    assert entries[1].out == "slower" and result.ended_by in ("separated", "budget")
    assert entries[1].times[-1] is None  # dropped: it ran no more rounds


def test_race_keeps_finished_rounds_on_interrupt() -> None:
    calls = [0]

    def run() -> float:
        calls[0] += 1
        if calls[0] == 9:
            raise KeyboardInterrupt
        return 0.01

    entries = [Entry(0, 1, run), Entry(1, 2, run)]
    result = race(entries, warmup=1, rounds=10, budget_s=5, level=0.95)
    assert result.ended_by == "interrupted"
    assert len(entries[0].times) == len(entries[1].times) == 3  # round 4 was cut short
    assert result.leader == 1  # 0.005 s per sample


def test_heats_keep_the_copies_within_the_budget_on_cuda() -> None:
    recipes = ["a", "a", "b", "c"]
    held, peaks = [100, 100, 100, 300], [150, 200, 180, 350]
    assert _tune_heats.heats(recipes, held, peaks, 500, shared=False) == [[0, 1, 2, 3]]
    # a: copy 100 + rise 100; with b: 200 + 100 = 300 fits; with c: 500 + 100 > 500
    got = _tune_heats.heats(recipes, held, peaks, 500, shared=True)
    assert got == [[0, 1, 2], [3]]  # a heat holds one Recipe at least
    assert _tune_heats.heats(recipes, held, peaks, 10**9, shared=True) == [[0, 1, 2, 3]]


def test_utilization_table() -> None:
    rate, mfu, text = _tune_flops.utilization(
        10**12, 1.0, "cuda:0", "NVIDIA H100 80GB HBM3", "bf16"
    )
    assert rate == 1e12 and mfu == pytest.approx(1e12 / 989e12) and "MFU 0.1%" in text
    _, none, text = _tune_flops.utilization(10**12, 1.0, "cuda:0", "Mystery GPU", "fp32")
    assert none is None and "not in labkit's table" in text
    assert _tune_flops.peak("NVIDIA H100 PCIe", "bf16") == 756e12
    assert _tune_flops.dtype_of("32", "high") == "tf32"


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_budget_defaults_to_free_memory_less_the_margin() -> None:
    model = ResMLP().cuda()
    opt = torch.optim.AdamW(model.parameters())
    t0 = time.perf_counter()
    choice = tune(
        model,
        torch.randn(16, 8, device="cuda"),
        optimizer=opt,
        batch_sizes=[16, 64],
        space={"precision": ["32", "bf16-mixed"]},
        budget_s=10,
    )
    assert "free of" in choice.budget_how and "less 8%" in choice.budget_how
    assert choice.measured_peak is not None and choice.measured_peak <= choice.budget
    assert "MFU" in choice.utilization and time.perf_counter() - t0 < 120


def test_labkit_tune_is_the_function() -> None:
    assert labkit.tune is tune
    assert isinstance(Candidate("x", 1), Candidate)
