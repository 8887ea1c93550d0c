"""The batch dimension of a batch: its size, and the batch cut or repeated to another size."""

from __future__ import annotations

from typing import Any

import torch


def resize(batch: Any, n: int, size: int | None = None) -> Any:
    """``batch`` with every tensor whose first dimension is the batch size cut or repeated to
    ``n`` rows (values repeat cyclically; meta tensors and shapes just change shape)."""
    size = size if size is not None else batch_size(batch)
    if size is None:
        raise ValueError("the batch has no tensor to take a batch size from")
    if isinstance(batch, torch.Size):
        return torch.Size((n, *batch[1:])) if batch and batch[0] == size else batch
    if isinstance(batch, torch.Tensor):
        if batch.dim() == 0 or batch.shape[0] != size:
            return batch
        if batch.device.type == "meta":
            return torch.empty((n, *batch.shape[1:]), dtype=batch.dtype, device="meta")
        return batch[torch.arange(n, device=batch.device) % size].requires_grad_(
            batch.requires_grad
        )
    if isinstance(batch, dict):
        return {k: resize(v, n, size) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(resize(v, n, size) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(resize(v, n, size) for v in batch)
    return batch


def batch_size(batch: object) -> int | None:
    """The first dimension of the batch's first tensor (or shape)."""
    if isinstance(batch, torch.Size):
        return batch[0] if batch else None
    if isinstance(batch, torch.Tensor):
        return batch.shape[0] if batch.dim() else None
    values = batch.values() if isinstance(batch, dict) else batch
    if isinstance(values, (list, tuple, type({}.values()))):
        for v in values:
            b = batch_size(v)
            if b is not None:
                return b
    return None
