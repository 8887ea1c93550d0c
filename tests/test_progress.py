"""Progress of long calls (issue 41 item 2): a terminal line after a delay, a notebook bar,
a Ctrl-C that says what was done, and ``progress=`` on every long entry point."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import labkit
import labkit._progress as progress_module
from labkit._progress import DELAY, Progress, progress


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _shown(stream: io.StringIO) -> list[str]:
    """The lines drawn, as a terminal shows them one after the other."""
    return [part.strip() for part in stream.getvalue().split("\r") if part.strip()]


def test_the_terminal_line_appears_only_after_the_delay() -> None:
    clock, out = FakeClock(), io.StringIO()
    with Progress("labkit.trace", clock=clock, stream=out, notebook=False) as p:
        p(0.1, "recording the step")
        clock.now += DELAY - 0.01
        p(0.2, "warm-up pass 1 of 1")
        assert out.getvalue() == ""  # a call quicker than the delay prints nothing
        clock.now += 0.02
        p(0.6, "timing pass 3 of 5")
        assert _shown(out) == ["labkit.trace: timing pass 3 of 5 [60%]"]
        clock.now += progress_module.INTERVAL / 2
        p(0.7, "timing pass 4 of 5")  # within the redraw interval: not drawn
        assert len(_shown(out)) == 1
        clock.now += progress_module.INTERVAL
        p(0.8, "timing pass 5 of 5")
        assert _shown(out)[-1] == "labkit.trace: timing pass 5 of 5 [80%]"
    assert out.getvalue().endswith("\r")  # the line is wiped: the result prints clean
    assert "\n" not in out.getvalue()


def test_a_quick_call_prints_nothing() -> None:
    clock, out = FakeClock(), io.StringIO()
    with Progress("labkit.plan", clock=clock, stream=out, notebook=False) as p:
        for i in range(50):
            clock.now += 0.01
            p(i / 50, f"batch {i}")
    assert out.getvalue() == ""


def test_ctrl_c_says_what_was_done() -> None:
    clock, out = FakeClock(), io.StringIO()
    after = "the model and inputs are as before the call"
    p = Progress("labkit.trace", clock=clock, stream=out, notebook=False, after=after)
    with pytest.raises(KeyboardInterrupt) as info, p:
        p(0.45, "timing pass 2 of 5")  # before the delay: nothing drawn yet
        clock.now += 1.5
        raise KeyboardInterrupt
    said = (
        "labkit.trace: stopped by Ctrl-C during timing pass 2 of 5 (45% done in 1.5 s); "
        "the model and inputs are as before the call"
    )
    assert out.getvalue() == said + "\n"
    assert info.value.__notes__ == [said]


def test_off_inner_and_callback() -> None:
    clock, out = FakeClock(), io.StringIO()
    off = Progress("labkit.memory", enabled=False, clock=clock, stream=out, delay=0)
    with off:
        off(0.5, "recording the step")
    assert out.getvalue() == "" and off.quiet
    seen: list[tuple[float, str]] = []
    with progress("labkit.tune", lambda share, msg: seen.append((share, msg))) as outer:
        inner = Progress("labkit.plan", clock=clock, stream=out, delay=0, notebook=False)
        with inner:  # a plan made by tune: tune's progress speaks for it
            inner(0.5, "recording the step")
        outer(0.3, "timing heat 1 of 2")
    assert inner.quiet and out.getvalue() == ""
    assert seen == [(0.3, "timing heat 1 of 2")]
    with pytest.raises(TypeError, match=r"labkit.trace\(progress=...\) takes True, False"):
        progress("labkit.trace", "yes")


def test_the_notebook_bar_renders_with_ipywidgets(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("ipywidgets")
    pytest.importorskip("tqdm.notebook")
    clock, out = FakeClock(), io.StringIO()
    with Progress("labkit.plan", clock=clock, stream=out, notebook=True) as p:
        clock.now += DELAY
        p(0.4, "batch 64")
        bar = p._bar
        assert bar is not None
        label, gauge, _ = bar.container.children  # tqdm's ipywidgets HBox
        assert gauge.value == 40 and gauge.max == 100
        assert "labkit.plan: batch 64" in label.value.replace("\u2007", " ")  # tqdm: figure spaces
    assert out.getvalue() == ""  # nothing on stderr: the bar shows it
    capsys.readouterr()  # outside a kernel, IPython's display() prints the bar's text


def test_core_imports_without_the_widget_packages() -> None:
    """Without ipywidgets (and anywidget) the entry points import and a notebook falls
    back to the plain line."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('ipywidgets', 'anywidget'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import io\n"
        "import labkit.memory.api, labkit.optimize.compare, labkit.optimize.tune\n"
        "import labkit.plan.api, labkit.plan.batch, labkit.trace.api\n"
        "from labkit._progress import Progress\n"
        "out = io.StringIO()\n"
        "with Progress('labkit.plan', delay=0, notebook=True, stream=out) as p:\n"
        "    p(0.5, 'batch 8')\n"
        "assert 'labkit.plan: batch 8 [50%]' in out.getvalue(), out.getvalue()\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


# ---------------------------------------------------------------------- every entry point
def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def _x() -> torch.Tensor:
    return torch.randn(16, 8)


CALLS: dict[str, tuple[Callable[..., Any], list[str]]] = {
    "trace": (
        lambda **kw: labkit.trace(_model(), _x(), warmup=1, repeat=2, **kw),
        [
            "labkit.trace: recording the step",
            "labkit.trace: warm-up pass 1 of 1",
            "labkit.trace: timing pass 2 of 2",
            "labkit.trace: op timing pass 2 of 2",
        ],
    ),
    "memory": (
        lambda **kw: labkit.memory(_model(), _x(), **kw),
        ["labkit.memory: recording the step"],
    ),
    "plan": (
        lambda **kw: labkit.plan(_model(), torch.Size([16, 8]), **kw),
        ["labkit.plan: making the fake copy", "labkit.plan: recording the step on fake tensors"],
    ),
    "max_batch_size": (
        lambda **kw: labkit.plan.max_batch_size(_model(), _x(), budget=2**20, limit=64, **kw),
        ["labkit.plan.max_batch_size: batch 1", "labkit.plan.max_batch_size: batch 2"],
    ),
    "compare": (
        lambda **kw: labkit.compare(
            _model(),
            _x(),
            [labkit.Recipe(matmul_precision="high")],
            steps=2,
            warmup=0,
            target=None,
            memory=False,
            drift=False,
            **kw,
        ),
        ["compare: applying recipes", "compare: round 2"],
    ),
    "tune": (
        lambda **kw: labkit.tune(
            _model(),
            _x(),
            budget=200_000,
            batch_sizes=[8, 16],
            space={"precision": ["32"]},
            budget_s=1,
            steps=2,
            **kw,
        ),
        ["labkit.tune: planning fp32 at batch 8", "labkit.tune: running the pick once"],
    ),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_progress_false_prints_nothing(name: str, capsys, monkeypatch) -> None:
    monkeypatch.setattr(progress_module, "DELAY", 0.0)  # even a quick call would show
    monkeypatch.setattr(progress_module, "INTERVAL", 0.0)
    call, _ = CALLS[name]
    call(progress=False)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


@pytest.mark.parametrize("name", list(CALLS))
def test_a_long_call_names_its_passes_on_stderr(name: str, capsys, monkeypatch) -> None:
    # as a call past the delay shows it: every update drawn (no delay, no redraw interval)
    monkeypatch.setattr(progress_module, "DELAY", 0.0)
    monkeypatch.setattr(progress_module, "INTERVAL", 0.0)
    call, passes = CALLS[name]
    call()
    err = capsys.readouterr().err
    shown = [part.strip() for part in err.split("\r") if part.strip()]
    for expected in passes:
        assert any(line.startswith(expected) for line in shown), (expected, shown)
    assert all(line.endswith("]") for line in shown)  # each with the share done
    assert err.endswith("\r")  # the line is wiped at the end: nothing left over


def test_a_quick_trace_prints_nothing_by_default(capsys) -> None:
    labkit.trace(_model(), _x(), repeat=2)
    assert capsys.readouterr().err == ""


class _StopsOnCall(nn.Module):
    """A Ctrl-C arrives during the n-th forward."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.lin, self.n, self.calls = nn.Linear(4, 4), n, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.n:
            raise KeyboardInterrupt
        return self.lin(x)


def test_ctrl_c_in_a_trace_stops_cleanly_and_says_where(capsys) -> None:
    model = _StopsOnCall(n=4)  # the recording, then the timing passes' runs
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(KeyboardInterrupt) as info:
        labkit.trace(model, torch.randn(2, 4), warmup=1, repeat=3)
    err = capsys.readouterr().err
    assert "labkit.trace: stopped by Ctrl-C during timing pass 1 of 3" in err
    assert "labkit.trace: stopped by Ctrl-C" in info.value.__notes__[0]
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.lin.weight.grad is None  # put back as before the call


def test_a_real_kernel_gets_the_notebook_bar(tmp_path) -> None:
    """In a Jupyter kernel a long plan shows tqdm's widget bar, not a stderr line."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import torch, labkit, labkit._progress as lp\n"
            "lp.DELAY = 0.0  # as a call past the delay shows it\n"
            "plan = labkit.plan(torch.nn.Linear(4, 4), torch.Size([2, 4]))\n"
            "print(plan.peak_bytes > 0)"
        )
    )
    NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = nb.cells[0].outputs
    widgets = [
        o for o in outputs if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    assert widgets, outputs
    streams = [o for o in outputs if o.get("output_type") == "stream"]
    assert [(o["name"], o["text"]) for o in streams] == [("stdout", "True\n")]  # no stderr line


def test_ctrl_c_in_compare_says_where_it_stopped(capsys) -> None:
    calls = [0]

    def loss(out: torch.Tensor) -> torch.Tensor:
        calls[0] += 1
        if calls[0] == 4:  # a Ctrl-C during the timed rounds
            raise KeyboardInterrupt
        return out.float().mean()

    x = _x()
    before = x.clone()
    with pytest.raises(KeyboardInterrupt):
        labkit.compare(
            _model(),
            x,
            [labkit.Recipe(matmul_precision="high")],
            loss=loss,
            steps=3,
            warmup=1,
            target=None,
            memory=False,
            drift=False,
        )
    err = capsys.readouterr().err
    assert "compare: stopped by Ctrl-C during " in err
    assert "the model was not run; the inputs and RNG are as they were" in err
    assert torch.equal(x, before)
