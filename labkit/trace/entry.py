"""The front door of ``labkit.trace``, ``labkit.memory`` and ``labkit.plan``, written once.

Each of the three starts the same way: the module to record (a ``torch.compile``'d model's
inner module, with a note), its keyword options checked against the forward's arguments,
the inputs gathered (``model_kwargs`` merged, a batch split) and checked (no one-shot
iterator; nothing on ``meta`` for a real run; inputs on the parameters' device), and a
:class:`~labkit._progress.Progress` for the call. :func:`front_door` does it; the options'
defaults are the fields of :class:`StepOptions`, which the three signatures read, so a
default is written once.

Example:
    >>> import torch
    >>> door = front_door("labkit.trace", torch.nn.Linear(2, 2), {"backward": True},
    ...                   args=(torch.randn(3, 2),))
    >>> door.model, len(door.args), door.notes
    (Linear(in_features=2, out_features=2, bias=True), 1, ())
    >>> StepOptions.keep_output
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from labkit._options import changes_repr
from labkit._progress import Progress, ProgressOption, progress
from labkit._tensors import call_inputs, named_tensors
from labkit.trace._graph_inputs import cut_graphs, cut_note
from labkit.trace._graph_observer import bind as _bind
from labkit.trace._raw import parameters_of
from labkit.trace.model import Trace
from labkit.trace.step import add_notes, check_inputs, check_keywords, model_to_record

__all__ = [
    "FrontDoor",
    "StepOptions",
    "check_devices",
    "check_not_meta",
    "cut_graphs",
    "cut_note",
    "front_door",
]

_AFTER_REAL = "the model, inputs, optimizer and RNG are as they were before the call"
_AFTER_FAKE = "the model was not touched (the step ran on a fake copy)"
_NO_BATCH: Any = object()  # front_door(batch=...) not given: the inputs are args/kwargs


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True, repr=False)
class StepOptions:
    """The keyword options of ``labkit.trace``, ``labkit.memory`` and ``labkit.plan``, each
    with its one default (each call takes some of them; ``StepOptions.mode`` is
    ``trace``'s default ``mode=``).

    Args:
        loss: See each field's help.

    Example:
        >>> StepOptions(repeat=3)
        StepOptions(repeat=3)
    """

    loss: Callable[[Any], torch.Tensor] | None = field(
        default=None,
        metadata=_help("``loss(output) -> scalar``; without it, the sum of the outputs' means."),
    )
    optimizer: Any = field(default=None, metadata=_help("Stepped after backward."))
    scaler: Any = field(default=None, metadata=_help("A ``torch.amp.GradScaler``."))
    recipe: Any = field(default=None, metadata=_help("A Recipe applied to the planned copy."))
    device: str | torch.device | None = field(
        default=None, metadata=_help("The device to plan for.")
    )
    backward: bool = field(default=True, metadata=_help("Run the backward pass."))
    mode: str = field(default="full", metadata=_help('``"full"`` or ``"timing"``.'))
    warmup: int = field(default=1, metadata=_help("Timing passes run first and not kept."))
    repeat: int = field(default=5, metadata=_help("Timing passes kept."))
    time_budget: float | None = field(
        default=10.0, metadata=_help("Seconds of timing after which repeating stops.")
    )
    op_times: bool | None = field(
        default=None,
        metadata=_help(
            "Time op nodes (an op-timed pass per repeat): ``None`` up to 20,000 module "
            "calls, ``True`` always, ``False`` never."
        ),
    )
    keep_step: bool = field(default=False, metadata=_help("Keep one step's effects."))
    keep_output: bool = field(
        default=True, metadata=_help("Keep the output alive through backward.")
    )
    progress: ProgressOption = field(
        default=True,
        metadata=_help(
            "Show progress (a bar in a notebook, a line on stderr after 2 s); ``False``: none."
        ),
    )

    def __repr__(self) -> str:
        return changes_repr(self)


@dataclass
class FrontDoor:
    """What :func:`front_door` hands the call: the module to record, the inputs checked,
    the notes its trace gets and the call's progress.

    Args:
        what: The entry point (``"labkit.memory"``).
        model: The module to record (inside a ``torch.compile``'d one).
        notes: Notes for the trace (:meth:`finish` adds them).
        args: Positional inputs.
        kwargs: Keyword inputs (``model_kwargs`` merged in).
        progress: The call's progress (a context manager and a ``(share, message)``
            callback).
    """

    what: str
    model: torch.nn.Module
    notes: tuple[str, ...]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    progress: Progress

    def __repr__(self) -> str:
        return (
            f"FrontDoor({self.what}, model={type(self.model).__name__}, args={len(self.args)}, "
            f"kwargs={sorted(self.kwargs)})"
        )

    @property
    def has_inputs(self) -> bool:
        """Inputs were given (``labkit.trace(model)`` without any returns a Recorder)."""
        return bool(self.args or self.kwargs)

    def finish(self, trace: Trace) -> Trace:
        """``trace`` with the notes of the front door (a compiled model's)."""
        return add_notes(trace, *self.notes)


def front_door(
    what: str,
    model: torch.nn.Module,
    given: Mapping[str, object],
    *,
    args: tuple[Any, ...] = (),
    kwargs: Mapping[str, Any] | None = None,
    batch: Any = _NO_BATCH,
    model_kwargs: dict[str, Any] | None = None,
    real: bool = True,
) -> FrontDoor:
    """Start ``what``: unwrap and check the model, check the options ``given`` against the
    forward's arguments, gather and check the inputs, and make the call's progress.

    Args:
        what: ``"labkit.trace"``, ``"labkit.memory"`` or ``"labkit.plan"``.
        model: The model as the user gave it.
        given: ``{option: value}`` of the :class:`StepOptions` the call takes.
        args: Positional inputs (``labkit.trace``'s ``*args``).
        kwargs: Keyword inputs.
        batch: A batch to split into ``(args, kwargs)`` (``labkit.memory``/``plan``; it must
            then hold the inputs, or ``kwargs`` must).
        model_kwargs: The model's keywords given apart (with them every option is labkit's).
        real: The call measures a real run: a model or input on ``meta`` is refused and the
            inputs must be on the parameters' device.

    Raises:
        TypeError: An option given a value is also an argument of the model's forward, an
            input is a one-shot iterator, or no input is given where one is needed.
        ValueError: Something on ``meta`` for a real run, or an input on another device.
    """
    model, notes = model_to_record(model, what)
    defaults = {f.name: f.default for f in dataclasses.fields(StepOptions)}
    check_keywords(what, model, {k: (v, defaults[k]) for k, v in given.items()}, model_kwargs)
    inputs = {**(kwargs or {}), **(model_kwargs or {})}
    if batch is not _NO_BATCH:
        args, inputs = call_inputs(batch, inputs, where=what)
    after = _AFTER_REAL if real else _AFTER_FAKE
    bar = progress(what, given.get("progress", StepOptions.progress), after=after)
    args, inputs, cut = cut_graphs(tuple(args), inputs)  # backward stops at the inputs
    if cut:
        notes = (*notes, cut_note(cut))
    door = FrontDoor(what, model, notes, tuple(args), inputs, bar)
    if door.has_inputs:
        check_inputs(what, door.args, door.kwargs)
        if real:
            check_not_meta(what, model, door.args, door.kwargs)
            check_devices(model, door.args, door.kwargs)
    return door


# how labkit.plan is called for what each entry point was given (the meta error shows it)
_PLAN_CALL = {
    "labkit.trace": "labkit.plan(model, x) (memory, FLOPs and the graph of the step; no times)",
    "labkit.memory": "labkit.plan(model, batch, loss=..., optimizer=...) (the same memory "
    "categories, predicted on fake tensors)",
    "compare": "labkit.plan(model, batch, recipe=Recipe(...)) (what a recipe does to memory "
    "and FLOPs, one recipe a call; no times)",
}


def check_not_meta(
    what: str, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Raise a ValueError when the model's parameters or buffers, or an input, are on the
    ``meta`` device: they hold no values, so nothing can be measured (a meta tensor's ops
    return at once, and the figures would be labkit's own). ``labkit.plan`` takes meta.

    Args:
        what: The entry point, ``"labkit.trace"``, ``"labkit.memory"`` or ``"compare"``.
        model: The model.
        args: Its positional inputs.
        kwargs: Its keyword inputs.
    """
    plan = _PLAN_CALL.get(what, "labkit.plan(model, batch)")
    materialize = (
        "or make it real first (model.to_empty(device='cpu'), then load its weights with "
        "model.load_state_dict(...))"
    )
    for kind, named in (("parameter", model.named_parameters()), ("buffer", model.named_buffers())):
        for name, t in named:
            if t.device.type == "meta":
                raise ValueError(
                    f"{what} measures a real run, but {type(model).__name__} is on the meta "
                    f"device ({kind} '{name}' holds a shape, no values): nothing on meta can "
                    f"be timed or measured. Use {plan}, which takes a meta model; "
                    f"{materialize}"
                )
    for name, value in _bind(model, args, kwargs):
        for tname, t in named_tensors(value, name):
            if t.device.type == "meta":
                raise ValueError(
                    f"{what} measures a real run, but input {tname!r} is on the meta device "
                    f"(a shape, no values): nothing on meta can be timed or measured. Pass a "
                    f"real {str(t.dtype).removeprefix('torch.')} tensor of shape "
                    f"{tuple(t.shape)} (a batch from your data), or use {plan}, which takes "
                    "meta inputs"
                )


def check_devices(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise a ValueError naming the input whose device differs from the model's parameters."""
    devices = {p.device for p in parameters_of(model)}
    if not devices:
        return
    for name, value in _bind(model, args, kwargs):
        for tname, t in named_tensors(value, name):
            if t.is_floating_point() and t.device not in devices and t.device.type != "meta":
                where = ", ".join(sorted(str(d) for d in devices))
                raise ValueError(
                    f"input {tname!r} is on {t.device}, but the parameters of "
                    f"{type(model).__name__} are on {where}: move the input with "
                    f"{tname}.to('{where}') or the model with model.to('{t.device}')"
                )
