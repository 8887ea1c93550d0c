"""Side-by-side benchmark harness shared by every script in ``benchmarks/``.

Variants run interleaved (A B C A B C ...) after a warm-up, so drift in the
machine (thermal, other processes, allocator state) hits every variant alike
(:func:`labkit._interleave.interleaved`, which ``labkit.compare`` times with too).
Each figure is the median of its rounds, printed as a ratio to a baseline next
to the anchor it is compared to (a published figure or a target).

Example:
    >>> from benchmarks._harness import Bench  # run scripts as `python -m benchmarks.<name>`
    >>> bench = Bench("sum_vs_loop", baseline="builtin", warmup=2, rounds=5)
    >>> bench.add("builtin", lambda: sum(range(1000)), anchor="1.00x")
    >>> bench.add("loop", lambda: [i for i in range(1000)], anchor="< 3x")
    >>> result = bench.run()
    >>> print(result.to_markdown())  # doctest: +SKIP
    >>> result.save()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from labkit._format import fmt_time
from labkit._interleave import interleaved

RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Variant:
    """One thing to time.

    Args:
        name: Row label in the table and key in the JSON.
        fn: Zero-argument callable; one call is one sample (or ``number`` calls).
        anchor: What this figure is compared to, e.g. ``"1.00x"`` or
            ``"<= 1.05x (torchinfo)"``. Printed verbatim.
    """

    name: str
    fn: Callable[[], object] = field(repr=False)
    anchor: str = ""


@dataclass(frozen=True)
class Row:
    """Measured figures for one variant (seconds are per call)."""

    name: str
    median_s: float
    min_s: float
    max_s: float
    ratio: float
    anchor: str
    samples: int


@dataclass(frozen=True)
class BenchResult:
    """The outcome of :meth:`Bench.run`: one :class:`Row` per variant.

    Args:
        name: Benchmark name; the JSON lands at ``benchmarks/results/<name>.json``.
        baseline: Name of the variant whose ratio is 1.0.
        rows: Rows in the order the variants were added.
        meta: Settings and machine facts recorded alongside the figures.
    """

    name: str
    baseline: str
    rows: tuple[Row, ...]
    meta: dict[str, object] = field(default_factory=dict)

    def row(self, name: str) -> Row:
        """Return the row called ``name``."""
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no variant named {name!r}; have {[r.name for r in self.rows]}")

    def to_markdown(self) -> str:
        """Render a markdown table: variant, median, ratio vs baseline, anchor."""
        lines = [
            f"### {self.name} (baseline: {self.baseline})",
            "",
            "| variant | median | ratio | anchor |",
            "| --- | ---: | ---: | --- |",
        ]
        for r in self.rows:
            median = fmt_time(r.median_s, digits=3)
            lines.append(f"| {r.name} | {median} | {r.ratio:.2f}x | {r.anchor} |")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, object]:
        """Plain-data form, as written to JSON."""
        return {
            "name": self.name,
            "baseline": self.baseline,
            "rows": [asdict(r) for r in self.rows],
            "meta": dict(self.meta),
        }

    def save(self, directory: str | os.PathLike[str] | None = None) -> Path:
        """Write ``<directory>/<name>.json`` atomically and return its path.

        Args:
            directory: Defaults to ``benchmarks/results/``.
        """
        out_dir = Path(directory) if directory is not None else RESULTS_DIR
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / f"{self.name}.json"
        fd, tmp = tempfile.mkstemp(prefix=f".{self.name}.", suffix=".tmp", dir=out_dir)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump(self.to_dict(), fh, indent=2)
                fh.write("\n")
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return target


class Bench:
    """Collects variants and times them interleaved.

    Args:
        name: Benchmark name (use the script's stem).
        baseline: Variant whose median the ratios divide by. Defaults to the
            first variant added.
        warmup: Untimed interleaved rounds before measuring.
        rounds: Timed interleaved rounds; each gives one sample per variant.
        number: Calls per sample; the sample is the mean over these calls.
        timer: Clock returning seconds.

    Example:
        >>> bench = Bench("demo", rounds=3, warmup=1)
        >>> bench.add("a", lambda: None)
        >>> bench.run().row("a").ratio
        1.0
    """

    def __init__(
        self,
        name: str,
        *,
        baseline: str | None = None,
        warmup: int = 3,
        rounds: int = 15,
        number: int = 1,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        if rounds < 1 or number < 1 or warmup < 0:
            raise ValueError(
                f"Bench({name!r}): need rounds >= 1, number >= 1, warmup >= 0; "
                f"got rounds={rounds}, number={number}, warmup={warmup}"
            )
        self.name = name
        self.baseline = baseline
        self.warmup = warmup
        self.rounds = rounds
        self.number = number
        self.timer = timer
        self.variants: list[Variant] = []

    def __repr__(self) -> str:
        names = [v.name for v in self.variants]
        return (
            f"Bench(name={self.name!r}, baseline={self.baseline!r}, warmup={self.warmup}, "
            f"rounds={self.rounds}, number={self.number}, variants={names})"
        )

    def add(self, name: str, fn: Callable[[], object], *, anchor: str = "") -> Bench:
        """Register a variant; returns ``self`` so calls can chain."""
        if any(v.name == name for v in self.variants):
            raise ValueError(f"Bench({self.name!r}): variant {name!r} added twice")
        self.variants.append(Variant(name, fn, anchor))
        return self

    def run(self) -> BenchResult:
        """Time every variant interleaved and return medians and ratios."""
        if not self.variants:
            raise ValueError(f"Bench({self.name!r}): add at least one variant before run()")
        baseline = self.baseline or self.variants[0].name
        if baseline not in {v.name for v in self.variants}:
            raise ValueError(
                f"Bench({self.name!r}): baseline {baseline!r} is not one of "
                f"{[v.name for v in self.variants]}"
            )
        times = interleaved(
            self.variants,
            lambda v, _i, _timed: self._sample(v.fn),
            warmup=self.warmup,
            rounds=self.rounds,
        )
        samples = {v.name: t for v, t in zip(self.variants, times, strict=True)}
        medians = {k: statistics.median(s) for k, s in samples.items()}
        base = medians[baseline]
        rows = tuple(
            Row(
                name=v.name,
                median_s=medians[v.name],
                min_s=min(samples[v.name]),
                max_s=max(samples[v.name]),
                ratio=medians[v.name] / base if base > 0 else float("nan"),
                anchor=v.anchor,
                samples=len(samples[v.name]),
            )
            for v in self.variants
        )
        meta = {
            "warmup": self.warmup,
            "rounds": self.rounds,
            "number": self.number,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        return BenchResult(name=self.name, baseline=baseline, rows=rows, meta=meta)

    def _sample(self, fn: Callable[[], object]) -> float:
        start = self.timer()
        for _ in range(self.number):
            fn()
        return (self.timer() - start) / self.number


def report(result: BenchResult, directory: str | os.PathLike[str] | None = None) -> Path:
    """Print ``result`` as markdown, save its JSON, print where it went."""
    print(result.to_markdown())
    path = result.save(directory)
    print(f"\nwrote {path}")
    return path
