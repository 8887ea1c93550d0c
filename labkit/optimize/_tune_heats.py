"""Which set-ups :func:`labkit.tune` times together, so that their copies fit the device.

Every Recipe timed runs on its own copy of the model, and the copies stay alive through the
rounds: weights, gradients and optimizer state each (a planned step's end bytes). On CPU
the budget is the step's, not the machine's, so one heat holds every set-up. On CUDA the
copies share the budget: set-ups are packed, Recipe by Recipe, into heats whose copies
together and the largest step's rise above them fit it; the leader of each heat is timed
again in the next (a tournament), so the pick is the leader of the last heat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def heats(
    recipes: Sequence[Any], held: Sequence[int], peaks: Sequence[int], cap: int, *, shared: bool
) -> list[list[int]]:
    """Candidate indices grouped into heats.

    Args:
        recipes: Each candidate's Recipe (candidates of one Recipe share a copy).
        held: Each candidate's bytes held between steps (its planned end bytes).
        peaks: Each candidate's planned peak.
        cap: The budget.
        shared: Whether the copies share the budget (CUDA): False gives one heat.

    Returns:
        Lists of candidate indices; a heat after the first has room for the previous
        heat's leader (the largest copy of any Recipe is kept free for it).
    """
    everyone = list(range(len(recipes)))
    if not shared or not everyone:
        return [everyone]
    by_recipe: dict[Any, list[int]] = {}
    for k, r in enumerate(recipes):
        by_recipe.setdefault(r, []).append(k)
    copy = {r: max(held[k] for k in ks) for r, ks in by_recipe.items()}
    rise = {r: max(peaks[k] - held[k] for k in ks) for r, ks in by_recipe.items()}
    room_for_leader = max(copy.values())
    out: list[list[int]] = []
    cur: list[Any] = []
    for r in by_recipe:
        trial = [*cur, r]
        reserve = room_for_leader if out else 0
        need = reserve + sum(copy[x] for x in trial) + max(rise[x] for x in trial)
        if cur and need > cap:
            out.append([k for x in cur for k in by_recipe[x]])
            cur = [r]
        else:
            cur = trial
    if cur:
        out.append([k for x in cur for k in by_recipe[x]])
    return out
