"""Request checks shared by labkit's handlers: a bounded JSON body and a sane path.

Whatever a client sends is answered with a 400 and a short message, never a 500: a
body over :data:`MAX_BODY` bytes, JSON nested past the parser's limit, a path with a NUL
byte or longer than :data:`MAX_PATH` characters. Messages and logs quote at most
:data:`QUOTE` characters of what was sent.
"""

from __future__ import annotations

import json
from typing import Any

MAX_BODY = 64 << 10
MAX_PATH = 4096
QUOTE = 120


class BadRequest(ValueError):
    """The request cannot be served; the message says why (answered with 400)."""


def quote(text: str) -> str:
    """``text`` for a message or a log line: at most :data:`QUOTE` characters, repr-escaped."""
    shown = repr(text[:QUOTE])
    return shown + (f"... ({len(text)} characters)" if len(text) > QUOTE else "")


def json_body(body: bytes | None) -> dict[str, Any]:
    """The request body as a JSON object (``{}`` for JSON that is not an object).

    Raises:
        BadRequest: too large, not JSON, or nested too deeply.
    """
    body = body or b"{}"
    if len(body) > MAX_BODY:
        raise BadRequest(f"the request body is {len(body)} bytes; at most {MAX_BODY}")
    try:
        data = json.loads(body)
    except ValueError:
        raise BadRequest("the request body is not JSON") from None
    except RecursionError:
        raise BadRequest("the request body nests JSON too deeply") from None
    return data if isinstance(data, dict) else {}  # the handler then asks for its fields


def checked_path(path: object, example: str) -> str:
    """A client's relative path, refused when empty, with a NUL byte, or too long.

    Args:
        path: What the client sent.
        example: The body to show in the message, e.g. ``{"path": "<notebook>.ipynb"}``.

    Raises:
        BadRequest: naming the problem (and quoting at most :data:`QUOTE` characters).
    """
    if not isinstance(path, str) or not path.strip():
        raise BadRequest(f"send {example}")
    if "\0" in path:
        raise BadRequest(f"the path {quote(path)} contains a NUL byte")
    if len(path) > MAX_PATH:
        raise BadRequest(f"the path is {len(path)} characters long; at most {MAX_PATH}")
    return path
