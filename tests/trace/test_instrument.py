"""The instrumentation layer: one owner of every hook, where-am-I, observers kept apart."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

import labkit
from labkit.memory.tracker import MemoryTracker
from labkit.trace import Recorder
from labkit.trace.instrument import Instrumentation, Observer
from tests.trace._models import MLP, Interrupting, zoo
from tests.trace.conftest import assert_clean


class Where(Observer):
    """Writes down where the layer says the model is at every aten op."""

    needs_dispatch = True

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []

    def start(self, inst: Instrumentation) -> None:
        self.inst = inst

    def dispatch(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        owner = self.inst.backward_owner()
        key = owner.key if owner is not None else None
        self.seen.append((self.inst.phase, self.inst.module_now(), key))


def _observer_sets(model: nn.Module) -> dict[str, Recorder]:
    return {
        "timing": Recorder(model, mode="timing"),
        "full": Recorder(model, mode="full"),
        "memory": Recorder(model, mode="timing", observers=[MemoryTracker(model)]),
        "ops": Recorder(model, mode="ops"),
        "step": Recorder(model, mode="step"),
        "where": Recorder(model, mode="timing", observers=[Where()]),
    }


@pytest.mark.parametrize("kind", ["timing", "full", "memory", "ops", "step", "where"])
@pytest.mark.parametrize("ending", ["success", "error", "interrupt"])
def test_every_observer_set_removes_every_hook(kind: str, ending: str) -> None:
    model = Interrupting() if ending == "interrupt" else MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    rec = _observer_sets(model)[kind]
    x = torch.randn(3, 2 if ending == "interrupt" else 8)
    if ending == "error":
        x = torch.randn(3, 5)  # wrong width: fails in the first Linear
    expected = {"success": None, "error": RuntimeError, "interrupt": KeyboardInterrupt}[ending]
    try:
        with rec:
            model(x).sum().backward()
            opt.step()
    except BaseException as e:
        assert expected is not None and isinstance(e, expected), e
    else:
        assert expected is None
    assert not rec.enabled and not rec.attached
    assert_clean(model)
    assert rec.trace is not None  # what was recorded up to the failure is kept


def test_where_am_i_names_phase_module_and_backward_owner() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    where = Where()
    with Recorder(model, mode="timing", observers=[where]):
        model(torch.randn(5, 4)).sum().backward()
        opt.step()
    phases = [p for p, _, _ in where.seen]
    assert 0 < phases.index("backward") < phases.index("optimizer")
    fwd = {m for p, m, _ in where.seen if p == "forward"}
    assert {"0", "1", "2"} <= fwd
    # backward ops belong to the module call whose autograd nodes run them
    owners = {k for p, _, k in where.seen if p == "backward" and k is not None}
    assert {"0#0", "2#0"} <= owners
    bwd_modules = {m for p, m, _ in where.seen if p == "backward"}
    assert {"0", "2"} <= bwd_modules
    assert {m for p, m, _ in where.seen if p == "optimizer"} == {""}


def test_param_owner_is_the_first_registering_module() -> None:
    shared = nn.Linear(3, 3)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    inst = Instrumentation(model).attach()
    try:
        assert inst.param_owner(shared.weight) == "0"
        assert inst.param_owner(torch.zeros(1)) == ""
    finally:
        inst.detach()
    assert_clean(model)


def test_an_observer_that_fails_to_start_leaves_nothing() -> None:
    class Broken(Observer):
        needs_dispatch = True
        needs_saved = True
        needs_grads = True

        def start(self, inst: Instrumentation) -> None:
            raise RuntimeError("cannot start")

    model = MLP()
    with pytest.raises(RuntimeError, match="cannot start"), Instrumentation(model, [Broken()]):
        pass
    assert_clean(model)


@pytest.mark.parametrize("name", list(zoo()))
def test_ops_inside_a_module_add_up_to_the_module_forward_and_backward(name: str) -> None:
    model, args, kwargs = zoo()[name]
    t = labkit.trace(model, *args, repeat=0, **kwargs)
    checked = 0
    for n in t.nodes:
        ops = [t.nodes[c] for c in t.children.get(n.id, ()) if t.nodes[c].kind == "op"]
        if n.kind != "module" or not ops:
            continue
        assert sum(o.flops_fwd for o in ops) == n.flops_fwd, n.key
        assert sum(o.flops_bwd for o in ops) == n.flops_bwd, n.key
        checked += 1
    assert checked
    # and the module figures themselves equal FlopCounterMode's (test_recorder checks totals)
    assert t.total_flops > 0


def test_instrumentation_repr() -> None:
    inst = Instrumentation(MLP(), [Where()])
    assert repr(inst) == (
        "Instrumentation(model=MLP, observers=[Where], ops=False, attached=False, enabled=False)"
    )


class Runner(Observer):
    """Runs every aten op itself (as plan's index values do), writing each one down."""

    runs_ops = True

    def __init__(self) -> None:
        self.ran: list[Any] = []

    def run_op(self, func: Any, args: Any, kwargs: Any) -> Any:
        self.ran.append(func)
        return func(*args, **kwargs)


class Ops(Observer):
    needs_dispatch = True

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def dispatch(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        self.seen.append(func)


def test_an_op_runner_runs_each_op_the_other_observers_see() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    x = torch.randn(3, 4)
    runner, ops, plain = Runner(), Ops(), Ops()
    with Instrumentation(model, [runner, ops]):
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    with Instrumentation(model, [plain]):
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    assert ops.seen == plain.seen  # the same ops seen, in the same order
    assert [f for f in runner.ran if f in set(ops.seen)] == ops.seen
    two = Instrumentation(model, [Runner(), Runner()])
    with pytest.raises(ValueError, match="one observer of a recording may run the ops"), two:
        pass
    assert_clean(model)
