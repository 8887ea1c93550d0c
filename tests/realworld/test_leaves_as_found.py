"""Measuring leaves the user's world as it found it (issue 27 item 1).

Every pattern of the corpus is built twice from one seed. Both twins take one real step
of the user's loop (so ``.grad`` and optimizer state exist); then one twin is measured by
an entry point and compared value by value (``torch.equal``) with the untouched one:
parameters and their ``.grad``, buffers (reassigned ones too), inputs and their ``.grad``,
the optimizer's state and param groups, plain module attributes, ``training`` flags and
the RNG. Then both take another step, which must agree too.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import torch
from torch import nn

import labkit
from labkit.trace import StepState
from tests.realworld.models import BUILDERS, Case, build

# a plain module attribute of a scalar kind: what the lecture model counts in
_SCALARS = (int, float, bool, str, type(None))


def _world(case: Case, opt: torch.optim.Optimizer | None) -> dict[str, Any]:
    """Everything a step can touch, by name (tensors cloned)."""
    m = case.model
    out: dict[str, Any] = {}
    for name, p in m.named_parameters():
        out[f"param {name}"] = p.detach().clone()
        out[f"grad {name}"] = None if p.grad is None else p.grad.clone()
    for name, b in m.named_buffers():
        out[f"buffer {name}"] = b.detach().clone()
    for path, mod in m.named_modules():
        out[f"training {path}"] = mod.training
        for k, v in vars(mod).items():
            if not k.startswith("_") and isinstance(v, _SCALARS):
                out[f"attr {path}.{k}"] = v
    inputs = [*case.args, *case.kwargs.values()]
    for i, t in enumerate(inputs):
        if isinstance(t, torch.Tensor):
            out[f"input {i}"] = t.detach().clone()
            out[f"input grad {i}"] = None if t.grad is None else t.grad.clone()
    if opt is not None:
        sd = opt.state_dict()
        for pid, st in sd["state"].items():
            for k, v in st.items():
                out[f"opt state {pid}.{k}"] = v.clone() if isinstance(v, torch.Tensor) else v
        for i, g in enumerate(sd["param_groups"]):
            out[f"opt group {i}"] = {k: v for k, v in g.items() if k != "params"}
    out["rng torch"] = torch.get_rng_state()
    out["rng python"] = random.getstate()
    return out


def _assert_same(got: dict[str, Any], want: dict[str, Any], what: str) -> None:
    assert got.keys() == want.keys(), f"{what}: {sorted(got.keys() ^ want.keys())}"
    for k, w in want.items():
        g = got[k]
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor) and torch.equal(g, w), f"{what}: {k} differs"
        else:
            assert g == w, f"{what}: {k} differs ({g!r} != {w!r})"


# smaller where the pattern does not need the size (a full recording of 40 blocks is slow)
_SMALL: dict[str, dict[str, Any]] = {"mixer": {"blocks": 4}}


def _twins(name: str) -> tuple[Case, Any, Case, Any]:
    a, b = build(name, **_SMALL.get(name, {})), build(name, **_SMALL.get(name, {}))
    opt_a = a.make_optimizer(a.model) if a.make_optimizer else None
    opt_b = b.make_optimizer(b.model) if b.make_optimizer else None
    for case, opt in ((a, opt_a), (b, opt_b)):
        torch.manual_seed(1)
        random.seed(1)
        case.step(opt)  # the user's loop ran before: .grad and optimizer state exist
    return a, opt_a, b, opt_b


def _batch(case: Case) -> Any:
    return case.args if case.args else None


ENTRIES = {
    "trace": lambda c, opt: labkit.trace(
        c.model, *c.args, loss=c.loss, warmup=1, repeat=1, model_kwargs=c.kwargs
    ),
    "memory": lambda c, opt: labkit.memory(
        c.model, _batch(c), loss=c.loss, optimizer=opt, model_kwargs=c.kwargs
    ),
    "plan": lambda c, opt: labkit.plan(
        c.model, _batch(c), loss=c.loss, optimizer=opt, model_kwargs=c.kwargs
    ),
}


@pytest.mark.parametrize("entry", sorted(ENTRIES))
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_measuring_leaves_every_pattern_as_its_untouched_twin(name: str, entry: str) -> None:
    a, opt_a, b, opt_b = _twins(name)
    torch.manual_seed(5)
    random.seed(5)
    ENTRIES[entry](a, opt_a)
    torch.manual_seed(5)
    random.seed(5)
    _assert_same(_world(a, opt_a), _world(b, opt_b), f"{name} after {entry}")
    for case, opt in ((a, opt_a), (b, opt_b)):  # and the next real step agrees too
        torch.manual_seed(2)
        random.seed(2)
        case.model.zero_grad(set_to_none=False)
        case.step(opt)
    _assert_same(_world(a, opt_a), _world(b, opt_b), f"{name}, a step after {entry}")


def test_keep_step_keeps_exactly_one_step_of_the_loop() -> None:
    a, opt_a, b, opt_b = _twins("bn_dropout")
    torch.manual_seed(3)
    labkit.memory(a.model, _batch(a), loss=a.loss, optimizer=opt_a, keep_step=True)
    torch.manual_seed(3)
    b.step(opt_b)  # the same step, by hand (keep_output: the output lives to the step's end)
    _assert_same(_world(a, opt_a), _world(b, opt_b), "memory(keep_step=True)")
    a2, _, b2, _ = _twins("buffer_reassign")
    labkit.trace(a2.model, *a2.args, keep_step=True, repeat=2)
    # one step's effects: steps + 1, grads accumulated, on the default loss (the output's mean)
    b2.model(*b2.args).mean(dtype=torch.float32).backward()
    _assert_same(_world(a2, None), _world(b2, None), "trace(keep_step=True)")


class _Explodes(nn.Module):
    """Mutates its input, its buffer and a counter, then fails on a chosen call."""

    def __init__(self, fail_on: int, exc: type[BaseException]) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.register_buffer("seen", torch.zeros(()))
        self.calls, self.fail_on, self.exc = 0, fail_on, exc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        x.add_(1)
        self.seen = self.seen + 1
        if self.calls == self.fail_on:
            raise self.exc("boom")
        return self.fc(x)


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("fail_on", [1, 3])  # in the recording, in a timing pass
@pytest.mark.parametrize("entry", ["trace", "memory"])
def test_a_step_that_fails_or_is_interrupted_is_undone(
    entry: str, fail_on: int, exc: type[BaseException]
) -> None:
    if entry == "memory" and fail_on == 3:
        pytest.skip("memory runs the step once")
    model = _Explodes(fail_on, exc)
    x = torch.randn(3, 4)
    x0, w0 = x.clone(), model.fc.weight.detach().clone()
    rng = torch.get_rng_state()
    with pytest.raises((exc, RuntimeError)):
        if entry == "trace":
            labkit.trace(model, x, repeat=3)
        else:
            labkit.memory(model, x)
    assert torch.equal(x, x0) and torch.equal(model.fc.weight, w0)
    assert model.seen.item() == 0 and model.calls == 0 and model.fc.weight.grad is None
    assert torch.equal(torch.get_rng_state(), rng)


class _Stats:
    """A plain Python object of counters, as research code keeps them."""

    def __init__(self) -> None:
        self.calls = 0


class _Remembers(nn.Module):
    """Keeps Python state in forward: a list, a stats object, and a list inside a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.history: list[int] = []
        self.stats = _Stats()
        self.log: dict[str, list[int]] = {"seen": []}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.history.append(x.shape[0])
        self.stats.calls += 1
        self.log["seen"].append(x.shape[0])  # two levels down: seen, not put back
        return self.fc(x)


def test_python_state_is_put_back_and_what_cannot_be_is_named_with_its_run_count() -> None:
    outer = nn.Sequential(nn.Identity(), _Remembers())
    t = labkit.trace(outer, torch.randn(3, 4), warmup=1, repeat=3, time_budget=None)
    inner = outer[1]
    assert inner.history == [] and inner.stats.calls == 0  # one level deep: put back
    runs = len(inner.log["seen"])
    assert runs >= 1 + 1 + 3 + 3  # recording, warm-up, timed passes, op passes
    note = next(n for n in t.meta.notes if "cannot put back" in n)
    assert "module '1' (_Remembers): .log (a dict)" in note
    assert ".history" not in note and ".stats" not in note
    assert f"ran the step {runs} times" in note


def test_a_graph_built_before_the_call_still_runs_backward() -> None:
    case = build("bn_dropout")
    loss = case.loss(case.model(*case.args))  # the user's step, half done
    labkit.trace(case.model, *case.args, loss=case.loss, repeat=2)
    labkit.memory(case.model, case.args, loss=case.loss)
    loss.backward()  # no "modified by an inplace operation": versions did not move
    assert all(p.grad is not None for p in case.model.parameters())


def test_memory_then_plan_peaks_as_plan_alone() -> None:
    case = build("gpt")
    opt = case.make_optimizer(case.model)
    alone = labkit.plan(case.model, case.args, loss=case.loss, optimizer=opt).peak_bytes
    labkit.memory(case.model, case.args, loss=case.loss, optimizer=opt)
    assert labkit.plan(case.model, case.args, loss=case.loss, optimizer=opt).peak_bytes == alone


def test_lab_trace_leaves_the_model_as_it_was(tmp_path) -> None:
    from torch.utils.data import TensorDataset

    from labkit.train import Lab

    a, b = build("bn_dropout"), build("bn_dropout")
    x, y = a.args[0], torch.randint(0, 3, (a.args[0].shape[0],))
    data = TensorDataset(x, y)
    lab = Lab(a.model, data, loss=torch.nn.functional.cross_entropy, batch_size=4, logdir=tmp_path)
    torch.manual_seed(4)
    lab.trace(repeat=2)
    torch.manual_seed(4)
    _assert_same(_world(a, None), _world(b, None), "Lab.trace")


def test_step_state_repr_and_public_name() -> None:
    model = nn.Linear(2, 2)
    state = StepState(model, torch.zeros(1, 2))
    assert repr(state) == "StepState(model=Linear, tensors=3, optimizers=0, rng=True)"
