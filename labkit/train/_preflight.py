"""A Lab's logdir checked before training starts, so a bad path costs no epoch.

``Lab.fit`` calls :func:`check_logdir` first thing: the logdir exists (or is created) and
is writable, every file and folder labkit keeps there has the right kind (a file named
``checkpoints`` or a folder named ``last.ckpt`` is named, not found an epoch later), and
the filesystem has room for the first checkpoint (the model's weights and buffers plus
the optimizer's state: two tensors per parameter for the Adam family, one for SGD with
momentum, RMSprop and the like, none for plain SGD).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from labkit._paths import OutputPathError, check_folder, check_free_space
from labkit.train._events import EVENTS_FILE, STOP_FILE
from labkit.train._tensorboard import TB_DIR
from labkit.train.checkpoint import CHECKPOINTS, LAST

FOLDERS = (CHECKPOINTS, TB_DIR, "traces")
FILES = (f"{CHECKPOINTS}/{LAST}", "run.json", EVENTS_FILE, STOP_FILE)


def check_logdir(
    logdir: str | os.PathLike[str],
    model: torch.nn.Module | None = None,
    *,
    optimizer: object = None,
    optimizer_kwargs: Mapping[str, Any] | None = None,
) -> Path:
    """Check (and create) a fit's logdir before any work; see the module docstring.

    Args:
        logdir: The run directory.
        model: The model, to size the first checkpoint (skipped when None).
        optimizer: The Lab's optimizer (a name or a class; ``None``: unknown, one state).
        optimizer_kwargs: Its arguments (``momentum`` decides SGD's state).

    Returns:
        The logdir as a ``Path``.

    Raises:
        OutputPathError: naming the path: not writable, or a file where a folder belongs
            (or the reverse).
        labkit._paths.DiskFullError: less free space than the first checkpoint needs.
    """
    logdir = check_folder(logdir, what="logdir")
    for name in FOLDERS:
        path = logdir / name
        if path.exists() and not path.is_dir():
            raise OutputPathError(
                f"the logdir {logdir} holds a file {name!r} where labkit keeps its {name} "
                f"folder; move {path} away or choose another logdir",
                path,
            )
        if path.is_dir():
            check_folder(path, what=f"{name} folder of the logdir", create=False)
    for name in FILES:
        path = logdir / name
        if path.is_dir():
            raise OutputPathError(
                f"the logdir {logdir} holds a folder {name!r} where labkit writes a file; "
                f"move {path} away or choose another logdir",
                path,
            )
        if os.path.lexists(path) and not path.is_file():  # a FIFO would hang the fit
            raise OutputPathError(
                f"the logdir {logdir} holds {_kind(path)} {name!r} where labkit reads and "
                f"writes a regular file; remove {path} or choose another logdir",
                path,
            )
    if model is not None:
        states = optimizer_states(optimizer, optimizer_kwargs or {})
        check_free_space(
            logdir / CHECKPOINTS / LAST,
            first_checkpoint_bytes(model, states),
            what="first checkpoint",
        )
    return logdir


def _kind(path: Path) -> str:
    try:
        mode = path.stat().st_mode
    except OSError:
        return "a broken link"
    for test, word in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    ):
        if test(mode):
            return word
    return "a non-regular file"


def optimizer_states(optimizer: object, kwargs: Mapping[str, Any]) -> int:
    """Tensors the optimizer keeps per parameter: 2 (Adam family), 0 (plain SGD), else 1."""
    name = (optimizer if isinstance(optimizer, str) else getattr(optimizer, "__name__", "")).lower()
    if "adam" in name:
        return 2
    if name == "sgd":
        return 1 if kwargs.get("momentum") else 0
    return 1


def first_checkpoint_bytes(model: torch.nn.Module, states: int = 2) -> int:
    """Weights and buffers, plus ``states`` optimizer tensors per trainable parameter."""
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    buffers = sum(b.numel() * b.element_size() for b in model.buffers())
    trainable = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    return params + buffers + states * trainable
