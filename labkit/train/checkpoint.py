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
import pickle
import re
import struct
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from labkit._paths import InputFileError, atomic_writer, check_folder, open_input

if TYPE_CHECKING:
    from torch.serialization import MAP_LOCATION

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


def checkpoint_bytes(obj: object) -> int:
    """About the bytes ``torch.save(obj)`` writes: each tensor storage once, plus 64 KiB."""
    seen: dict[tuple[str, int], int] = {}
    stack: list[object] = [obj]
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


MAX_CHECKPOINT_BYTES = 64 << 30
"""Largest checkpoint :func:`load_checkpoint` opens unless told otherwise (``max_bytes=``)."""


def load_checkpoint(
    path: str | os.PathLike[str],
    map_location: MAP_LOCATION = "cpu",
    *,
    max_bytes: int = MAX_CHECKPOINT_BYTES,
) -> dict[str, Any]:
    """Load a checkpoint with ``weights_only=True`` (a file cannot run code when loaded).

    The file must be a regular file (a FIFO or device is refused unopened) of at most
    ``max_bytes``, holding a dict of tensors and plain data.

    Args:
        path: The checkpoint file.
        map_location: Where tensors go (``torch.load``'s argument).
        max_bytes: Largest file opened.

    Returns:
        The checkpoint dict.

    Raises:
        CheckpointError: naming the file when it is missing, not a regular file, too
            large, corrupt or holding objects other than tensors and plain data.
    """
    p = Path(path)
    hint = "; pass max_bytes= to load_checkpoint to read a larger one"
    try:
        fh = open_input(p, what="checkpoint", max_bytes=max_bytes, limit_hint=hint)
    except InputFileError as exc:
        raise CheckpointError(str(exc)) from None
    why = None
    try:
        with fh, warnings.catch_warnings():
            # a corrupt file's first bytes read as a pickle protocol torch warns about
            warnings.filterwarnings("ignore", message="Detected pickle protocol")
            data = torch.load(fh, map_location=map_location, weights_only=True)
    except Exception as exc:
        why = _why(exc)
    if why is not None:
        # raised outside the except block, so torch's error (its advice to retry with
        # weights_only=False would run whatever code a hostile file holds) is not chained
        raise CheckpointError(f"the checkpoint {p} cannot be loaded: {why}")
    if not isinstance(data, dict):
        raise CheckpointError(
            f"the checkpoint {p} holds a {type(data).__name__}, not the dict "
            "of a Lightning checkpoint"
        )
    return data


_NOT_A_CHECKPOINT = (
    "it is not a file torch.save wrote (corrupt, truncated, or another kind of file); "
    "use a checkpoint labkit or Lightning saved, or delete it to start fresh"
)


# what torch's weights-only unpickler raises on bytes that are no pickle: about 7% of
# random 4 KiB files end in an IndexError or KeyError from its stack and memo
_UNREADABLE = (
    EOFError,
    pickle.UnpicklingError,
    UnicodeDecodeError,
    IndexError,
    KeyError,
    struct.error,
    OverflowError,
)


def _why(exc: Exception) -> str:
    """Why torch.load failed, in one sentence, without torch's unsafe-load advice."""
    text = str(exc)
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", text)
    if found:
        return (
            f"it holds a Python object of type {found.group(1)}, and labkit loads only "
            "tensors and plain data (weights_only=True) so that opening a file never "
            "runs code; save the checkpoint with tensors, numbers, strings, lists and "
            "dicts only"
        )
    if "Weights only load failed" in text or "zip archive" in text or "magic number" in text:
        return _NOT_A_CHECKPOINT
    if isinstance(exc, _UNREADABLE):
        return _NOT_A_CHECKPOINT
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first[:300]}"


def recipe_of(checkpoint: dict[str, Any]) -> dict[str, Any] | None:
    """The Recipe (as a dict) stored in a labkit checkpoint, or None."""
    return (checkpoint.get("labkit") or {}).get("recipe")


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning ``CheckpointIO`` that saves with :func:`save_checkpoint` and loads weights only.

    Example:
        >>> Trainer(plugins=[AtomicCheckpointIO()])  # doctest: +SKIP
    """

    def save_checkpoint(
        self,
        checkpoint: dict[str, Any],
        path: str | os.PathLike[str],
        storage_options: object = None,
    ) -> None:
        if storage_options is not None:
            raise TypeError("AtomicCheckpointIO takes no storage_options")
        save_checkpoint(checkpoint, path)

    def load_checkpoint(
        self,
        path: str | os.PathLike[str],
        map_location: MAP_LOCATION = None,
        weights_only: bool | None = None,
    ) -> dict[str, Any]:
        return load_checkpoint(path, map_location=map_location or "cpu")

    def __repr__(self) -> str:
        return "AtomicCheckpointIO(atomic=True, weights_only=True)"
