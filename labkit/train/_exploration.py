"""The marker on :class:`~labkit.train.Lab` methods that only look (trace, plot, print, find).

``labkit promote`` drops a call of a marked method from the script; it reads the marks
from ``lab.py``'s source (:func:`labkit.promote.analyze`), so the list cannot drift from
Lab itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, overload

__all__ = ["MARK", "exploration"]

MARK = "__labkit_exploration__"
F = TypeVar("F", bound=Callable[..., Any])


@overload
def exploration(fn: F, *, unless: str | None = None) -> F: ...
@overload
def exploration(fn: None = None, *, unless: str | None = None) -> Callable[[F], F]: ...


def exploration(fn: F | None = None, *, unless: str | None = None) -> F | Callable[[F], F]:
    """Mark a Lab method as exploration: a promoted script leaves its calls out.

    Args:
        fn: The method.
        unless: A keyword that makes a call change the Lab (``lr_find(apply=True)`` sets
            ``lab.lr``): a call passing it (not literally ``False``) is kept.

    Returns:
        The method, marked (``getattr(fn, MARK) == {"unless": unless}``).

    Example:
        >>> @exploration(unless="apply")
        ... def lr_find(self, apply=False): ...
        >>> getattr(lr_find, MARK)
        {'unless': 'apply'}
    """

    def mark(f: F) -> F:
        setattr(f, MARK, {"unless": unless})
        return f

    return mark(fn) if fn is not None else mark
