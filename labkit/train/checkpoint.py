"""Checkpoints that survive a kill: written to a temporary file, fsynced, then renamed.

A process killed mid-save leaves the previous checkpoint intact (``os.replace`` is atomic
on one filesystem) and, at worst, a stray ``.<name>.*.tmp`` file that the next save
removes. Free space is checked before writing (the tensors' bytes), and a disk that fills
up anyway is reported as :class:`labkit._paths.DiskFullError` naming the file, the bytes
needed and free, with the previous checkpoint intact. Files get the umask's mode.
Checkpoints load with ``torch.load(..., weights_only=True)``: they hold tensors
and plain data only; the Recipe is stored as a plain dict under ``checkpoint["labkit"]``.

Example:
    >>> save_checkpoint({"w": torch.ones(2)}, "ckpt/last.ckpt")      # doctest: +SKIP
    >>> load_checkpoint("ckpt/last.ckpt")["w"]                        # doctest: +SKIP
    tensor([1., 1.])
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from labkit._paths import atomic_writer, check_folder

CHECKPOINTS = "checkpoints"  # the folder under a run's logdir
LAST = "last.ckpt"  # the checkpoint Lab writes after every epoch, and resumes from


class CheckpointError(RuntimeError):
    """A checkpoint could not be read; the message names the file."""


def save_checkpoint(obj: dict[str, Any], path: str | os.PathLike[str]) -> Path:
    """Write ``obj`` with ``torch.save`` to a temporary file in the same folder, then rename.

    Args:
        obj: Tensors and plain data (what ``weights_only=True`` can load back).
        path: Target file.

    Returns:
        The path written.
    """
    target = Path(path)
    check_folder(target.parent, what="checkpoint folder")
    for stale in target.parent.glob(f".{target.name}.*.tmp"):
        stale.unlink(missing_ok=True)  # left by a process killed mid-save
    with atomic_writer(target, "wb", what="checkpoint", needed=checkpoint_bytes(obj)) as fh:
        torch.save(obj, fh)
    return target


def checkpoint_bytes(obj: Any) -> int:
    """About the bytes ``torch.save(obj)`` writes: each tensor storage once, plus 64 KiB."""
    seen: dict[tuple[str, int], int] = {}
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            storage = x.untyped_storage()
            seen[(str(x.device), storage.data_ptr())] = storage.nbytes()
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list | tuple):
            stack.extend(x)
    return sum(seen.values()) + (64 << 10)


def load_checkpoint(path: str | os.PathLike[str], map_location: Any = "cpu") -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True``.

    Raises:
        CheckpointError: naming the file when it is missing or cannot be read.
    """
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"no checkpoint at {p}")
    try:
        return torch.load(p, map_location=map_location, weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            f"checkpoint {p} could not be loaded with weights_only=True: "
            f"{type(exc).__name__}: {exc}"
        ) from exc


def recipe_of(checkpoint: dict[str, Any]) -> dict[str, Any] | None:
    """The Recipe (as a dict) stored in a labkit checkpoint, or None."""
    return (checkpoint.get("labkit") or {}).get("recipe")


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning ``CheckpointIO`` that saves with :func:`save_checkpoint` and loads weights only.

    Example:
        >>> Trainer(plugins=[AtomicCheckpointIO()])  # doctest: +SKIP
    """

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: Any, storage_options: Any | None = None
    ) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO takes no storage_options")
        save_checkpoint(checkpoint, path)

    def load_checkpoint(
        self, path: Any, map_location: Any = None, weights_only: bool | None = None
    ) -> dict[str, Any]:
        return load_checkpoint(path, map_location=map_location or "cpu")

    def __repr__(self) -> str:
        return "AtomicCheckpointIO(atomic=True, weights_only=True)"
