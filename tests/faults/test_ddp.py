"""Fault table, DDP: when one rank hangs, the error names the rank that did not arrive at the
collective (not the rank that waited for it and timed out)."""

from __future__ import annotations

import os
import time

import pytest
from torch import nn

from labkit.train import DDPWorkerError, Lab
from tests.train._helpers import LOSS, datasets, mlp


class HangOnRank1(nn.Module):
    """Rank 1 stops in its third training forward (sleeps far past the timeout)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()
        self.calls = 0

    def forward(self, x):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.training and self.calls == 3 and os.environ.get("LOCAL_RANK") == "1":
            time.sleep(120)  # the launcher ends it once rank 0 fails
        return self.net(x)


def test_rank_that_hangs_is_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    lab = Lab(HangOnRank1(), datasets(512), loss=LOSS, batch_size=8, logdir=tmp_path)
    with pytest.raises(DDPWorkerError) as info:
        lab.fit(
            max_epochs=1,
            devices=2,
            accelerator="cpu",
            dashboard=False,
            dry_run=False,
            ddp_timeout=3,
            trainer_kwargs={"enable_progress_bar": False},
        )
    message = str(info.value)
    assert info.value.rank == 1, message
    assert message.startswith(
        "DDP rank 1 did not arrive: rank 0 waited in a collective at step 2, in backward until "
        "ddp_timeout, while rank 1 was still at step 2, in forward"
    ), message
    assert "Timed out" in message  # rank 0's own report is kept
    assert lab.last_run.status == "failed"
