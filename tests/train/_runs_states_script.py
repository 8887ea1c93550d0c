"""Run by test_runs_states: a real ``Lab.fit`` whose steps wait 0.25 s each until a file
exists, so the test can read the run folder while the fit writes it (or kill it).

Usage: python -m tests.train._runs_states_script LOGDIR GO_FILE EPOCHS
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from labkit.train import Lab
from tests.train._helpers import LOSS, datasets, mlp

GO = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("go")


def slow_step(model, batch):  # type: ignore[no-untyped-def]
    if not GO.exists():
        time.sleep(0.25)  # longer than the events' flush interval: each step is written
    x, y = batch
    return model(x), y


def main(logdir: str, epochs: int) -> None:
    lab = Lab(mlp(), datasets(64), loss=LOSS, batch_size=8, step=slow_step, logdir=logdir)
    lab.fit(
        max_epochs=epochs,
        seed=0,
        dashboard=False,
        dry_run=False,
        trainer_kwargs={"enable_progress_bar": False},
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[3]))
