"""Human-readable numbers shared by tables and reprs."""

from __future__ import annotations

_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_BIN = ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB"))


def fmt_count(n: float) -> str:
    """``1234567 -> '1.23 M'``; integers below 1000 stay exact."""
    if n == 0:
        return "0"
    for scale, suffix in _SI:
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}"
    return f"{n:g}" if isinstance(n, float) else str(n)


def fmt_bytes(n: float) -> str:
    """``1536 -> '1.50 KiB'``."""
    if n == 0:
        return "0 B"
    for scale, suffix in _BIN:
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}"
    return f"{int(n)} B"


def fmt_time(seconds: float, digits: int = 2) -> str:
    """Seconds as the unit that reads best: ``0.00123 -> '1.23 ms'``.

    ``digits`` decimals for seconds and milliseconds (microseconds keep one).

    Example:
        >>> fmt_time(0.00123), fmt_time(1.5, digits=3), fmt_time(2.5e-5)
        ('1.23 ms', '1.500 s', '25.0 us')
    """
    if seconds == 0:
        return "0"
    a = abs(seconds)
    if a >= 1:
        return f"{seconds:.{digits}f} s"
    if a >= 1e-3:
        return f"{seconds * 1e3:.{digits}f} ms"
    return f"{seconds * 1e6:.1f} us"


def first_line(text: str, limit: int | None = None) -> str:
    r"""The first non-empty line of a message (an error's detail stays in its full text).

    Example:
        >>> first_line("\n  bad shape\n  at layer 3"), first_line(""), first_line("abcdef", 3)
        ('bad shape', '', 'abc')
    """
    line = next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")
    return line[:limit] if limit is not None else line


def fmt_shape(shape: tuple[int, ...] | list[int]) -> str:
    """``(8, 3, 32, 32) -> '[8, 3, 32, 32]'``."""
    return "[" + ", ".join(str(d) for d in shape) + "]"
