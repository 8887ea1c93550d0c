"""Keyword options written once, as the fields of a frozen dataclass with a ``help`` each.

``Lab.fit``'s :class:`~labkit.train.fit_options.FitOptions` and ``labkit.compare``'s
:class:`~labkit.optimize.BenchOptions` are such dataclasses: the functions that take them
get their keyword-only signature (:func:`keyword_signature`) and the Args of their
docstring (:func:`args_doc`) from the fields, and a misspelt keyword names the closest
one (:func:`check_names`).

Example:
    >>> import dataclasses
    >>> @dataclasses.dataclass(frozen=True)
    ... class Opts:
    ...     steps: int = dataclasses.field(default=3, metadata={"help": "How many."})
    >>> list(keyword_signature(Opts).parameters)
    ['steps']
    >>> args_doc(Opts, "  ")
    '  steps: How many.'
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import textwrap
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["args_doc", "changes_repr", "check_names", "keyword_signature"]


def check_names(options: Any, given: Iterable[str], where: str, unknown: str) -> None:
    """Raise a TypeError for a name in ``given`` that is not a field of ``options``.

    Args:
        options: The options dataclass.
        given: The keywords given.
        where: The call, for the message (``"Lab.fit"``).
        unknown: What the message calls such a name (``"an unknown option"``).
    """
    names = [f.name for f in dataclasses.fields(options)]
    for key in given:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{where}() got {unknown} {key!r}{hint}")


def changes_repr(options: Any) -> str:
    """``Name(field=value, ...)`` with the fields that differ from their defaults."""
    changed = [
        f"{f.name}={getattr(options, f.name)!r}"
        for f in dataclasses.fields(options)
        if getattr(options, f.name) != f.default
    ]
    return f"{type(options).__name__}({', '.join(changed)})"


def keyword_signature(
    options: Any, first: Sequence[inspect.Parameter] = (), last: Sequence[inspect.Parameter] = ()
) -> inspect.Signature:
    """The options as keyword-only parameters (default, annotation), between ``first`` and
    ``last``."""
    params = [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type
        )
        for f in dataclasses.fields(options)
    ]
    return inspect.Signature([*first, *params, *last])


def args_doc(options: Any, indent: str) -> str:
    """The Google-style ``Args:`` lines of the options (``name: help``, wrapped at 88)."""
    lines = []
    for f in dataclasses.fields(options):
        text = f"{indent}{f.name}: {f.metadata['help']}"
        lines += textwrap.wrap(text, 88, subsequent_indent=indent + "    ")
    return "\n".join(lines)
