"""Which modules to checkpoint: memory freed per second of recompute, chosen greedily.

Checkpointing a module drops the activations it saves for backward (the plan's per-module
saved bytes, its subtree) except its input, which the checkpoint keeps, and costs one
more forward of it in backward (the timing trace's forward time of its calls). The
candidates are the modules that contain others and are called (blocks, layers); nested
candidates never both enter the set.

The choice is **greedy by bytes freed per recompute second**, taking modules until the
estimated saving covers what the step is over budget, and then **verified by planning
it** (the caller re-plans and adds the next module while it is still over). Why greedy
and not an integer program: the set is the fractional-knapsack relaxation's order, which
is optimal up to the last module taken; the estimate it would optimise is itself
approximate (a peak may move to another phase, one block's activations are rebuilt at a
time), so an exact program over an estimate buys less than verifying each step with an
exact plan does; and the blocks of a model number tens, so a few plans settle it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from labkit.trace.model import Trace


@dataclass(frozen=True)
class Block:
    """A module checkpointing could recompute.

    Args:
        path: Module path.
        freed: Bytes its checkpoint would free (saved for backward in its subtree, less the
            input the checkpoint keeps).
        seconds: Its forward time per step (the recompute's cost).
    """

    path: str
    freed: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.freed / max(self.seconds, 1e-9)


def ranked(plan_trace: Trace, saved: dict[str, int], times: dict[str, float]) -> list[Block]:
    """Candidate modules, most bytes freed per recompute second first (``freed > 0`` only).

    Args:
        plan_trace: The plan's trace (its modules and calls' input bytes).
        saved: The plan's activation bytes saved for backward per module.
        times: Forward seconds per module path (its calls summed), from a timing trace.
    """
    parents = {m.path.rsplit(".", 1)[0] if "." in m.path else "" for m in plan_trace.modules}
    out: list[Block] = []
    for m in plan_trace.modules:
        if not m.path or m.path not in parents:
            continue
        calls = plan_trace.calls_of(m.path)
        if not calls:
            continue
        inner = _subtree(saved, m.path)
        kept = sum(t.nbytes for c in calls for t in c.inputs)
        freed = inner - kept
        if freed > 0:
            out.append(Block(m.path, freed, times.get(m.path, 0.0)))
    out.sort(key=lambda b: (-b.per_second, b.path))
    return out


def choose(blocks: list[Block], excess: int, start: int = 0) -> list[str]:
    """The greedy set: modules in ``blocks``' order until the estimated saving covers
    ``excess`` bytes, having taken more than ``start`` steps. A module inside one taken is
    skipped; a module around ones taken replaces them when it frees more than they do (a
    block whose MLP was taken first: the block adds its norms' saved activations).

    The estimate is the sum of what each frees less the largest, since backward rebuilds
    one checkpointed module's activations at a time.
    """
    taken: list[Block] = []
    steps = 0
    for b in blocks:
        inside = [t for t in taken if t.path.startswith(b.path + ".")]
        if any(b.path == t.path or b.path.startswith(t.path + ".") for t in taken):
            continue  # b lies inside a module taken: already recomputed
        if inside:  # b holds modules taken: it replaces them if it frees more
            if b.freed <= sum(t.freed for t in inside):
                continue
            taken = [t for t in taken if t not in inside]
        taken.append(b)
        est = sum(t.freed for t in taken) - max(t.freed for t in taken) if len(taken) > 1 else 0
        steps += 1
        if steps > start and est >= excess:
            break
    return [t.path for t in taken]


def repeated_blocks(model: torch.nn.Module) -> tuple[str, ...]:
    """A glob over the model's repeated stack (``'transformer.h.*'``): the ModuleList or
    Sequential whose children share a class and hold the most parameters; ``()`` if none."""
    best: tuple[int, tuple[str, ...]] = (0, ())
    for path, mod in model.named_modules():
        if not isinstance(mod, (torch.nn.ModuleList, torch.nn.Sequential)):
            continue
        kids = list(mod.named_children())
        if len(kids) < 2 or len({type(k) for _, k in kids}) != 1:
            continue
        if not any(kids[0][1].children()):
            continue
        size = sum(p.numel() for _, k in kids for p in k.parameters())
        if size >= best[0]:
            # the root's own children have no parent path to glob under: name them
            best = (size, (f"{path}.*",) if path else tuple(n for n, _ in kids))
    return best[1]


def _subtree(saved: dict[str, int], path: str) -> int:
    prefix = path + "."
    return sum(n for m, n in saved.items() if m == path or m.startswith(prefix))
