"""The options of :meth:`labkit.train.Lab.fit`, written once.

:class:`FitOptions` is the one list. ``Lab.fit``'s keywords (its signature and the Args of
its docstring), the command line of promoted scripts (:func:`fit_argument_parser`, used by
:func:`labkit.train.fit_from_args`) and the README's table (:func:`fit_options_markdown`)
are generated from it, so they cannot disagree.

Example:
    >>> FitOptions().max_epochs
    1
    >>> FitOptions.build(None, {"max_epochs": 3, "seed": 1}).seed
    1
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from labkit._options import args_doc, changes_repr, check_names, keyword_signature

__all__ = [
    "SCRIPT_OPTIONS",
    "FitOptionError",
    "FitOptions",
    "fit_argument_parser",
    "fit_options_markdown",
    "parse_fit_args",
]


def _devices(text: str) -> int | str | list[int]:
    """--devices: 'auto', a count, or device ids separated by commas."""
    if text == "auto":
        return text
    try:
        if "," in text:
            return [int(part) for part in text.split(",") if part.strip()]
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give 'auto', a count (2) or device ids (0,1)"
        ) from None


def _count_or_fraction(text: str) -> int | float:
    """--limit-*-batches: a count of batches (5) or a fraction of the epoch (0.25)."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: give a count of batches (5) or a fraction (0.25)"
            ) from None


T = TypeVar("T")  # a field's value: _opt returns its default's type

_PARSERS: dict[str, Any] = {
    "int": int,
    "float": float,
    "str": str,
    "devices": _devices,
    "count": _count_or_fraction,
}


def _opt(default: T, help: str, cli: str | None) -> T:
    """A field with its help text and its command-line kind (``None``: not on the CLI)."""
    return field(default=default, metadata={"help": help, "cli": cli})


@dataclass(frozen=True)
class FitOptions:
    """Every option of ``Lab.fit``, with its default, its help and its command-line form.

    Args:
        max_epochs: See the field's help (``FitOptions.help("max_epochs")``).

    Example:
        >>> FitOptions(max_epochs=2).replace(seed=3)
        FitOptions(max_epochs=2, seed=3)
    """

    max_epochs: int = _opt(1, "Epochs to train (in total, counting resumed ones).", "int")
    max_steps: int = _opt(-1, "Stop after this many optimizer steps (-1: no limit).", "int")
    devices: int | str | list[int] = _opt(  # noqa: RUF009 (_opt returns a dataclasses.field)
        1, "Devices (processes) per node: a count, 'auto', or ids like 0,1.", "devices"
    )
    accelerator: str = _opt("auto", "'cpu', 'gpu' or 'auto'.", "str")
    strategy: str | object = _opt(
        "auto", "'auto', 'ddp' (forked in a notebook), or a Lightning strategy.", "str"
    )
    num_nodes: int = _opt(1, "Nodes (only under a launcher such as torchrun).", "int")
    seed: int = _opt(0, "Base seed (see the determinism contract of Lab.fit).", "int")
    resume: bool = _opt(
        False, "Continue from <logdir>/checkpoints/last.ckpt when it exists.", "flag"
    )
    ckpt_path: str | os.PathLike[str] | None = _opt(  # noqa: RUF009 (_opt returns a dataclasses.field)
        None,
        "Continue from this checkpoint; 'last' is <logdir>/checkpoints/last.ckpt "
        "(a fresh start when there is none yet, like resume).",
        "str",
    )
    logdir: str | os.PathLike[str] | None = _opt(  # noqa: RUF009 (_opt returns a dataclasses.field)
        None, "Run directory for checkpoints, TensorBoard logs and run.json.", "str"
    )
    dashboard: bool | None = _opt(
        None, "Show the live dashboard (default: in a notebook); False for none.", None
    )
    compare_with: bool | list[str] | None = _opt(  # noqa: RUF009 (_opt returns a dataclasses.field)
        None,
        "Overlay earlier runs of this logdir's family on the dashboard, dimmed: True for the "
        "latest ones, or their run names (default: none; the dashboard's toggle shows them).",
        None,
    )
    background: bool = _opt(
        False,
        "Return at once with the running Run (run.wait() joins); the dashboard's Stop "
        "button needs this in a notebook.",
        None,
    )
    launch: str = _opt("auto", "'auto', or force 'inline', 'fork' or 'subprocess'.", "str")
    dry_run: bool = _opt(True, "Check one batch through model and loss before training.", "bool")
    guard: bool = _opt(
        True, "Stop at the first non-finite loss or gradient, naming step and module.", "bool"
    )
    trace_every: int = _opt(0, "Sample a labkit timing trace every N steps (0: never).", "int")
    histogram_every: int = _opt(
        0, "Weight and gradient histograms every N steps (0: never).", "int"
    )
    log_every: int = _opt(10, "TensorBoard scalar interval in steps.", "int")
    rank_stats: bool = _opt(
        True,
        "With several processes: time each rank's step (data, compute, all-reduce) and "
        "name stragglers at each epoch end.",
        "bool",
    )
    ddp_timeout: float = _opt(
        120.0, "Seconds a collective may wait for a peer before failing.", "float"
    )
    limit_train_batches: int | float | None = _opt(
        None, "Train on N batches (or a fraction) per epoch.", "count"
    )
    limit_val_batches: int | float | None = _opt(
        None, "Validate on N batches (or a fraction) per epoch.", "count"
    )
    trainer_kwargs: Mapping[str, Any] | None = _opt(
        None, "More lightning.Trainer arguments (callbacks are added to labkit's own).", None
    )
    on_change: str = _opt(
        "refuse",
        "On resume, when the Lab's lr or Recipe differs from the checkpoint's: 'refuse' "
        "(name the differences), 'apply' (the Lab's) or 'keep' (the checkpoint's lr).",
        "str",
    )

    def __post_init__(self) -> None:
        check_types(self)

    # ------------------------------------------------------------------ building
    @classmethod
    def build(
        cls, options: FitOptions | None, overrides: Mapping[str, Any], *, where: str = "Lab.fit"
    ) -> FitOptions:
        """``options`` (or the defaults) with ``overrides`` applied.

        Raises:
            TypeError: for a keyword that is not a fit option, naming the closest one.
        """
        if options is not None and not isinstance(options, FitOptions):
            raise TypeError(
                f"{where}() takes keyword arguments (or one FitOptions), got "
                f"{type(options).__name__}"
            )
        check_names(cls, overrides, where, "an unknown option")
        try:
            return dataclasses.replace(options or cls(), **overrides)
        except FitOptionError as exc:
            raise FitOptionError(f"{where}(): {exc}") from None

    def replace(self, **changes: object) -> FitOptions:
        """A copy with ``changes`` (unknown names raise ``TypeError``)."""
        return FitOptions.build(self, changes, where="FitOptions.replace")

    def to_kwargs(self) -> dict[str, Any]:
        """``{name: value}`` for every option (``lab.fit(**options.to_kwargs())``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def __repr__(self) -> str:
        return changes_repr(self)

    # ------------------------------------------------------------------ generated text
    @staticmethod
    def signature(first: Sequence[inspect.Parameter] = ()) -> inspect.Signature:
        """The keyword-only signature of the options, after the parameters ``first``."""
        return keyword_signature(FitOptions, first)

    @staticmethod
    def args_doc(indent: str) -> str:
        """The Google-style ``Args:`` lines of every option."""
        return args_doc(FitOptions, indent)


class FitOptionError(TypeError):
    """A fit option of the wrong type or value; names the option, the value and what it takes."""


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_path(v: object) -> bool:
    return isinstance(v, str | os.PathLike)


# what each annotation accepts, and how the message says it
_KINDS: dict[str, tuple[Any, str]] = {
    "int": (_is_int, "an integer"),
    "float": (_is_number, "a number"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "bool": (lambda v: isinstance(v, bool), "True or False"),
    "bool | None": (lambda v: v is None or isinstance(v, bool), "True, False or None"),
    "int | str | list[int]": (
        lambda v: (
            _is_int(v)
            or isinstance(v, str)
            or (isinstance(v, list | tuple) and all(map(_is_int, v)))
        ),
        "a count, 'auto' or a list of device ids",
    ),
    "str | os.PathLike[str] | None": (lambda v: v is None or _is_path(v), "a path or None"),
    "int | float | None": (
        lambda v: v is None or _is_number(v),
        "a count of batches, a fraction or None",
    ),
    "Mapping[str, Any] | None": (
        lambda v: v is None or isinstance(v, Mapping),
        "a dict of Trainer arguments or None",
    ),
}
_CHOICES = {
    "launch": ("auto", "inline", "fork", "subprocess"),
    "on_change": ("refuse", "apply", "keep"),
}
_AT_LEAST = {
    "max_epochs": -1,
    "max_steps": -1,
    "num_nodes": 1,
    "seed": 0,
    "trace_every": 0,
    "histogram_every": 0,
    "log_every": 1,
}


def check_types(options: FitOptions) -> None:
    """Refuse an option of the wrong type or value before Lightning sees it.

    Raises:
        FitOptionError: naming the option, the value given and what it takes.
    """
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        kind = _KINDS.get(str(f.type))
        if kind is not None and not kind[0](value):
            raise FitOptionError(
                f"fit option {f.name}={value!r} ({type(value).__name__}): {f.name} takes {kind[1]}"
            )
        if f.name in _CHOICES and value not in _CHOICES[f.name]:
            raise FitOptionError(f"fit option {f.name}={value!r}: one of {_CHOICES[f.name]}")
        if f.name in _AT_LEAST and value < _AT_LEAST[f.name]:
            raise FitOptionError(f"fit option {f.name}={value!r}: at least {_AT_LEAST[f.name]}")
    if isinstance(options.ddp_timeout, int | float) and not options.ddp_timeout > 0:
        raise FitOptionError(f"fit option ddp_timeout={options.ddp_timeout!r}: seconds, above 0")


# options of a promoted script's command line that are not ``Lab.fit`` keywords
SCRIPT_OPTIONS: dict[str, tuple[str, str]] = {
    "precision": ("str", "'32', 'bf16-mixed' or '16-mixed': overrides the Recipe's precision."),
    "limit_batches": ("int", "Train and validate on N batches per epoch (smoke runs)."),
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def fit_argument_parser(
    defaults: Mapping[str, Any] | None = None,
    *,
    description: str | None = None,
    parents: Sequence[argparse.ArgumentParser] = (),
) -> argparse.ArgumentParser:
    """The command line of a training script: every fit option with a command-line form.

    An option left out is absent from the parsed namespace (the script keeps its value).

    Args:
        defaults: The values the script uses without options (shown in ``--help``).
        description: The ``--help`` header.
        parents: The script's own options (``add_help=False`` parsers), shown and
            accepted beside the fit options.

    Returns:
        An ``argparse.ArgumentParser``.
    """
    defaults = dict(defaults or {})
    parser = argparse.ArgumentParser(
        description=description, argument_default=argparse.SUPPRESS, parents=list(parents)
    )
    for f in dataclasses.fields(FitOptions):
        kind = f.metadata["cli"]
        if kind is None:
            continue
        shown = defaults.get(f.name, f.default)
        text = f"{f.metadata['help']} (here: {shown!r})".replace("%", "%%")
        if kind == "flag":
            parser.add_argument(_flag(f.name), action="store_true", help=text)
        elif kind == "bool":
            parser.add_argument(_flag(f.name), action=argparse.BooleanOptionalAction, help=text)
        else:
            parser.add_argument(_flag(f.name), type=_PARSERS[kind], help=text)
    for name, (kind, text) in SCRIPT_OPTIONS.items():
        parser.add_argument(_flag(name), type=_PARSERS[kind], help=text.replace("%", "%%"))
    return parser


def fit_flags() -> set[str]:
    """Every option string a training script's command line takes (``--max-epochs``,
    ``--no-resume``, ``-h``): a script's own options must not reuse one."""
    return {s for action in fit_argument_parser()._actions for s in action.option_strings}


def parse_fit_args(
    argv: Sequence[str] | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
    description: str | None = None,
    parents: Sequence[argparse.ArgumentParser] = (),
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Parse a script's command line.

    Args:
        argv: Arguments (default ``sys.argv[1:]``).
        defaults: The script's own values (shown in ``--help``).
        description: The ``--help`` header.
        parents: The script's own options (read by the script itself: left out of the
            result).

    Returns:
        ``(fit overrides, script options)``: the fit options given on the command line
        (``--limit-batches N`` sets both ``limit_*_batches``), and ``precision`` if given.

    Example:
        >>> parse_fit_args(["--max-epochs", "3", "--limit-batches", "2"])
        ({'max_epochs': 3, 'limit_train_batches': 2, 'limit_val_batches': 2}, {})
    """
    parser = fit_argument_parser(defaults, description=description, parents=parents)
    given = vars(parser.parse_args(argv))
    for own in parents:
        for action in own._actions:  # argparse keeps a parser's arguments there
            given.pop(action.dest, None)
    script = {k: given.pop(k) for k in list(given) if k in SCRIPT_OPTIONS}
    limit = script.pop("limit_batches", None)
    if limit is not None:
        given.setdefault("limit_train_batches", limit)
        given.setdefault("limit_val_batches", limit)
    return given, script


def fit_options_markdown() -> str:
    """The table of fit options for the README (``Lab.fit`` keyword, flag, default, help)."""
    rows = [
        "| `Lab.fit` keyword | script option | default | what it does |",
        "| --- | --- | --- | --- |",
    ]
    for f in dataclasses.fields(FitOptions):
        kind = f.metadata["cli"]
        flag = "" if kind is None else f"`{_flag(f.name)}`"
        if kind == "bool":
            flag = f"`{_flag(f.name)}` / `--no-{f.name.replace('_', '-')}`"
        rows.append(f"| `{f.name}` | {flag} | `{f.default!r}` | {f.metadata['help']} |")
    for name, (_, text) in SCRIPT_OPTIONS.items():
        rows.append(f"| | `{_flag(name)}` | | {text} |")
    return "\n".join(rows)
