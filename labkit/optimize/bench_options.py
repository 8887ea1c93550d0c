"""How recipes are measured, written once: :class:`BenchOptions`.

:func:`labkit.compare` is a :class:`~labkit.optimize.Bench` used once, and both take the
same settings. They are the fields of :class:`BenchOptions`; both signatures and the Args
of both docstrings are generated from it (:meth:`BenchOptions.signature`,
:meth:`BenchOptions.args_doc`), so they cannot disagree.

Example:
    >>> BenchOptions(steps=5)
    BenchOptions(steps=5)
    >>> BenchOptions.build(None, {"mode": "inference"}, where="compare").mode
    'inference'
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from labkit._options import args_doc, changes_repr, check_names, keyword_signature

if TYPE_CHECKING:
    import torch

    from labkit.optimize.recipe import Recipe

__all__ = ["BenchOptions"]


def _help(text: str) -> dict[str, str]:
    """A field's metadata: its help text (the docstrings' Args line)."""
    return {"help": text}


@dataclass(frozen=True, repr=False)
class BenchOptions:
    """Every setting of :func:`labkit.compare` and :class:`~labkit.optimize.Bench`, with its
    default and its help (``BenchOptions.help("steps")``).

    Args:
        loss: See the field's help; every field is a keyword of ``compare`` and ``Bench``.

    Example:
        >>> BenchOptions.help("mode")[:25]
        '``"train"`` (forward, bac'
    """

    loss: Callable[[Any], torch.Tensor] | None = field(
        default=None,
        metadata=_help(
            "``loss(output) -> scalar`` for training steps; without it, the mean of the outputs."
        ),
    )
    mode: str = field(
        default="train",
        metadata=_help(
            '``"train"`` (forward, backward, SGD step) or ``"inference"`` (eval, no_grad).'
        ),
    )
    steps: int = field(
        default=10,
        metadata=_help(
            "Timed rounds per recipe before the interval is first checked (the minimum)."
        ),
    )
    warmup: int = field(
        default=2, metadata=_help("Untimed rounds per recipe after the first call.")
    )
    baseline: Recipe | None = field(
        default=None, metadata=_help("The reference Recipe (default: fp32 eager, ``Recipe()``).")
    )
    val: tuple[Any, torch.Tensor] | None = field(
        default=None,
        metadata=_help("``(inputs, targets)`` to score each model on after its steps."),
    )
    metric: Callable[[Any, torch.Tensor], float] | str | None = field(
        default=None,
        metadata=_help(
            '``metric(output, targets) -> float``, ``"accuracy"`` or ``"mse"``; default '
            "accuracy for integer targets, else mse."
        ),
    )
    tolerance: float = field(
        default=1e-2,
        metadata=_help("Relative error past which a layer's output counts as drifted."),
    )
    lr: float = field(default=1e-2, metadata=_help("SGD learning rate in train mode."))
    memory: bool = field(
        default=True, metadata=_help("Measure peak memory (an extra step per recipe).")
    )
    drift: bool = field(
        default=True, metadata=_help("Find the first drifting layer (an extra forward per recipe).")
    )
    seed: int = field(
        default=0, metadata=_help("Seed set before every step (the same for every recipe).")
    )
    loss_steps: int = field(
        default=3,
        metadata=_help(
            "Training steps of the controlled pass that gives ``loss`` and ``losses`` (train mode)."
        ),
    )
    batch_sizes: Sequence[int] = field(
        default=(),
        metadata=_help(
            "Inference only: also time every recipe at these batch sizes (the batch cut or "
            "repeated along dim 0), reported in ``RecipeResult.per_batch``."
        ),
    )
    target: float | None = field(
        default=0.03,
        metadata=_help(
            "Rounds continue until every speedup's interval is within +-target of it (0.03: "
            "+-3%); None: exactly ``steps`` rounds."
        ),
    )
    budget_s: float = field(
        default=5.0,
        metadata=_help(
            "Wall-clock seconds of timed rounds per call at most, once ``steps`` are done."
        ),
    )
    level: float = field(default=0.95, metadata=_help("Confidence level of the intervals (0.95)."))

    # ------------------------------------------------------------------ building
    @classmethod
    def build(
        cls, options: BenchOptions | None, overrides: Mapping[str, Any], *, where: str
    ) -> BenchOptions:
        """``options`` (or the defaults) with ``overrides`` applied.

        Raises:
            TypeError: ``options`` is not a BenchOptions, or a keyword is not a setting
                (the closest one is named).
        """
        if options is not None and not isinstance(options, BenchOptions):
            raise TypeError(
                f"{where}() takes keyword arguments (or one BenchOptions), got "
                f"{type(options).__name__}"
            )
        check_names(cls, overrides, where, "an unexpected keyword argument")
        return dataclasses.replace(options or cls(), **overrides)

    def __repr__(self) -> str:
        return changes_repr(self)

    # ------------------------------------------------------------------ generated text
    @staticmethod
    def help(name: str) -> str:
        """The help text of one setting."""
        return str({f.name: f for f in dataclasses.fields(BenchOptions)}[name].metadata["help"])

    @staticmethod
    def signature(
        first: Sequence[inspect.Parameter] = (), last: Sequence[inspect.Parameter] = ()
    ) -> inspect.Signature:
        """The keyword-only signature of the settings, between ``first`` and ``last``."""
        return keyword_signature(BenchOptions, first, last)

    @staticmethod
    def args_doc(indent: str) -> str:
        """The Google-style ``Args:`` lines of every setting."""
        return args_doc(BenchOptions, indent)
