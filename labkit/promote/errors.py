"""What promote reports: :class:`Problem` (an error or a warning about one cell) and
:class:`PromoteError` (raised with every error found, before anything is written)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Problem", "PromoteError"]


@dataclass(frozen=True)
class Problem:
    """One finding about a notebook, naming the cell and the name when there is one.

    Args:
        severity: ``"error"`` (promote writes nothing) or ``"warning"`` (reported, written).
        message: What is wrong and how to fix it, naming the cell (``cell 4 (In [7])``).
        cell: The 1-based cell number, or ``None`` for the whole notebook.
        name: The Python name involved, if any.

    Example:
        >>> Problem("error", "cell 2 uses undefined name 'x'", cell=2, name="x")
        Problem(error, cell=2, name='x', "cell 2 uses undefined name 'x'")
    """

    severity: str
    message: str
    cell: int | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.severity not in ("error", "warning"):
            raise ValueError(
                f"Problem.severity must be 'error' or 'warning', got {self.severity!r}"
            )

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (the server endpoint sends these)."""
        return {
            "severity": self.severity,
            "message": self.message,
            "cell": self.cell,
            "name": self.name,
        }

    def __str__(self) -> str:
        return f"{self.severity}: {self.message}"

    def __repr__(self) -> str:
        where = f", cell={self.cell}" if self.cell is not None else ""
        name = f", name={self.name!r}" if self.name else ""
        return f'Problem({self.severity}{where}{name}, "{self.message}")'


class PromoteError(Exception):
    """The notebook cannot be promoted; ``problems`` lists every error (and the warnings).

    Args:
        path: The notebook (or script) the problems are about.
        problems: Every finding; at least one has severity ``"error"``.
    """

    def __init__(self, path: object, problems: list[Problem] | tuple[Problem, ...]) -> None:
        self.path = str(path)
        self.problems = tuple(problems)
        errors = [p for p in self.problems if p.severity == "error"]
        lines = [f"{self.path}: cannot promote ({len(errors)} error(s)):"]
        lines += [f"  {p.message}" for p in errors]
        super().__init__("\n".join(lines))

    @property
    def errors(self) -> tuple[Problem, ...]:
        """Only the errors."""
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        """Only the warnings."""
        return tuple(p for p in self.problems if p.severity == "warning")
