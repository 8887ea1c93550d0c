"""What ``labkit.compare`` measured on this machine, brought into ``labkit.advise``.

:data:`labkit.optimize.compare.MEASURED` keeps, per recipe, the speed-up and graph
breaks of the last comparison in this process. A suggestion whose recipe was measured
slower says so (and why, on CPU); a compile suggestion names the graph break in the
module with most forward time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from labkit.optimize import _cpu

if TYPE_CHECKING:
    from labkit.optimize.advise import Suggestion
    from labkit.trace import Trace


def annotate(found: list[Suggestion], device: str) -> list[Suggestion]:
    """Say so when compare measured a suggested recipe slower on this machine."""
    from labkit.optimize.compare import MEASURED

    out = []
    for s in found:
        got = MEASURED.get(s.recipe().to_json())
        if got is not None and got[2].split(":")[0] == device.split(":")[0] and got[0] < 1:
            speed, mode, _, _ = got
            why = _cpu.why_slower(s.recipe(), speed) if device.startswith("cpu") else ""
            s = replace(
                s,
                title=f"{s.title} (measured slower here: {speed:.2f}x)",
                detail=f"{s.detail} labkit.compare ({mode}) on this machine: {why or speed}.",
                share=s.share * speed,
            )
        out.append(s)
    return out


def name_costliest_break(found: list[Suggestion], trace: Trace) -> list[Suggestion]:
    """Compile suggestions name the graph break (measured by compare) in the costliest module."""
    from labkit.optimize.compare import MEASURED

    times = {r["path"]: r["fwd_time"] or 0.0 for r in trace.rows()}
    total = trace.meta.forward_time or 0.0
    out = []
    for s in found:
        got = MEASURED.get(s.recipe().to_json()) if "compile" in s.change else None
        found_breaks = got[3] if got else ()
        breaks = [b for b in found_breaks if b.get("module") is not None]
        if breaks:
            worst = max(breaks, key=lambda b: times.get(b["module"], 0.0))
            share = times.get(worst["module"], 0.0) / total if total > 0 else 0.0
            where = worst["module"] or "(model)"
            n = sum(b["count"] for b in found_breaks)
            s = replace(
                s,
                title=f"{s.title}; {n} graph breaks, the costliest in {where}",
                detail=(
                    f"{s.detail} labkit.compare found {n} graph breaks; the one in the module "
                    f"with most forward time ({where}, {share:.0%}): {worst['reason']} at "
                    f"{worst['source']}. Remove it so one graph covers the module."
                ),
                where=(worst["module"], *[w for w in s.where if w != worst["module"]]),
            )
        out.append(s)
    return out
