"""Growth detector: run N steps, and when live memory grows step over step, say what grows.

Each storage remembers the step, module, op and user source line that created it.
After each step the live set is compared: storages created in a step that survive
the next ones (other than parameters, gradients and optimizer state, which are
replaced in place) are the growth, grouped by where they were created. Saved
activations that outlive their step mean an autograd graph is kept alive: the fix
names the line that made the graph's root (usually ``losses.append(loss)``).
"""

from __future__ import annotations

import gc
import itertools
import linecache
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from labkit._format import fmt_bytes
from labkit.memory.tracker import ACTS, CATEGORIES, GRADS, OPT, PARAMS, MemoryTracker
from labkit.trace.recorder import Recorder, check_model


@dataclass(frozen=True)
class GrowthSite:
    """Storages created at one place that survive step after step.

    Args:
        module: Module running when they were created (``""`` outside modules).
        op: The aten op that created them, e.g. ``"mm.default"``.
        category: Their category (``"activations"``, ``"temporaries"``, ...).
        file: User source file that ran the op (``""`` when unknown).
        line: Its line number.
        code: The source line.
        bytes: Bytes alive at the end, created in the steps examined.
        steps: In how many steps such storages were created and kept.

    Example:
        >>> site = labkit.find_growth(model, step).sites[0]   # doctest: +SKIP
        >>> print(site.where, site.code)                      # doctest: +SKIP
    """

    module: str
    op: str
    category: str
    file: str
    line: int
    code: str
    bytes: int
    steps: int

    @property
    def where(self) -> str:
        """``file:line`` (or ``"?"``)."""
        return f"{self.file}:{self.line}" if self.file else "?"


@dataclass(frozen=True)
class GrowthReport:
    """What :func:`find_growth` found.

    Args:
        live_after_step: Live bytes after each step.
        growing: Whether live memory grew after every step past the warm-up.
        bytes_per_step: Mean growth per step past the warm-up.
        sites: Where the growing storages were created, largest first.
        fix: What to change, in plain words (``""`` when nothing grows).

    Example:
        >>> rep = labkit.find_growth(model, step, steps=5)   # doctest: +SKIP
        >>> rep.growing, rep.fix                             # doctest: +SKIP
    """

    live_after_step: tuple[int, ...]
    growing: bool
    bytes_per_step: float
    sites: tuple[GrowthSite, ...]
    fix: str

    def __bool__(self) -> bool:
        return self.growing

    def __repr__(self) -> str:
        return (
            f"GrowthReport(growing={self.growing}, steps={len(self.live_after_step)}, "
            f"per_step={fmt_bytes(self.bytes_per_step)}, sites={len(self.sites)})"
        )

    def __str__(self) -> str:
        if not self.growing:
            return (
                f"no growth: live memory after each step "
                f"{', '.join(fmt_bytes(b) for b in self.live_after_step)}"
            )
        lines = [
            f"live memory grows {fmt_bytes(self.bytes_per_step)} per step "
            f"({' -> '.join(fmt_bytes(b) for b in self.live_after_step)})"
        ]
        for s in self.sites[:8]:
            mod = f"in '{s.module}'" if s.module else "outside modules"
            lines.append(
                f"  {fmt_bytes(s.bytes):>11} {s.category} made by {s.op} {mod} at "
                f"{s.where}: {s.code}"
            )
        lines.append(f"fix: {self.fix}")
        return "\n".join(lines)


def find_growth(
    model: torch.nn.Module,
    step: Callable[[], Any],
    *,
    steps: int = 5,
    warmup: int = 1,
    min_bytes: int = 1,
) -> GrowthReport:
    """Run ``step()`` ``steps`` times and report storages that pile up across steps.

    Args:
        model: The module the step trains (its calls name the modules).
        step: One training step, e.g. forward, backward, ``optimizer.step()``.
        steps: How many steps to run (at least ``warmup + 2``).
        warmup: First steps not judged (optimizer state is created there).
        min_bytes: Smallest growth per step reported.

    Returns:
        A :class:`GrowthReport`; falsy when nothing grows.

    Example:
        >>> import torch, labkit
        >>> import torch.nn.functional as F
        >>> model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 1))
        >>> x, y = torch.randn(16, 4), torch.randn(16, 1)
        >>> losses = []
        >>> def step():  # keeps every step's loss tensor alive
        ...     loss = F.mse_loss(model(x), y); loss.backward(); losses.append(loss)
        >>> rep = labkit.find_growth(model, step, steps=5)
        >>> rep.growing, rep.sites[0].op
        (True, 'mse_loss.default')
        >>> print(rep)                                     # doctest: +SKIP
    """
    check_model(model, "find_growth")
    if warmup < 0 or steps < warmup + 2:
        raise ValueError(
            f"need steps >= warmup + 2 and warmup >= 0, got steps={steps}, warmup={warmup}"
        )
    tracker = MemoryTracker(model, stacks=True)
    rec = Recorder(model, mode="timing", observers=[tracker])
    after: list[int] = []
    with rec:
        for _ in range(steps):
            step()
            if after and tracker.live_bytes() > after[-1]:
                gc.collect(1)  # young reference cycles are not a leak; the full collection is slow
            after.append(tracker.live_bytes())
            tracker.mark_step()
        survivors = [
            (r.nbytes, r.category, r.module, r.op, r.site, r.step)
            for r in tracker.live_records()
            if r.step >= warmup and r.category not in (PARAMS, GRADS, OPT)
        ]
    judged = after[warmup:]
    diffs = [b - a for a, b in itertools.pairwise(judged)]
    per_step = sum(diffs) / len(diffs) if diffs else 0.0
    growing = bool(diffs) and all(d > 0 for d in diffs) and per_step >= min_bytes
    sites = _group(survivors) if growing else ()
    sites = tuple(s for s in sites if s.steps >= 2) or sites
    return GrowthReport(tuple(after), growing, per_step, sites, _fix(sites) if growing else "")


def _group(survivors: list[tuple[Any, ...]]) -> tuple[GrowthSite, ...]:
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for n, cat, module, op, site, step in survivors:
        key = (module, op, cat, site)
        g = groups.setdefault(key, [0, set()])
        g[0] += n
        g[1].add(step)
    out = []
    for (module, op, cat, site), (n, steps) in groups.items():
        file, line = (site[0], site[1]) if site else ("", 0)
        code = linecache.getline(file, line).strip() if file else ""
        out.append(GrowthSite(module, op, CATEGORIES[cat], file, line, code, n, len(steps)))
    out.sort(key=lambda s: (-s.bytes, s.module, s.op))
    return tuple(out)


def _fix(sites: tuple[GrowthSite, ...]) -> str:
    graph_modules = {s.module for s in sites if s.category == CATEGORIES[ACTS]}
    if len(graph_modules) >= 2:  # saved tensors of several modules: a whole graph is kept
        roots = [s for s in sites if s.category != CATEGORIES[ACTS] and not s.module]
        root = roots[0] if roots else next(s for s in sites if s.category == CATEGORIES[ACTS])
        code = f" (`{root.code}`)" if root.code else ""
        return (
            "an autograd graph outlives each step: activations saved for backward are still "
            f"alive, held by a tensor that requires grad made at {root.where}{code} and kept "
            "past the step (e.g. losses.append(loss)). Keep loss.item() (a float) or "
            "loss.detach() instead, so the graph can be freed."
        )
    s = sites[0]
    code = f" (`{s.code}`)" if s.code else ""
    return (
        f"tensors made by {s.op} at {s.where}{code} survive every step: something keeps a "
        "reference (a list, a dict, an attribute). Drop it, or keep .item() / .detach().cpu() "
        "of what you need."
    )
