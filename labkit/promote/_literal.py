"""Text from outside (file names, cell text, parameter values, recipe fields) written into a
promoted script as *data*, escaped by construction, so nothing in it can run as code.

- :func:`docstring`: a triple-quoted literal whose value is exactly the text: backslashes,
  a quote that could close the literal, carriage returns and every other non-printable
  character (NUL, lone surrogates, line separators) are written as escapes. The result is
  checked by parsing it back.
- :func:`literal`: ``repr`` of a plain value (str, number, bool, None, and lists, tuples
  and dicts of them), checked to read back equal with :func:`ast.literal_eval`.
- :func:`comment`: one line of a ``#`` comment; line breaks and non-printable characters
  are shown escaped, so a comment cannot end early.

Example:
    >>> name = 'n' + '"' * 3 + '+__import__("os").system("x")+' + '"' * 3 + 'n'
    >>> ast.literal_eval(docstring(name)) == name
    True
    >>> comment("a\\nimport os")
    'a\\\\nimport os'
"""

from __future__ import annotations

import ast
import math
from typing import Any

__all__ = ["comment", "docstring", "literal"]


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def docstring(text: str) -> str:
    """``text`` as a ``\"\"\"...\"\"\"`` literal that cannot end early or run anything.

    Args:
        text: Any text (it may hold quotes, backslashes, ``\\N``, NUL, lone surrogates).

    Returns:
        Python source of a string literal whose value is ``text``; only printable
        characters and ``\\n`` appear in it.
    """
    out: list[str] = []
    for i, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char == '"' and (i + 1 == len(text) or text[i + 1] == '"'):
            out.append('\\"')  # never two unescaped quotes in a row, nor one at the end
        elif char == "\n" or char.isprintable():
            out.append(char)
        else:
            out.append(_escape(char))
    source = '"""' + "".join(out) + '"""'
    if ast.literal_eval(source) != text:  # pragma: no cover - the escapes above are complete
        raise ValueError(f"cannot write {text!r} as a docstring")
    return source


def literal(value: Any) -> str:
    """``repr(value)``, checked to read back equal as a Python literal.

    Args:
        value: A plain value: str, bytes, int, float, complex, bool, None, or a list,
            tuple, set or dict of them.

    Returns:
        Python source of the value.

    Raises:
        ValueError: the value is not a plain literal (an object, ``nan``, ``inf``).
    """
    text = repr(value)
    try:
        back = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        back = _MISSING
    if back is _MISSING or back != value or _has_nonfinite(value):
        raise ValueError(f"{_short(text)} is not a Python literal")
    return text


def comment(text: str) -> str:
    """``text`` made safe for one ``#`` comment line: line breaks and non-printable
    characters are shown as escapes (``\\n``, ``\\x00``), backslashes doubled."""
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == "\n":
            out.append("\\n")
        elif char.isprintable():
            out.append(char)
        else:
            out.append(_escape(char))
    return "".join(out)


_MISSING = object()


def _has_nonfinite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, complex):
        return not (math.isfinite(value.real) and math.isfinite(value.imag))
    if isinstance(value, dict):
        return any(_has_nonfinite(k) or _has_nonfinite(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return any(_has_nonfinite(v) for v in value)
    return False


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def script_header(name: str, notebook: str, paragraphs: list[str], run: str) -> str:
    """The first lines of a promoted script: ``#!`` and a docstring naming the script and
    the notebook (both escaped by :func:`docstring`), the paragraphs and how to run it."""
    first = f"{name}: promoted from {notebook} by `labkit promote`."
    text = "\n\n".join([first, *(p for p in paragraphs if p), run])
    return "#!/usr/bin/env python\n" + docstring(text + "\n")
