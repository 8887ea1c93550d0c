"""What ``labkit.trace`` and ``labkit.plan`` cost per module call, at growing model sizes.

Run: ``python -m benchmarks.trace_scale`` (``--sizes 1000 3000 10000``, ``--big`` adds
100,000, ``--rounds``, ``--only trace,plan``).

The model is ``N`` ``Linear(2, 2)`` modules called one after the other in a Python loop
(``Chain(N)``, a batch of 4): the cheapest module call there is, so what a call costs is
labkit's own work. For each size, in a fresh process each (so a one-time import, the
first fake-tensor mode or torch._dynamo, is paid before the clock starts, and the peak
resident memory is the call's own), side by side:

- ``step``: the model's own forward + backward, no labkit (median of ``--rounds``);
- ``record``: ``labkit.trace(model, x, repeat=0)``: the full recording alone (graph,
  FLOPs, memory; no timing passes);
- ``trace``: ``labkit.trace(model, x, warmup=0, repeat=1)``: the recording plus one round
  of timing passes (hook-free, hooked, and op-timed up to 20,000 module calls: above
  ``labkit.trace._passes.OP_TIMES_MAX_CALLS`` the default leaves op nodes untimed, with a
  note; ``op_times=True`` times them);
- ``fake``: the same step on fake tensors under torch's ``FakeTensorMode`` alone (the
  parameters made fake, forward, backward): the floor of any plan on fake tensors;
- ``plan``: ``labkit.plan(model, x)``: the same step on fake tensors, recorded.

Each figure is process CPU time of one call (what the call costs, whatever else the
machine runs; the wall time is printed too), then per module call: ``(labkit - step) / N``,
the target of issue 41 (<= 0.3 ms a module call plus the model's own step) and issue 37
(recording <= 10x the step plus <= 0.2 ms a node). ``slope`` is the cost of one more
module call between two sizes: flat means linear. ``peak`` is the process's peak resident
memory over the call (target: <= 6 GiB at 100,000 module calls).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

SIZES = (1_000, 3_000, 10_000)
BIG = 100_000
KINDS = ("record", "trace", "fake", "plan")
TARGET_MS = 0.3  # per module call, over the model's own step (issue 41 item 3)
TARGET_NODE_MS = 0.2  # per node, recording (issue 37 item 3)
GIB = 2**30

_CHILD = r"""
import json, resource, statistics, sys, time
import torch
from torch import nn

class Chain(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(2, 2) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

kind, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
x = torch.randn(4, 2)
model = Chain(n)
out = {}
if kind == "step":
    times = []
    for _ in range(rounds + 1):
        t0 = time.process_time()
        model(x).sum().backward()
        times.append(time.process_time() - t0)
        model.zero_grad(set_to_none=True)
    out["cpu"] = statistics.median(times[1:])
    out["wall"] = out["cpu"]
elif kind == "fake":  # the same step on fake tensors under torch's mode alone
    from torch._subclasses.fake_tensor import FakeTensorMode

    def fake_step(m):
        mode = FakeTensorMode(allow_non_fake_inputs=True)
        fm = {id(p): nn.Parameter(mode.from_tensor(p.detach())) for p in m.parameters()}
        import copy
        fmodel = copy.deepcopy(m, fm)
        with mode:
            fmodel(mode.from_tensor(x)).sum().backward()
        return fmodel

    fake_step(Chain(3))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, w0 = time.process_time(), time.perf_counter()
    fake_step(model)
    out["cpu"], out["wall"] = time.process_time() - t0, time.perf_counter() - w0
    out["nodes"] = 2 * n + 3
    out["peak_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["rss0_kib"] = rss0
else:
    import labkit
    warm = Chain(3)  # one-time costs (imports, the first fake mode) before the clock
    if kind == "plan":
        labkit.plan(warm, x)
    else:
        labkit.trace(warm, x, warmup=0, repeat=0 if kind == "record" else 1)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0, w0 = time.process_time(), time.perf_counter()
    if kind == "plan":
        result = labkit.plan(model, x, max_module_calls=None).trace  # any size: no limit
    elif kind == "record":
        result = labkit.trace(model, x, repeat=0)
    else:
        result = labkit.trace(model, x, warmup=0, repeat=1)
    out["cpu"], out["wall"] = time.process_time() - t0, time.perf_counter() - w0
    out["nodes"] = len(result.nodes)
    out["peak_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    out["rss0_kib"] = rss0
print("RESULT " + json.dumps(out))
"""


def run_one(kind: str, n: int, rounds: int) -> dict[str, float]:
    """One measurement in a fresh Python process; its figures."""
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, kind, str(n), str(rounds)],
        capture_output=True,
        text=True,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(json.loads(line[7:]))
    raise RuntimeError(f"{kind} at {n} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=list(SIZES))
    ap.add_argument("--big", action="store_true", help=f"add {BIG:,} module calls")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the model's own step")
    ap.add_argument("--only", default=",".join(KINDS), help="comma list of record,trace,fake,plan")
    ap.add_argument("--save", action="store_true", help="write benchmarks/results/trace_scale.json")
    args = ap.parse_args(argv)
    sizes = sorted(set(args.sizes + ([BIG] if args.big else [])))
    kinds = [k for k in args.only.split(",") if k]
    unknown = set(kinds) - set(KINDS)
    if unknown:
        ap.error(f"--only takes {','.join(KINDS)}, got {','.join(sorted(unknown))}")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpu = platform.processor() or platform.machine()
    print(
        f"trace_scale: Chain(N) of Linear(2, 2), batch 4; CPU seconds per call "
        f"(load {load:.2f} at start, {os.cpu_count()} CPUs, {cpu})"
    )
    rows: list[dict[str, object]] = []
    for n in sizes:
        step = run_one("step", n, args.rounds)
        row: dict[str, object] = {"n": n, "step_s": step["cpu"]}
        for kind in kinds:  # side by side at each size
            r = run_one(kind, n, args.rounds)
            net_ms = (r["cpu"] - step["cpu"]) / n * 1e3
            row[kind] = {
                "cpu_s": r["cpu"],
                "wall_s": r["wall"],
                "nodes": r["nodes"],
                "per_call_ms": net_ms,
                "x_step": r["cpu"] / max(step["cpu"], 1e-9),
                "per_node_ms": r["cpu"] / r["nodes"] * 1e3,
                "peak_gib": r["peak_kib"] * 1024 / GIB,
            }
        rows.append(row)
        _print_row(row, kinds)
    _print_slopes(rows, kinds)
    end_load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"load {end_load:.2f} at the end; targets: <= {TARGET_MS} ms a module call over "
        f"the step (trace, plan), recording <= 10x step + {TARGET_NODE_MS} ms a node, "
        f"<= 6 GiB at {BIG:,}"
    )
    result: dict[str, object] = {
        "rows": rows,
        "load": [load, end_load],
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
    }
    if args.save:
        path = Path(__file__).resolve().parent / "results" / "trace_scale.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(result, indent=1))
        os.replace(tmp, path)
        print(f"saved {path}")
    return result


def _print_row(row: dict[str, object], kinds: list[str]) -> None:
    n = row["n"]
    step = float(row["step_s"])  # type: ignore[arg-type]
    parts = [f"N={n:>7,}  step {step * 1e3:8.1f} ms ({step / n * 1e3:.3f} ms/call)"]  # type: ignore[operator]
    for kind in kinds:
        r = row[kind]
        assert isinstance(r, dict)
        parts.append(
            f"{kind} {r['cpu_s']:7.2f} s (wall {r['wall_s']:6.2f}) {r['per_call_ms']:.3f} ms/call "
            f"{r['x_step']:.0f}x step, {r['per_node_ms']:.3f} ms/node, peak {r['peak_gib']:.2f} GiB"
        )
    print("\n    ".join(parts), flush=True)


def _print_slopes(rows: list[dict[str, object]], kinds: list[str]) -> None:
    for a, b in itertools.pairwise(rows):
        dn = int(b["n"]) - int(a["n"])  # type: ignore[call-overload]
        parts = []
        for kind in kinds:
            ra, rb = a[kind], b[kind]
            assert isinstance(ra, dict) and isinstance(rb, dict)
            parts.append(f"{kind} {(rb['cpu_s'] - ra['cpu_s']) / dn * 1e3:.3f}")
        print(f"slope {a['n']:,} -> {b['n']:,}: ms per extra module call: " + ", ".join(parts))


if __name__ == "__main__":
    main()
