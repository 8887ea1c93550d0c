"""Big trace files (issue 35: 370k nodes took 150 s and +1.8 GiB to load): load time grows
linearly with the file, and memory stays within a small multiple of it.

Times are CPU seconds of this process (what other processes on a busy machine do to the
wall clock does not count), the best of two runs, compared as ratios within one run.
Memory is what Python allocates while loading (``tracemalloc``: exact, and blind to other
processes); ``benchmarks/trace_io.py`` measures the same loads as RSS, in fresh processes.
"""

from __future__ import annotations

import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.trace_io import synthetic_trace
from labkit._gc import no_gc
from labkit.trace import Trace


def _cpu(fn: Callable[[], object], runs: int = 2) -> float:
    best = float("inf")
    for _ in range(runs):
        gc.collect()
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def _json_floor(path: Path) -> object:
    with no_gc():  # as Trace.load holds it off: parsing, nothing else
        return json.loads(path.read_text())


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    folder = tmp_path_factory.mktemp("big")
    out = {}
    for n in (20_000, 80_000):
        out[n] = folder / f"{n}.json"
        synthetic_trace(n).save(out[n])
    return out


@pytest.mark.slow
def test_load_time_per_node_stays_flat_from_20k_to_80k_nodes(files: dict[int, Path]) -> None:
    per_node = {n: _cpu(lambda p=p: Trace.load(p)) / n for n, p in files.items()}
    ratio = per_node[80_000] / per_node[20_000]
    # linear: ~1.0; quadratic (each node costing in proportion to those before it): ~4.0
    assert ratio < 2.0, f"per-node load time grew {ratio:.2f}x from 20k to 80k nodes: {per_node}"


@pytest.mark.slow
def test_load_costs_a_small_multiple_of_parsing_the_json(files: dict[int, Path]) -> None:
    path = files[80_000]
    floor, load = _cpu(lambda: _json_floor(path)), _cpu(lambda: Trace.load(path))
    # ~2x here (parse, check every field, build); the reader before issue 35 took ~6x
    assert load < 5 * floor, f"Trace.load {load:.2f} s CPU vs json.loads {floor:.2f} s"


def _peak_and_kept(fn: Callable[[], object]) -> tuple[int, int, object]:
    gc.collect()
    tracemalloc.start()
    try:
        out = fn()
        kept, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, kept, out


def test_load_memory_stays_within_3x_the_file(tmp_path: Path) -> None:
    trace = synthetic_trace(10_000)
    path = tmp_path / "t.json"
    trace.save(path)
    size = path.stat().st_size
    peak, kept, back = _peak_and_kept(lambda: Trace.load(path))
    assert back == trace
    assert peak <= 3 * size, f"peak {peak / size:.2f}x the file"
    assert kept <= 2 * size, f"the Trace takes {kept / size:.2f}x the file"
    floor_peak, _, _ = _peak_and_kept(lambda: _json_floor(path))
    assert peak < floor_peak  # reading it whole (what the reader did before) takes ~5x


def test_save_memory_stays_within_2x_the_file(tmp_path: Path) -> None:
    trace = synthetic_trace(10_000)
    path = tmp_path / "t.json"
    peak, _, _ = _peak_and_kept(lambda: trace.save(path))
    size = path.stat().st_size
    assert peak <= 2 * size, f"saving took {peak / size:.2f}x the file at its peak"
