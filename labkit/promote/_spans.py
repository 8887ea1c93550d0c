"""Exact source text of top-level statements, cut by their ``ast`` spans, never by lines.

``lr *= 10; tag = 1`` is two statements on one line: each gets its own text (``lr *= 10``
and ``tag = 1``), so a script holds each statement exactly once. A statement keeps the
comment lines right above it (``prefix``) and a comment that ends its last line
(``suffix``); a decorated ``def``/``class`` starts at its first decorator.

``ast`` columns are UTF-8 byte offsets: the slicing is done on the encoded lines.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ["Span", "indent_code", "statement_spans"]

_TRAIL = re.compile(rb"^\s*;?\s*(#.*)?$")


@dataclass(frozen=True)
class Span:
    """The text of one top-level statement.

    Args:
        source: The statement itself, from its first to its last character.
        prefix: The comment lines above it (and blank lines between them), ``""`` if none.
        suffix: A comment after it on its last line (``"  # note"``), else ``""``.
    """

    source: str
    prefix: str = ""
    suffix: str = ""

    @property
    def text(self) -> str:
        """What a script holds for it: prefix, source and suffix."""
        return f"{self.prefix}{self.source}{self.suffix}"


def statement_spans(code: str, body: list[ast.stmt]) -> list[Span]:
    """The :class:`Span` of every statement of ``body``, parsed from ``code``.

    Args:
        code: The text ``body`` was parsed from (``ast.parse(code).body``).
        body: Its top-level statements.

    Returns:
        One span per statement, in order.

    Example:
        >>> code = "lr = 0.1\\nlr *= 10; tag = 1  # scale"
        >>> [s.text for s in statement_spans(code, ast.parse(code).body)]
        ['lr = 0.1', 'lr *= 10', 'tag = 1  # scale']
    """
    lines = [line.encode("utf-8") for line in code.split("\n")]
    spans: list[Span] = []
    previous_end = 0  # the last line (1-based) used by the statement before
    for stmt in body:
        start_line, start_col = stmt.lineno, stmt.col_offset
        decorators = getattr(stmt, "decorator_list", None)
        if decorators:
            # a compound statement starts its own line; ``@`` shares its decorator's line
            start_line, start_col = min(d.lineno for d in decorators), 0
        end_line, end_col = stmt.end_lineno or stmt.lineno, stmt.end_col_offset or 0
        source = _cut(lines, start_line, start_col, end_line, end_col)
        prefix = ""
        if start_col == 0 or not lines[start_line - 1][:start_col].strip():
            comments = []
            for number in range(start_line - 1, previous_end, -1):
                line = lines[number - 1].decode("utf-8")
                if line.strip() and not line.lstrip().startswith("#"):
                    break
                comments.append(line + "\n")
            while comments and not comments[-1].strip():
                comments.pop()  # blank lines above the first comment are not kept
            prefix = "".join(reversed(comments))
        rest = lines[end_line - 1][end_col:]
        suffix = ""
        match = _TRAIL.match(rest)
        if match and match.group(1):
            suffix = "  " + match.group(1).decode("utf-8")
        spans.append(Span(source, prefix, suffix))
        previous_end = end_line
    return spans


def _cut(lines: list[bytes], start_line: int, start_col: int, end_line: int, end_col: int) -> str:
    if start_line == end_line:
        return lines[start_line - 1][start_col:end_col].decode("utf-8")
    parts = [lines[start_line - 1][start_col:]]
    parts += lines[start_line : end_line - 1]
    parts.append(lines[end_line - 1][:end_col])
    return b"\n".join(parts).decode("utf-8")


def indent_code(text: str, prefix: str) -> str:
    """Indent the lines of ``text`` (whole statements) by ``prefix``, except lines inside a
    multi-line string, whose content would change.

    Args:
        text: Python statements.
        prefix: Usually four spaces.

    Returns:
        The indented text; it parses as the body of a block.

    Example:
        >>> indent_code("x = 1\\nif x:\\n    y = 2", "    ")
        '    x = 1\\n    if x:\\n        y = 2'
    """
    inside: set[int] = set()
    try:
        tree = ast.parse(text)
    except (SyntaxError, RecursionError, MemoryError):
        tree = None
    if tree is not None:
        for node in ast.walk(tree):
            is_str = isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)
            text_node = is_str or isinstance(node, ast.JoinedStr)
            if isinstance(node, ast.expr) and text_node and node.end_lineno:
                inside.update(range(node.lineno + 1, node.end_lineno + 1))
    out = []
    for number, line in enumerate(text.split("\n"), start=1):
        out.append(line if number in inside or not line.strip() else prefix + line)
    return "\n".join(out)
