"""Run by test_sigkill: fit (resuming when a checkpoint exists) a model with a 8 MB buffer.

The buffer makes each checkpoint write take a while, and the rename waits half a second
after the temporary file is complete, so the test can see (and kill inside) every write
even on a loaded machine.
Usage: python -m tests.train._sigkill_script LOGDIR EPOCHS
"""

from __future__ import annotations

import os
import sys
import time

import torch

from labkit.train import Lab
from tests.train._helpers import LOSS, datasets, mlp

_replace = os.replace


def _slow_replace(src: str, dst: str) -> None:
    if str(src).endswith(".tmp"):
        time.sleep(0.5)  # the window in which a kill leaves a complete temp file behind
    _replace(src, dst)


def main(logdir: str, epochs: int) -> None:
    os.replace = _slow_replace  # this process only: labkit's checkpoint writer renames .tmp
    model = mlp(dropout=0.1)
    model.register_buffer("ballast", torch.zeros(2_000_000))  # 8 MB per checkpoint
    lab = Lab(model, datasets(96), loss=LOSS, batch_size=8, logdir=logdir)
    lab.fit(
        max_epochs=epochs,
        seed=5,
        resume=True,
        dashboard=False,
        dry_run=False,
        trainer_kwargs={"enable_progress_bar": False},
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
