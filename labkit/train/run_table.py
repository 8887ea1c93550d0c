"""Runs side by side: :func:`runs` reads many fits' records into plain data.

Every ``Lab.fit`` leaves ``run.json`` (the :class:`~labkit.train.Run` record) and, beside
it, ``series.bin``: the same record without its steps, plus the steps as columns (one
float64 array per figure: ``step``, ``t``, ``loss``, ``compute_time``, ...). :func:`runs`
reads the columns (never the JSON steps), so 200 runs of 100k steps load in about a second
(``benchmarks/runs_read.py``). Long curves are cut to ``points`` points by keeping each
bucket's minimum and maximum in their order (:func:`minmax_downsample`): a spike survives.

:class:`Runs` is plain data: one :class:`RunRow` per run (status, steps, wall time, last
and best metrics, the Recipe, the fit options, labkit/torch/lightning versions) and each
run's curves. ``summary()`` prints a table, ``to_pandas()`` gives a DataFrame,
``show()`` the interactive view (:class:`labkit.views.runs.RunsView`).

A folder is a run as soon as its fit takes the logdir lock or writes an event, not only
once it ends: each row's ``state`` is ``running`` (the lock's holder is alive; figures so
far from ``events.jsonl``), ``crashed`` (the holder is gone, or events or a checkpoint are
there without a final record: the last step, epoch and time named in ``state_note``) or
how the record says it ended (``finished``, ``stopped``, ``failed``); see
:mod:`labkit.train._run_state`. Reading never blocks or fails on a folder being written.

Example:
    >>> rs = labkit.runs("labkit_runs")           # doctest: +SKIP
    >>> print(rs.summary())                       # doctest: +SKIP
    >>> rs.show(metrics=["loss", "val_acc"])      # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import mmap
import operator
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from labkit._paths import InputFileError, atomic_writer, open_input
from labkit.train._lock import LOCK_FILE
from labkit.train._run_state import has_run_files, observe

if TYPE_CHECKING:
    import pandas as pd

    from labkit.train.run import Run

SERIES_FILE = "series.bin"
RUN_FILE = "run.json"
MAX_SERIES_BYTES = 1 << 30
"""Largest ``series.bin`` read (1 GiB: about 16M steps of 8 figures)."""
_MAGIC = b"LKSERIES"
_X_KEYS = ("step", "epoch", "t")


Columns = dict[str, np.ndarray]


class RunsError(ValueError):
    """Runs cannot be read; the message names the path."""


# ---------------------------------------------------------------------- writing
def write_series(run: Run, folder: str | os.PathLike[str]) -> Path:
    """Write ``<folder>/series.bin``: ``run``'s record without steps plus its steps as columns.

    A figure missing from a step is NaN in its column; a figure that is not a number (or
    a bool) in any step is left out (it is still in ``run.json``).

    Args:
        run: A :class:`~labkit.train.Run`.
        folder: The run's folder.

    Returns:
        The file written.
    """
    meta = run.to_dict()
    steps: list[dict[str, Any]] = meta.pop("steps")
    keys: dict[str, None] = {}
    for s in steps:
        keys.update(dict.fromkeys(s))
    columns = {}
    for k in keys:
        values = [s.get(k, math.nan) for s in steps]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            columns[k] = np.asarray(values, dtype=np.float64)
    return write_columns(meta, columns, folder, n_steps=len(steps))


def write_columns(
    meta: dict[str, Any], columns: Columns, folder: str | os.PathLike[str], *, n_steps: int
) -> Path:
    """Write ``<folder>/series.bin`` from a record without steps and its step columns.

    The layout (little-endian): the 8 bytes ``LKSERIES``, a uint64 header length, the
    header (UTF-8 JSON: ``{"meta": ..., "n_steps": N, "columns": {name: offset}}``), then
    each column as ``N`` float64 at its offset (8-byte aligned). A reader maps the file and
    views each column in place: nothing is parsed per step.

    Args:
        meta: ``Run.to_dict()`` without ``steps``.
        columns: ``{figure: array}``, one value per step.
        folder: The run's folder.
        n_steps: Steps in the run.

    Returns:
        The file written.
    """
    target = Path(folder) / SERIES_FILE
    arrays = {k: np.ascontiguousarray(v, dtype="<f8") for k, v in columns.items()}
    for k, v in arrays.items():
        if v.shape != (n_steps,):
            raise ValueError(f"column {k!r} has shape {v.shape}, not ({n_steps},)")
    names = list(arrays)

    def header(start: int) -> bytes:
        offsets = {k: start + i * 8 * n_steps for i, k in enumerate(names)}  # 8-byte aligned
        return json.dumps({"meta": meta, "n_steps": n_steps, "columns": offsets}).encode()

    # room for the offsets' digits (at most 20 each), then padded with spaces to 8 bytes
    start = -(-(16 + len(header(0)) + 20 * len(names)) // 8) * 8
    head = header(start).ljust(start - 16)
    with atomic_writer(
        target, "wb", what="run series", needed=start + 8 * n_steps * len(names), fsync=False
    ) as fh:
        fh.write(_MAGIC + len(head).to_bytes(8, "little") + head)
        for k in names:
            fh.write(arrays[k].tobytes())
    return target


# ---------------------------------------------------------------------- reading
def read_series(
    folder: str | os.PathLike[str], columns: Sequence[str] | None = None
) -> tuple[dict[str, Any], Columns]:
    """A run's record (without steps, plus ``n_steps``) and its step columns.

    Reads ``series.bin`` when present (the columns are read-only views of the mapped
    file), else ``run.json``.

    Args:
        folder: The run's folder.
        columns: Step figures to read (default: all).

    Returns:
        ``(meta, {figure: float64 array})``.

    Raises:
        RunsError: naming the file when it is missing, not a regular file, too large or
            not a run's series.
    """
    folder = Path(folder)
    series = folder / SERIES_FILE
    if os.path.lexists(series):
        return _read_bin(series, columns)
    from labkit.train.run import Run, RunFileError

    try:
        run = Run.load(folder / RUN_FILE)
    except RunFileError as exc:
        raise RunsError(str(exc)) from None
    meta = run.to_dict()
    steps = meta.pop("steps")
    meta["n_steps"] = len(steps)
    keys = dict.fromkeys(k for s in steps for k in s)
    want = list(keys) if columns is None else [c for c in columns if c in keys]
    cols = {}
    for k in want:
        values = [s.get(k, math.nan) for s in steps]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            cols[k] = np.asarray(values, dtype=np.float64)
    return meta, cols


def _read_bin(path: Path, columns: Sequence[str] | None) -> tuple[dict[str, Any], Columns]:
    def bad(why: str) -> RunsError:
        return RunsError(
            f"{path}: not a labkit run series ({why}); delete it to read run.json instead"
        )

    try:
        with open_input(path, what="run series", max_bytes=MAX_SERIES_BYTES) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 16:
                raise bad(f"{size} bytes")
            mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except InputFileError as exc:
        raise RunsError(str(exc)) from None
    if mm[:8] != _MAGIC:
        raise bad("it does not start with LKSERIES")
    n_head = int.from_bytes(mm[8:16], "little")
    if n_head > size - 16:
        raise bad(f"a header of {n_head} bytes in a file of {size}")
    try:
        head = json.loads(mm[16 : 16 + n_head])
        meta, n, offsets = head["meta"], int(head["n_steps"]), dict(head["columns"])
    except (ValueError, KeyError, TypeError) as exc:
        raise bad(f"header: {type(exc).__name__}: {exc}") from None
    if not isinstance(meta, dict):
        raise bad("its record is not a JSON object")
    meta["n_steps"] = n
    want = list(offsets) if columns is None else [c for c in columns if c in offsets]
    cols: Columns = {}
    for name in want:
        at = offsets[name]
        if not isinstance(at, int) or at % 8 or at < 16 + n_head or at + 8 * n > size:
            raise bad(f"column {name!r} at {at!r} lies outside the file")
        cols[name] = np.frombuffer(mm, dtype="<f8", count=n, offset=at)
    return meta, cols


def minmax_downsample(x: np.ndarray, y: np.ndarray, points: int) -> tuple[np.ndarray, np.ndarray]:
    """About ``points`` points of ``(x, y)`` (at most ``points + 2``): each bucket's min and max.

    ``points // 2`` buckets of equal length; from each, the smallest and the largest finite
    ``y`` (one point when they are the same), so spikes and dips survive. NaN and Inf
    are skipped; the first and last finite points are kept.

    Args:
        x: Positions (steps or seconds), ascending.
        y: Values.
        points: Most points returned (at least 4).

    Returns:
        ``(x, y)`` of the points kept.

    Example:
        >>> x = np.arange(10.0); y = np.array([0, 0, 9, 0, 0, 0, -5, 0, 0, 0.0])
        >>> xs, ys = minmax_downsample(x, y, 4)  # 2 buckets of 5: each one's min and max
        >>> xs.tolist(), ys.tolist()
        ([0.0, 2.0, 5.0, 6.0, 9.0], [0.0, 9.0, 0.0, -5.0, 0.0])
    """
    finite = np.isfinite(y)
    if not finite.all():
        x, y = x[finite], y[finite]
    n = len(y)
    points = max(4, int(points))
    if n <= points:
        return x, y
    idx = minmax_indices(y, points)
    return x[idx], y[idx]


def minmax_indices(y: np.ndarray, points: int) -> np.ndarray:
    """Ascending positions of each bucket's minimum and maximum of ``y`` (all finite), plus
    the first and last; ``points // 2`` buckets. See :func:`minmax_downsample`."""
    n = len(y)
    if n <= max(4, points):
        return np.arange(n)
    buckets = max(2, points // 2)
    size = -(-n // buckets)
    full = n // size  # whole buckets, viewed in place; the rest is one shorter bucket
    grid = y[: full * size].reshape(full, size)
    base = np.arange(full) * size
    lo, hi = base + grid.argmin(axis=1), base + grid.argmax(axis=1)
    pairs = [np.stack([np.minimum(lo, hi), np.maximum(lo, hi)], axis=1).ravel()]
    if full * size < n:
        tail = full * size + np.array([y[full * size :].argmin(), y[full * size :].argmax()])
        pairs.append(np.sort(tail))
    idx = np.concatenate([[0], *pairs, [n - 1]])  # ascending: buckets are in order
    return idx[np.concatenate([[True], np.diff(idx) != 0])]


# ---------------------------------------------------------------------- the data
@dataclass(frozen=True)
class RunRow:
    """One run in :class:`Runs`.

    Args:
        name: The run's folder, relative to the root it was found under.
        path: The run's folder.
        status: The same word as ``state`` (the name earlier labkit versions read).
        steps: Optimizer steps recorded.
        epochs: Epochs recorded.
        wall_time: Seconds from the first to the last recorded moment (None: unknown).
        last: The last value of each metric (``loss``, ``val_loss``, ``val_acc``, ...).
        best: The best value of each metric (lowest for ``*loss*``/``*err*``, else highest).
        recipe: The Recipe it trained with (as a dict).
        options: Its fit options and settings (``max_epochs``, ``lr``, ``seed``, ...).
        versions: labkit, torch and lightning versions (empty for older runs).
        started: Wall-clock start (seconds since the epoch), or None.
        error: The error of a failed run.
        source: What trained it: ``lab`` (``Lab.fit``), ``loop`` (``labkit.watch``),
            ``lightning`` or ``transformers`` (``labkit.watch.lightning()/.transformers()``).
        state: What the run is now: ``running`` (its fit holds the lock), ``crashed`` (its
            fit is gone without ending the run), ``finished``, ``stopped`` or ``failed``.
        state_note: The state in a sentence (the lock's holder; the last step, epoch and
            time); empty for a run that ended with its record.
        last_step: The last optimizer step recorded (None: none, or not read).
        last_epoch: Its epoch.
        last_time: Wall-clock time of the run's last event (None: not read).
    """

    name: str
    path: str
    status: str
    steps: int
    epochs: int
    wall_time: float | None
    last: dict[str, float] = field(default_factory=dict)
    best: dict[str, float] = field(default_factory=dict)
    recipe: dict[str, Any] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    started: float | None = None
    error: str | None = None
    source: str = "lab"
    state: str = "finished"
    state_note: str = ""
    last_step: int | None = None
    last_epoch: int | None = None
    last_time: float | None = None


#: a curve: ``x`` (step), ``t`` (seconds since the run started) and ``y``, equal lengths
Curve = dict[str, list[Any]]


def _lower_is_better(metric: str) -> bool:
    return any(w in metric for w in ("loss", "err", "time", "perplexity", "ppl"))


@dataclass(frozen=True)
class Runs:
    """Several runs' records and curves, as plain data (see the module docstring).

    Args:
        rows: One :class:`RunRow` per run, in the order found (sorted by name).
        curves: ``{run name: {metric: {"x": steps, "t": seconds, "y": values}}}``, each
            cut to at most ``points`` points by :func:`minmax_downsample`.
        points: The most points per curve.
        skipped: ``"path: why"`` for folders that could not be read.

    Example:
        >>> rs = Runs(rows=(), curves={})
        >>> len(rs), rs.metrics
        (0, [])
    """

    rows: tuple[RunRow, ...]
    curves: dict[str, dict[str, Curve]]
    points: int = 2000
    skipped: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[RunRow]:
        return iter(self.rows)

    def __getitem__(self, name: str | int) -> RunRow:
        if isinstance(name, int):
            return self.rows[name]
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no run named {name!r}; runs: {[r.name for r in self.rows]}")

    @property
    def metrics(self) -> list[str]:
        """Every metric with a curve in some run (``loss`` first, then by name)."""
        names = {m for c in self.curves.values() for m in c}
        return sorted(names, key=lambda m: (m != "loss", m))

    def summary(self) -> str:
        """One line per run: state, steps, wall time, last loss, best validation figures;
        then a line for each run still running or crashed (last step, epoch and time)."""
        from labkit._format import fmt_time

        vals = sorted({m for r in self.rows for m in r.best if m.startswith("val_")})[:3]
        head = [
            "run",
            "source",
            "status",
            "steps",
            "wall",
            "loss",
            *[f"best {m}" for m in vals],
            "lr",
            "recipe",
        ]
        lines = [head]
        for r in self.rows:
            recipe = ", ".join(f"{k}={v}" for k, v in _recipe_changes(r.recipe).items()) or "fp32"
            lines.append(
                [
                    r.name,
                    r.source,
                    r.state,
                    str(r.steps),
                    fmt_time(r.wall_time) if r.wall_time is not None else "-",
                    _num(r.last.get("loss")),
                    *[_num(r.best.get(m)) for m in vals],
                    _lr(r.options.get("lr")),
                    recipe,
                ]
            )
        widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
        text = [
            "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
            for row in lines
        ]
        text.insert(1, "  ".join("-" * w for w in widths))
        text += [f"{r.name}: {r.state_note}" for r in self.rows if r.state_note]
        skipped = f"; {len(self.skipped)} skipped: " + "; ".join(self.skipped)
        text.append(f"{len(self.rows)} run(s)" + (skipped if self.skipped else ""))
        return "\n".join(text)

    def to_pandas(self) -> pd.DataFrame:
        """A DataFrame: one row per run; ``last_*``, ``best_*``, options, ``recipe.*``, versions."""
        import pandas as pd

        records = []
        for r in self.rows:
            rec: dict[str, Any] = {
                k: getattr(r, k)
                for k in (
                    "name",
                    "source",
                    "state",
                    "status",
                    "steps",
                    "epochs",
                    "wall_time",
                    "started",
                    "error",
                    "last_step",
                    "last_epoch",
                    "last_time",
                    "state_note",
                    "path",
                )
            }
            rec.update({f"last_{k}": v for k, v in r.last.items()})
            rec.update({f"best_{k}": v for k, v in r.best.items()})
            rec.update({k: _cell(v) for k, v in r.options.items()})
            rec.update({f"recipe.{k}": _cell(v) for k, v in r.recipe.items()})
            rec.update({f"{k}_version": v for k, v in r.versions.items()})
            records.append(rec)
        return pd.DataFrame.from_records(records)

    def show(
        self,
        metrics: Sequence[str] | None = None,
        runs: Sequence[str] | None = None,
        *,
        x: str = "step",
    ) -> Any:
        """The interactive view: chosen metrics of chosen runs overlaid, a table of runs.

        Args:
            metrics: Metrics to chart (default: ``loss`` and the validation metrics).
            runs: Run names shown (default: all).
            x: ``"step"`` or ``"time"`` (wall-clock seconds since each run started).

        Returns:
            A :class:`labkit.views.runs.RunsView`.
        """
        from labkit import _display  # the views register it (labkit/views/display.py)

        return _display.display("runs.show", self, metrics=metrics, runs=runs, x=x)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready plain data."""
        return {
            "rows": [dataclasses.asdict(r) for r in self.rows],
            "curves": self.curves,
            "points": self.points,
            "skipped": list(self.skipped),
        }

    def __repr__(self) -> str:
        status: dict[str, int] = {}
        for r in self.rows:
            status[r.state] = status.get(r.state, 0) + 1
        counts = ", ".join(f"{v} {k}" for k, v in sorted(status.items()))
        return f"Runs({len(self.rows)} runs: {counts or 'none'}; metrics={self.metrics})"


def _num(v: object) -> str:
    return "-" if v is None else f"{v:.4g}"


def _lr(v: object) -> str:
    """The lr the optimizer had: one number, or one per param group."""
    if isinstance(v, list):
        return ",".join(_num(x) for x in v)
    return _num(v) if isinstance(v, int | float) else "-"


def _cell(v: object) -> object:
    return json.dumps(v) if isinstance(v, list | dict) else v


def _recipe_changes(recipe: dict[str, Any]) -> dict[str, Any]:
    try:
        from labkit.optimize.recipe import Recipe

        return Recipe.from_dict(dict(recipe)).changes()
    except Exception:  # a Recipe from another labkit: show it as it is
        return dict(recipe)


# ---------------------------------------------------------------------- finding runs
def _is_run(folder: Path) -> bool:
    """A final record, or a fit's events, lock or checkpoint (a run running or crashed)."""
    return (
        (folder / SERIES_FILE).is_file() or (folder / RUN_FILE).is_file() or has_run_files(folder)
    )


def find_runs(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], max_depth: int = 4
) -> list[tuple[str, Path]]:
    """``(name, folder)`` of every run under ``source`` (a run folder, a root of run folders,
    a ``run.json`` or a list of those), sorted by name; names are relative to each root."""
    sources = [source] if isinstance(source, str | os.PathLike) else list(source)
    found: dict[Path, str] = {}
    for s in sources:
        p = Path(s)
        if p.is_file() and p.name in (RUN_FILE, SERIES_FILE):
            p = p.parent
        if not p.is_dir():
            raise RunsError(f"{p}: no such run folder or logdir root")
        if _is_run(p):
            found.setdefault(p.resolve(), p.name or str(p))
            continue
        for root, dirs, _files in os.walk(p):
            here = Path(root)
            depth = len(here.relative_to(p).parts)
            if depth >= max_depth:
                dirs[:] = []
            dirs[:] = sorted(
                d
                for d in dirs
                if not d.startswith(".")
                and d not in ("checkpoints", "tensorboard", "traces", "launch")
            )
            if here != p and _is_run(here):
                found.setdefault(here.resolve(), str(here.relative_to(p)))
                dirs[:] = []
    return sorted(((n, f) for f, n in found.items()), key=lambda nf: nf[0])


def runs(
    source: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    *,
    metrics: Sequence[str] | None = None,
    points: int = 2000,
) -> Runs:
    """Read every run under ``source`` into :class:`Runs` (plain data).

    Args:
        source: A logdir root (its run folders are found, 4 levels deep at most), one run's
            folder or ``run.json``, or a list of those.
        metrics: Metrics to read curves of (default: every one: the step ``loss`` and the
            epoch metrics such as ``val_loss``, ``val_acc``, ``train_loss``).
        points: Most points per curve (min/max per bucket keeps spikes).

    Returns:
        :class:`Runs`. Folders that cannot be read are listed in ``skipped`` with the reason.

    Raises:
        RunsError: ``source`` does not exist.

    Example:
        >>> labkit.runs("labkit_runs").summary()   # doctest: +SKIP
    """
    rows, curves, skipped = [], {}, []
    want = None if metrics is None else list(dict.fromkeys(metrics))
    for name, folder in find_runs(source):
        try:
            row, c = _read_one(name, folder, want, points)
        except RunsError as exc:
            skipped.append(str(exc))
            continue
        rows.append(row)
        curves[name] = c
    return Runs(rows=tuple(rows), curves=curves, points=points, skipped=tuple(skipped))


def earlier_runs(
    logdir: str | os.PathLike[str], *, most: int = 5, points: int = 400
) -> dict[str, dict[str, Curve]]:
    """Curves of the runs beside ``logdir`` (same root), for the live dashboard to overlay.

    The ``most`` latest finished or stopped runs under ``logdir``'s parent, other than
    ``logdir`` itself; their step ``loss`` is named ``train_loss`` (the dashboard's name)
    and their ``val_*`` curves keep their names. Unreadable runs are left out.

    Args:
        logdir: The running fit's logdir.
        most: Most earlier runs returned.
        points: Most points per curve.

    Returns:
        ``{run name: {curve: {"x", "t", "y"}}}``, latest first.
    """
    here = Path(logdir).resolve()
    root = here.parent
    try:
        found = [(n, f) for n, f in find_runs(root, max_depth=2) if f.resolve() != here]
    except (RunsError, OSError):
        return {}
    rows = []
    for name, folder in found:
        try:
            row, curves = _read_one(name, folder, None, points)
        except RunsError:
            continue
        if row.state in ("finished", "stopped"):
            rows.append((row.started or 0.0, name, curves))
    rows.sort(key=lambda r: -r[0])
    out: dict[str, dict[str, Curve]] = {}
    for _, name, curves in rows[:most]:
        picked = {
            ("train_loss" if k == "loss" else k): c
            for k, c in curves.items()
            if k == "loss" or k.startswith("val_")
        }
        if picked:
            out[name] = picked
    return out


def _read_one(
    name: str, folder: Path, want: list[str] | None, points: int
) -> tuple[RunRow, dict[str, Curve]]:
    step_cols = None if want is None else [*_X_KEYS, *(m for m in want if m not in _X_KEYS)]
    final = (folder / SERIES_FILE).is_file() or (folder / RUN_FILE).is_file()
    meta: dict[str, Any] | None = None
    cols: Columns = {}
    error: RunsError | None = None
    if final:
        try:
            meta, cols = read_series(folder, step_cols)
        except RunsError as exc:  # a record being replaced or corrupt: the events may say more
            error = exc
    if error is not None and not os.path.lexists(folder / LOCK_FILE):
        raise error  # a corrupt record of a fit that is over: skipped with the reason
    seen = observe(folder, meta)
    if seen.record is not None:
        meta, cols = _events_columns(seen.record, step_cols)
    elif meta is None:
        raise error or RunsError(f"{folder}: no run record")
    started = meta.get("started")
    t = cols.get("t")
    t0 = (
        started
        if isinstance(started, int | float)
        else (float(t[0]) if t is not None and len(t) else None)
    )
    out: dict[str, Curve] = {}
    last: dict[str, float] = {}
    best: dict[str, float] = {}
    steps_x = cols.get("step")
    for metric, y in cols.items():
        figure = metric in _X_KEYS or metric in ("compute_time", "data_time", "samples")
        if figure and (want is None or metric not in want):
            continue
        if steps_x is None or not len(y):
            continue
        finite = np.isfinite(y)
        if finite.all():
            pos = minmax_indices(y, points)
        else:
            keep = np.flatnonzero(finite)
            pos = keep[minmax_indices(y[keep], points)]
        _extremes(metric, y if len(pos) == 0 or finite.all() else y[finite], last, best)
        ys, xs = y[pos], steps_x[pos]
        ts = (t[pos] - t0) if t is not None and t0 is not None else np.full(len(pos), np.nan)
        out[metric] = {"x": xs.tolist(), "t": _finite_or_none(ts), "y": ys.tolist()}
    epochs = meta.get("epochs") or []
    keys = dict.fromkeys(k for e in epochs if isinstance(e, dict) for k in e)
    for metric in keys:
        if metric in ("epoch", "step", "t") or (want is not None and metric not in want):
            continue
        pts = [e for e in epochs if _number(e.get(metric)) and _number(e.get("step"))]
        if not pts:
            continue
        ey = np.asarray([e[metric] for e in pts], dtype=np.float64)
        _extremes(metric, ey, last, best)
        ets = [
            float(e["t"]) - t0 if isinstance(e.get("t"), int | float) and t0 is not None else None
            for e in pts
        ]
        out.setdefault(
            metric, {"x": [float(e["step"]) for e in pts], "t": ets, "y": [float(v) for v in ey]}
        )
    config = dict(meta.get("config") or {})
    recipe = config.pop("recipe", None) or {}
    versions = config.pop("versions", None) or {}
    ended = meta.get("ended")
    t_last = float(t[-1]) if t is not None and len(t) else None
    end = ended if isinstance(ended, int | float) else t_last
    wall = end - t0 if end is not None and t0 is not None else None
    row = RunRow(
        name=name,
        path=str(folder),
        status=str(meta.get("status", "created")),
        steps=int(meta.get("n_steps", 0)),
        epochs=len(epochs),
        wall_time=wall,
        last=last,
        best=best,
        recipe=dict(recipe),
        options=config,
        versions={str(k): str(v) for k, v in dict(versions).items()},
        started=float(t0) if t0 is not None else None,
        error=meta.get("error"),
        source=str(config.get("source", "lab")),
        state=seen.state,
        state_note=seen.note,
        last_step=seen.last_step if seen.record is not None else _last_int(cols, "step"),
        last_epoch=seen.last_epoch if seen.record is not None else _last_int(cols, "epoch"),
        last_time=seen.last_time if seen.record is not None else _last_float(meta, cols),
    )
    return row, out


def _events_columns(
    record: dict[str, Any], want: list[str] | None
) -> tuple[dict[str, Any], Columns]:
    """``read_series``'s ``(meta, columns)`` of a record rebuilt from a run's events."""
    meta = dict(record)
    steps: list[dict[str, Any]] = meta.pop("steps")
    meta["n_steps"] = len(steps)
    keys = dict.fromkeys(itertools.chain.from_iterable(steps))  # every step's keys, in order
    cols: Columns = {}
    for k in keys if want is None else [c for c in want if c in keys]:
        values = list(map(operator.methodcaller("get", k, math.nan), steps))
        if set(map(type, values)) <= {int, float}:  # numbers only (no bool, None, text)
            cols[k] = np.asarray(values, dtype=np.float64)
    return meta, cols


def _last_int(cols: Columns, key: str) -> int | None:
    c = cols.get(key)
    return int(c[-1]) if c is not None and len(c) and np.isfinite(c[-1]) else None


def _last_float(meta: dict[str, Any], cols: Columns) -> float | None:
    ended = meta.get("ended")
    if isinstance(ended, int | float) and not isinstance(ended, bool):
        return float(ended)
    t = cols.get("t")
    return float(t[-1]) if t is not None and len(t) else None


def _number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _finite_or_none(a: np.ndarray) -> list[float | None]:
    if np.isfinite(a).all():
        return list(a.tolist())
    return [float(v) if math.isfinite(v) else None for v in a.tolist()]


def _extremes(metric: str, y: np.ndarray, last: dict[str, float], best: dict[str, float]) -> None:
    finite = y if np.isfinite(y).all() else y[np.isfinite(y)]
    if not len(finite):
        return
    last[metric] = float(finite[-1])
    best[metric] = float(finite.min() if _lower_is_better(metric) else finite.max())
