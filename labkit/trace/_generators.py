"""Random generators the user holds, saved and put back.

The global generators (torch's CPU and CUDA ones, Python's, NumPy's) are put back by
:class:`~labkit.trace.StepState`. A model can also draw from its own: a
``torch.Generator`` kept as a module attribute (``self.g = torch.Generator()``, used as
``torch.randn(..., generator=self.g)``), a module global or a variable a loss closes over,
or a NumPy ``Generator``/``RandomState``. Every pass labkit runs advances them, so the
user's next step would draw other numbers than without the measurement: their states are
saved before the step and set back after it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["SavedGenerators", "is_generator"]


def _numpy_kinds() -> tuple[type, ...]:
    np = sys.modules.get("numpy")
    if np is None:
        return ()
    return (np.random.Generator, np.random.RandomState)


def is_generator(v: object) -> bool:
    """Whether ``v`` is a random generator whose state can be saved here."""
    return isinstance(v, (torch.Generator, *_numpy_kinds()))


def _state(g: Any) -> object:
    if isinstance(g, torch.Generator):
        return g.get_state()
    if hasattr(g, "bit_generator"):  # numpy.random.Generator
        return g.bit_generator.state
    return g.get_state()  # numpy.random.RandomState


def _set(g: Any, state: Any) -> None:
    if isinstance(g, torch.Generator):
        g.set_state(state)
    elif hasattr(g, "bit_generator"):
        g.bit_generator.state = state
    else:
        g.set_state(state)


class SavedGenerators:
    """The states of the generators among ``objects`` (others are skipped), now;
    :meth:`restore` sets them back.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> saved = SavedGenerators([g, 3, "x"])
        >>> a = torch.rand(2, generator=g)
        >>> saved.restore()
        >>> torch.equal(torch.rand(2, generator=g), a)
        True
    """

    def __init__(self, objects: Iterable[object]) -> None:
        seen: set[int] = set()
        self.saved: list[tuple[Any, object]] = []
        for g in objects:
            if id(g) not in seen and is_generator(g):
                seen.add(id(g))
                self.saved.append((g, _state(g)))

    def __repr__(self) -> str:
        return f"SavedGenerators({len(self.saved)})"

    def restore(self) -> None:
        """Set each generator back to its saved state."""
        for g, state in self.saved:
            _set(g, state)
