"""``labkit.memory(model, batch, loss=..., optimizer=...)``: the memory of one training step."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from labkit._format import fmt_bytes
from labkit._progress import ProgressOption
from labkit.memory.attribution import MemoryReport
from labkit.memory.errors import MemoryRecordError
from labkit.memory.timeline import MAX_SAMPLES
from labkit.memory.tracker import CATEGORIES, MemoryTracker
from labkit.trace.entry import StepOptions as _D
from labkit.trace.entry import front_door
from labkit.trace.errors import LossError, TraceError
from labkit.trace.recorder import Recorder
from labkit.trace.step import Step, record_step


def memory(
    model: torch.nn.Module,
    batch: object = None,
    *,
    loss: Callable[[Any], torch.Tensor] | None = _D.loss,
    optimizer: torch.optim.Optimizer | None = _D.optimizer,
    scaler: torch.amp.GradScaler | None = _D.scaler,
    backward: bool = _D.backward,
    max_samples: int = MAX_SAMPLES,
    cuda_history: str | os.PathLike[str] | None = None,
    keep_output: bool = _D.keep_output,
    keep_step: bool = _D.keep_step,
    model_kwargs: dict[str, Any] | None = None,
    progress: ProgressOption = _D.progress,
    **inputs: object,
) -> MemoryReport:
    """Record where every byte of one training step goes: forward, backward, optimizer step.

    Runs a real step, as the usual loop does (``out = model(x); loss(out).backward();
    optimizer.step()``: the output stays alive until the step ends). Tensor storages are
    counted as they are created and freed, each once however many views share it, and
    sorted into parameters, gradients, optimizer state, activations saved for backward,
    inputs and temporaries. On CUDA the caching allocator's figures (allocated vs
    reserved, fragmentation, retries, peak) come too. Afterwards the model (parameters,
    ``.grad``, buffers, flags), the inputs, the optimizer (state and param groups), the
    scaler and the RNG are as before the call, on error too, unless ``keep_step=True``;
    a module-level global the step changed (which labkit does not put back) is named in
    the notes. A model or batch on the ``meta`` device is refused: :func:`labkit.plan`
    predicts the same figures for it.

    Args:
        model: The module to record.
        batch: The model's input: a tensor (``model(batch)``), a tuple or list
            (``model(*batch)``) or a dict (``model(**batch)``). Its tensors count as
            inputs.
        loss: ``loss(output) -> scalar tensor``; without it, the sum of the
            floating-point outputs' means (``labkit.trace.step.default_loss``).
        optimizer: Run ``optimizer.step()`` after backward; its state counts as optimizer
            state from the moment it is allocated.
        scaler: A ``torch.amp.GradScaler``: the loss is scaled, the step goes through
            ``scaler.step`` and ``scaler.update``; its state counts as optimizer state.
        backward: Run the backward pass.
        max_samples: Keep at most about this many timeline samples (peaks kept).
        cuda_history: On CUDA, also record the caching allocator's own event history
            (with Python stacks) and write the snapshot to this path; drop the file on
            https://pytorch.org/memory_viz. Costs more than the recording itself.
        keep_output: Keep the model's output alive through backward and the optimizer step
            (``False``: a loop that frees it before backward). The notes say which.
        keep_step: Keep the step's effects: the optimizer's update, the new ``.grad``,
            optimizer state, buffers and RNG as after one training step.
        model_kwargs: Keyword inputs of ``model`` given apart (when one is named like an
            option here, e.g. ``backward``).
        progress: Show progress (a bar in a notebook; on a terminal one line on stderr
            after 2 s: ``labkit.memory: recording the forward (1,024 module calls) [20%]``);
            ``False``: nothing; a function ``(share, message)`` receives it instead.
        **inputs: Keyword inputs of ``model``, as :func:`labkit.trace` takes them
            (``labkit.memory(model, ids, attention_mask=m)``); with them ``batch`` may
            be left out.

    Returns:
        A :class:`MemoryReport` holding the :class:`~labkit.trace.Trace`.

    Raises:
        MemoryRecordError: The step failed (out of memory included); the error names
            the running module and carries the partial report.

    Example:
        >>> rep = labkit.memory(model, x, loss=lambda out: F.cross_entropy(out, y),
        ...                     optimizer=opt)             # doctest: +SKIP
        >>> print(rep.summary())                           # doctest: +SKIP
    """
    if scaler is not None and optimizer is None:
        raise ValueError("scaler= needs optimizer=: a GradScaler steps an optimizer")
    if max_samples < 2:
        raise ValueError(f"max_samples must be at least 2, got {max_samples}")
    given = {
        "loss": loss,
        "optimizer": optimizer,
        "scaler": scaler,
        "backward": backward,
        "keep_output": keep_output,
        "keep_step": keep_step,
        "progress": progress,
    }
    door = front_door(
        "labkit.memory", model, given, batch=batch, kwargs=inputs, model_kwargs=model_kwargs
    )
    model, args, kwargs = door.model, door.args, door.kwargs
    if cuda_history is not None and not any(p.is_cuda for p in model.parameters()):
        raise ValueError(
            "cuda_history records the CUDA caching allocator's history, but the parameters of "
            f"{type(model).__name__} are not on a CUDA device: drop cuda_history or move the "
            "model with model.cuda()"
        )
    tracker = MemoryTracker(
        model,
        optimizers=(optimizer,) if optimizer is not None else (),
        inputs=(args, kwargs),
        cuda_history=cuda_history,
        scalers=(scaler,) if scaler is not None else (),
        max_samples=max_samples,
    )
    step = Step(
        model,
        args,
        kwargs,
        loss=loss,
        optimizer=optimizer,
        scaler=scaler,
        backward=backward,
        keep_output=keep_output,
    )

    def failed(err: BaseException, rec: Recorder) -> None:
        if isinstance(err, LossError) or rec.trace is None:
            return  # the loss returned no scalar: the caller's to fix, not a step that failed
        report = MemoryReport(rec.trace)
        msg = _failure_message(err, report, tracker.failed_where)
        raise MemoryRecordError(msg, report, tracker.failed_module) from (
            err.__cause__ if isinstance(err, TraceError) and err.__cause__ is not None else err
        )

    # the same recording as labkit.trace's full mode: the graph, its dataflow and FLOPs too
    with door.progress as bar:
        bar(0.0, "recording the step")
        trace = record_step(
            step,
            mode="full",
            memory=tracker,
            keep_step=keep_step,
            on_error=failed,
            progress=None if bar.quiet else bar,
        )
    return MemoryReport(door.finish(trace))


def _failure_message(err: BaseException, report: MemoryReport, where: str = "") -> str:
    m = report.meta
    last = report.samples[-1].bytes if report.samples else {}
    live = sum(last.values())
    cats = ", ".join(f"{c} {fmt_bytes(last[c])}" for c in CATEGORIES if last.get(c))
    top = ", ".join(f"'{r['module']}' {fmt_bytes(r['bytes'])}" for r in report.by_module(3))
    msg = str(err) if isinstance(err, TraceError) else f"{type(err).__name__}: {err}"
    if where and not isinstance(err, TraceError):  # a TraceError names the module already
        msg = f"failed in {where}: {msg}"
    hint = ""
    if isinstance(err, torch.OutOfMemoryError) or isinstance(err.__cause__, torch.OutOfMemoryError):
        hint = (
            "; out of memory: shrink the batch, or see report.whatif() for activation "
            "checkpointing and bf16 estimates"
        )
    return (
        f"{msg}\nmemory when it failed: {fmt_bytes(live)} live ({cats or 'nothing'}); peak so far "
        f"{fmt_bytes(m.peak_bytes)} in {m.peak_phase} ({m.peak_where or 'at start'}); largest "
        f"holders {top or 'none'}{hint}. "
        "The partial timeline is in error.report."
    )
