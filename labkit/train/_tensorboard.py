"""TensorBoard side of a fit: hparams (the Recipe), histograms, gradient norms, sampled traces.

Scalars go through Lightning's ``TensorBoardLogger``: the LabModule writes the per-step
values to it on Lightning's logging steps and logs its epoch means with ``self.log``; this
module adds what Lightning does not write by itself. Every function takes the
``SummaryWriter`` (``trainer.logger.experiment``) and plain values.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import torch

TB_DIR = "tensorboard"


def hparams_of(recipe: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """Flat hparams for TensorBoard: ``recipe/<field>`` plus the scalar fit settings."""
    out: dict[str, Any] = {}
    for k, v in recipe.items():
        if isinstance(v, list | tuple):
            v = ",".join(map(str, v))
        elif v is None:
            v = "none"
        elif not isinstance(v, int | float | str | bool):  # TensorBoard takes only these
            v = str(v)
        out[f"recipe/{k}"] = v
    for k, v in config.items():
        if isinstance(v, int | float | str | bool) and k != "recipe":
            out[k] = v
    return out


def log_hparams(
    writer: Any, params: dict[str, Any], metrics: tuple[str, ...] = ("val_loss", "train_loss_epoch")
) -> None:
    """Write ``params`` to TensorBoard's HParams plugin, listing ``metrics`` (scalar tags)."""
    from torch.utils.tensorboard.summary import hparams

    exp, ssi, sei = hparams(params, dict.fromkeys(metrics, 0.0))
    fw = writer.file_writer
    for summary in (exp, ssi, sei):
        fw.add_summary(summary)


def log_histograms(
    writer: Any, module: torch.nn.Module, step: int, *, grads: bool
) -> dict[str, float]:
    """Write weight (and gradient) histograms; return per-module gradient norms."""
    norms: dict[str, float] = {}
    per_module: dict[str, float] = {}
    for name, p in module.named_parameters():
        writer.add_histogram(f"weights/{name}", p.detach().float().cpu(), step)
        if grads and p.grad is not None:
            g = p.grad.detach().float()
            writer.add_histogram(f"grads/{name}", g.cpu(), step)
            n = float(g.norm())
            norms[name] = n
            owner = name.rsplit(".", 1)[0] if "." in name else ""
            per_module[owner] = (per_module.get(owner, 0.0) ** 2 + n * n) ** 0.5
    for owner, n in per_module.items():
        writer.add_scalar(f"grad_norm/{owner or '<root>'}", n, step)
    return per_module


def log_trace(writer: Any, trace: Any, step: int, depth: int = 1) -> None:
    """Write a sampled trace's per-module forward/backward times (down to ``depth``)."""
    for row in trace.rows():
        if row["depth"] == 0 or row["depth"] > depth:
            continue
        writer.add_scalar(f"trace/fwd_ms/{row['path']}", row["fwd_time"] * 1e3, step)
        writer.add_scalar(f"trace/bwd_ms/{row['path']}", row["bwd_time"] * 1e3, step)
    writer.add_text("trace/summary", "```\n" + trace.summary(depth=depth) + "\n```", step)


class ScalarFile:
    """TensorBoard scalars written in this thread, a batch at a time (one file write each).

    ``SummaryWriter`` hands every value to a writer thread through a queue; each hand-off
    wakes that thread, which then competes with the training loop for the GIL (measured:
    about 3 ms a wake-up on a busy two-core machine). A watched loop writes its scalars
    here instead, at the recorder's flush: the same event file format (TFRecord of
    ``Event`` protos, read by TensorBoard itself), no thread. A record's CRCs are
    TensorBoard's pure Python CRC32C; the header's (the length alone) is kept per length,
    so each scalar costs one CRC, of its event.

    Args:
        folder: The TensorBoard folder (``<logdir>/tensorboard``); created.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        import socket
        import time

        from tensorboard.compat.proto import (  # type: ignore[import-untyped]  # untyped
            event_pb2,
            summary_pb2,
        )
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import (  # type: ignore[import-untyped]
            masked_crc32c,
        )

        self._event = event_pb2.Event
        self._summary = summary_pb2.Summary
        self._value = summary_pb2.Summary.Value
        self._crc = masked_crc32c
        self._heads: dict[int, bytes] = {}
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{time.time():.0f}.{socket.gethostname()}.{os.getpid()}.labkit"
        self.path = path / name
        self._fh = open(self.path, "wb")  # noqa: SIM115 (closed in close())
        version = self._event(wall_time=time.time(), file_version="brain.Event:2")
        self._fh.write(self._record(version.SerializeToString()))
        self._fh.flush()

    def _record(self, data: bytes) -> bytes:
        """One TFRecord: length, its masked CRC32C, the data, the data's masked CRC32C."""
        head = self._heads.get(len(data))
        if head is None:
            length = struct.pack("<Q", len(data))
            head = self._heads[len(data)] = length + struct.pack("<I", self._crc(length))
        return head + data + struct.pack("<I", self._crc(data))

    def add_scalars(self, rows: list[tuple[str, float, int, float]]) -> None:
        """Write ``(tag, value, step, wall_time)`` rows and flush the file once."""
        event, summary, value_of = self._event, self._summary, self._value
        self._fh.write(
            b"".join(
                self._record(
                    event(
                        wall_time=wall,
                        step=int(step),
                        summary=summary(value=[value_of(tag=tag, simple_value=float(value))]),
                    ).SerializeToString()
                )
                for tag, value, step, wall in rows
            )
        )
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __repr__(self) -> str:
        return f"ScalarFile(path={str(self.path)!r})"


def how_to_open(logdir: str | os.PathLike[str]) -> str:
    """A sentence saying where the logs are and the command that shows them."""
    tb = Path(logdir) / TB_DIR
    return (
        f"TensorBoard logs: {tb}\n"
        f"  in a terminal:  tensorboard --logdir {tb}\n"
        f"  in a notebook:  %load_ext tensorboard  then  %tensorboard --logdir {tb}"
    )
