"""Big trace files: save and load time and peak memory at 10k, 100k and 370k nodes.

Run: ``python -m benchmarks.trace_io`` (``--sizes``, ``--rounds``).

Each trace is built synthetically as plain data (:func:`synthetic_trace`: a model of many
tiny blocks, ``Sequential(Linear, ReLU)``, recorded in full: a module call, its ops, their
tensors, times, FLOPs and edges; ~630 bytes of JSON a node, as a real full trace has), saved
with ``Trace.save``, then read back in a fresh process per read, so each read's memory is
its own: the kernel's peak-RSS counter is reset (``/proc/self/clear_refs``) after the
imports, and the figure is the peak's rise over the RSS before the read.

Variants per size, interleaved (floor, load, floor, load, ...), medians of ``--rounds``:

- ``json.loads``: the file parsed whole by the standard library (the garbage collector
  held off, as ``Trace.load`` holds it), nothing checked or built: the floor of any reader
  of this JSON (1.00x); its memory is what reading a big file whole costs;
- ``Trace.load``: labkit's reader (parse, check every field, build the Trace): the figure
  with the targets (issue 35: a 203 MiB, 370,009-node file took 150 s and +1.8 GiB; the
  target is <= 10 s on this machine and a peak <= 3x the file).

``Trace.save`` is timed once per size in this process (its peak-RSS rise too).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._harness import BenchResult, Row
from labkit._interleave import interleaved
from labkit.trace.model import Edge, ModuleInfo, Node, TensorMeta, Trace, TraceMeta

SIZES = (10_000, 100_000, 370_000)
TARGET_S = 10.0
TARGET_X = 3.0
MIB = 2**20


def synthetic_trace(n_nodes: int, *, seed: int = 0) -> Trace:
    """A full trace of ``n_nodes`` nodes (to within 4) of a model of many tiny blocks.

    Each block is a ``Sequential(Linear(64, 64), ReLU())`` call: 5 nodes (the block, the
    Linear call and its ``linear`` op, the ReLU call and its ``relu`` op), 2 edges and 3
    modules, with random times and the FLOPs and bytes of a 32 x 64 batch. Built as plain
    data, without torch: 370k nodes in a few seconds.
    """
    rng = random.Random(seed)
    x = TensorMeta((32, 64), "float32", "cpu", "[0]")
    y = TensorMeta((32, 64), "float32", "cpu", "")
    w = (y, TensorMeta((64, 64), "float32", "cpu", ""), TensorMeta((64,), "float32", "cpu", ""))
    first = TensorMeta((32, 64), "float32", "cpu", "input")
    nodes = [
        Node(0, "input:input", "input", "input", "Tensor", outputs=(first,)),
        Node(1, "#0", "module", "", "Sequential", module="", inputs=(x,), outputs=(y,)),
    ]
    container, lib = "torch.nn.modules.container", "torch.nn.modules."
    modules = [ModuleInfo("", "Sequential", 0, calls=1, library=container)]
    edges: list[Edge] = []
    r = rng.random
    prev = 0
    for b in range((n_nodes - 3) // 5):
        i, p = len(nodes), str(b)
        times = {
            "fwd_time": r() * 1e-4,
            "bwd_time": r() * 1e-4,
            "fwd_iqr": r() * 1e-6,
            "bwd_iqr": r() * 1e-6,
        }
        flops = {"flops_fwd": 262144, "flops_bwd": 524288}
        nodes += [
            Node(
                i,
                f"{p}#0",
                "module",
                p,
                "Sequential",
                parent=1,
                module=p,
                inputs=(x,),
                outputs=(y,),
                **times,
            ),
            Node(
                i + 1,
                f"{p}.0#0",
                "module",
                f"{p}.0",
                "Linear",
                parent=i,
                module=f"{p}.0",
                inputs=(x,),
                outputs=(y,),
                bwd_self_time=r() * 1e-5,
                saved_bytes=8192,
                **times,
                **flops,
            ),
            Node(
                i + 2,
                f"{p}.0#0/linear#0",
                "op",
                "linear",
                "linear",
                parent=i + 1,
                inputs=w,
                outputs=(y,),
                bwd_self_time=r() * 1e-5,
                **times,
                **flops,
            ),
            Node(
                i + 3,
                f"{p}.1#0",
                "module",
                f"{p}.1",
                "ReLU",
                parent=i,
                module=f"{p}.1",
                inputs=(x,),
                outputs=(y,),
                bwd_self_time=r() * 1e-5,
                saved_bytes=8192,
                **times,
            ),
            Node(
                i + 4,
                f"{p}.1#0/relu#0",
                "op",
                "relu",
                "relu",
                parent=i + 3,
                inputs=(y,),
                outputs=(y,),
                bwd_self_time=r() * 1e-5,
                **times,
            ),
        ]
        edges += [Edge(prev, i + 2, (32, 64), "float32"), Edge(i + 2, i + 4, (32, 64), "float32")]
        prev = i + 4
        modules += [
            ModuleInfo(p, "Sequential", 1, calls=1, library=container),
            ModuleInfo(
                f"{p}.0",
                "Linear",
                2,
                params=4160,
                param_bytes=16640,
                trainable=4160,
                calls=1,
                library=lib + "linear",
            ),
            ModuleInfo(f"{p}.1", "ReLU", 2, calls=1, library=lib + "activation"),
        ]
    nodes.append(Node(len(nodes), "output:output", "output", "output", "Tensor", inputs=(y,)))
    edges.append(Edge(prev, len(nodes) - 1, (32, 64), "float32"))
    meta = TraceMeta(
        "Sequential",
        "full",
        backward=True,
        forward_time=1.0,
        backward_time=2.0,
        timing="synthetic (benchmarks/trace_io.py)",
        notes=("synthetic",),
    )
    return Trace(meta, tuple(modules), tuple(nodes), tuple(edges))


def _rss() -> tuple[int, int]:
    """(current RSS, peak RSS since the last reset) of this process, in bytes."""
    fields = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["VmHWM"]


def _reset_peak() -> None:
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS


def child(how: str, path: str) -> None:
    """One read in this (fresh) process; prints its seconds and RSS figures as JSON."""
    from labkit._gc import no_gc
    from labkit.trace.io import load

    def read() -> object:
        if how == "json.loads":
            with no_gc():
                return json.loads(Path(path).read_text())
        return load(path, max_bytes=1 << 34)

    _reset_peak()
    rss0, _ = _rss()
    t0, c0 = time.perf_counter(), time.process_time()
    out = read()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    rss1, peak = _rss()
    print(json.dumps({"seconds": seconds, "cpu": cpu, "rise": peak - rss0, "kept": rss1 - rss0}))
    del out


def _run_child(how: str, path: Path) -> dict[str, float]:
    cmd = [sys.executable, "-m", "benchmarks.trace_io", "--child", how, str(path)]
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=root, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{out.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return figures


def measure(n_nodes: int, folder: Path, rounds: int) -> dict[str, Any]:
    """Build, save (timed here) and read back (fresh processes, interleaved) one size."""
    t0 = time.perf_counter()
    trace = synthetic_trace(n_nodes)
    built = time.perf_counter() - t0
    path = folder / f"trace-{n_nodes}.json"
    _reset_peak()
    rss0, _ = _rss()
    t0 = time.perf_counter()
    trace.save(path)
    saved = time.perf_counter() - t0
    save_rise = _rss()[1] - rss0
    nodes = len(trace.nodes)
    del trace
    size = path.stat().st_size
    reads: dict[str, list[dict[str, float]]] = {"json.loads": [], "Trace.load": []}

    def sample(how: str, _round: int, _timed: bool) -> float:
        figures = _run_child(how, path)
        reads[how].append(figures)
        return figures["seconds"]

    interleaved(list(reads), sample, warmup=0, rounds=rounds)
    med = {
        how: {k: statistics.median(f[k] for f in fs) for k in fs[0]} for how, fs in reads.items()
    }
    times = {how: [f["seconds"] for f in fs] for how, fs in reads.items()}
    path.unlink()
    return {
        "nodes": nodes,
        "bytes": size,
        "build_s": built,
        "save_s": saved,
        "save_rise": save_rise,
        "median": med,
        "times": times,
    }


def report(results: list[dict[str, Any]]) -> BenchResult:
    """Print the table and the verdicts; the rows (seconds) and RSS figures as a result."""
    print(
        "| nodes | file | save | save peak rise | json.loads (floor) | CPU | floor peak rise "
        "| Trace.load | CPU | ratio | per node | load peak rise | x file | kept | anchor |"
    )
    print(
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | --- |"
    )
    rows = []
    anchor = f"<= {TARGET_S:.0f} s, <= {TARGET_X:.0f}x file (issue 35: 150 s, +1.8 GiB)"
    for r in results:
        floor, load, size = r["median"]["json.loads"], r["median"]["Trace.load"], r["bytes"]
        print(
            f"| {r['nodes']:,} | {size / MIB:.1f} MiB | {r['save_s']:.2f} s | "
            f"{r['save_rise'] / MIB:.0f} MiB | {floor['seconds']:.2f} s | "
            f"{floor['cpu']:.2f} s | {floor['rise'] / MIB:.0f} MiB "
            f"({floor['rise'] / size:.1f}x) | "
            f"{load['seconds']:.2f} s | {load['cpu']:.2f} s | "
            f"{load['seconds'] / floor['seconds']:.2f}x | "
            f"{load['seconds'] / r['nodes'] * 1e6:.1f} us | {load['rise'] / MIB:.0f} MiB | "
            f"{load['rise'] / size:.2f}x | {load['kept'] / MIB:.0f} MiB | "
            f"{anchor if r['nodes'] >= 300_000 else ''} |"
        )
        for how, figures in r["median"].items():
            ts = r["times"][how]
            rows.append(
                Row(
                    name=f"{how} {r['nodes']}",
                    median_s=figures["seconds"],
                    min_s=min(ts),
                    max_s=max(ts),
                    ratio=figures["seconds"] / floor["seconds"],
                    anchor="1.00x (reading floor)" if how == "json.loads" else anchor,
                    samples=len(ts),
                )
            )
    big = max(results, key=lambda r: r["nodes"])
    load = big["median"]["Trace.load"]
    ok_t, ok_m = load["seconds"] <= TARGET_S, load["rise"] <= TARGET_X * big["bytes"]
    print(
        f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times "
        "include waiting for a CPU; CPU times do not)"
    )
    print(
        f"{big['nodes']:,} nodes ({big['bytes'] / MIB:.0f} MiB): Trace.load "
        f"{load['seconds']:.2f} s ({load['cpu']:.2f} s CPU; {'meets' if ok_t else 'MISSES'} "
        f"the {TARGET_S:.0f} s target), peak RSS rise {load['rise'] / big['bytes']:.2f}x the "
        f"file ({'meets' if ok_m else 'MISSES'} <= {TARGET_X:.0f}x)"
    )
    small = min(results, key=lambda r: r["nodes"])
    if small is not big:
        per = [x["median"]["Trace.load"]["cpu"] / x["nodes"] for x in (small, big)]
        print(
            f"CPU time per node, {big['nodes']:,} / {small['nodes']:,} nodes: "
            f"{per[1] / per[0]:.2f}x (1.00x: linear in the size)"
        )
    meta = {
        "sizes": [
            {k: r[k] for k in ("nodes", "bytes", "build_s", "save_s", "save_rise")}
            | {
                "load_cpu": r["median"]["Trace.load"]["cpu"],
                "load_rise": r["median"]["Trace.load"]["rise"],
                "load_kept": r["median"]["Trace.load"]["kept"],
                "floor_rise": r["median"]["json.loads"]["rise"],
            }
            for r in results
        ],
        "unit": "seconds (wall) per read; RSS in bytes in meta.sizes",
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0],
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    return BenchResult(name="trace_io", baseline="json.loads", rows=tuple(rows), meta=meta)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--child", nargs=2, metavar=("HOW", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(*args.child)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            r = measure(n, Path(tmp), args.rounds)
            mib = r["bytes"] / MIB
            print(
                f"{r['nodes']:,} nodes: built in {r['build_s']:.1f} s, {mib:.1f} MiB saved "
                f"in {r['save_s']:.2f} s",
                flush=True,
            )
            results.append(r)
    result = report(results)
    print(f"wrote {result.save()}")


if __name__ == "__main__":
    main()
