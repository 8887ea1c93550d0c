"""The independent reference for plans: torch's MemTracker over the real step."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def memtracker_peak(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    args: tuple[torch.Tensor, ...],
    loss: Callable[[Any], torch.Tensor],
    kwargs: dict[str, Any] | None = None,
) -> int:
    """Peak bytes of the loop as users write it (``out = model(x); loss(out).backward();
    opt.step()``, the output alive through backward) under
    ``torch.distributed._tools.mem_tracker.MemTracker``, the batch cloned inside it so it
    counts the inputs as labkit does. The model's ``.grad`` are set to None after."""
    from torch.distributed._tools.mem_tracker import MemTracker

    ref = MemTracker()
    ref.track_external(model, opt)
    with ref:
        batch = tuple(a.clone() for a in args)
        named = {  # a flag among the keywords (CLIP's return_loss=True) as it is
            k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in (kwargs or {}).items()
        }
        out = model(*batch, **named)
        loss(out).backward()
        opt.step()
        del out
    peak = ref.get_tracker_snapshot("peak")
    model.zero_grad(set_to_none=True)
    return sum(v.get("Total", 0) for v in peak.values() if isinstance(v, dict))
