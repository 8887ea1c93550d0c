"""What a promotion left out, by cell and line, grouped by reason (issue 29, item 2).

``labkit promote`` prints it (``--quiet`` silences it), the server's Promote answer carries
it for the dialog, and the script's docstring holds its counts.

Example:
    >>> from labkit.promote import analyze, read_notebook           # doctest: +SKIP
    >>> print(promotion_report(analyze(read_notebook("nb.ipynb"))).text())  # doctest: +SKIP
    left out of the script: 3 statements, 1 cell skipped
      displayed result (2; --show-results prints them)
        cell 3 (In [3]) line 4: loss
    ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from labkit.promote._classify import RESULT, reason_group
from labkit.promote.analysis import Analysis, Statement
from labkit.promote.checks import kept_statements

__all__ = ["Dropped", "Report", "promotion_report"]

MAGIC_LINE = "IPython magic or shell escape"
_HINTS = {
    RESULT: "--show-results prints them",
    "tagged explore": "the cell's tag",
}


@dataclass(frozen=True)
class Dropped:
    """One statement (or a whole cell, ``line == 0``) left out of the script.

    Args:
        cell: The cell's label (``cell 3 (In [5])``).
        number: The cell's 1-based number.
        line: The statement's first line in the cell (``0`` for a whole cell).
        source: The statement's first line of text (``""`` for a whole cell).
        reason: Why it is left out.
    """

    cell: str
    number: int
    line: int
    source: str
    reason: str

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form (the server sends these)."""
        return {
            "cell": self.number,
            "label": self.cell,
            "line": self.line,
            "source": self.source,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class Report:
    """What the script leaves out and what it prints in place of a displayed result.

    Args:
        groups: ``(reason, statements)`` in first-seen order.
        skipped: Whole cells left out (never run, a non-Python cell magic, empty...).
        printed: Displayed results the script prints (``show_results``).
    """

    groups: tuple[tuple[str, tuple[Dropped, ...]], ...] = ()
    skipped: tuple[Dropped, ...] = ()
    printed: tuple[Dropped, ...] = field(default=())

    @property
    def dropped(self) -> int:
        """How many statements are left out."""
        return sum(len(items) for _, items in self.groups)

    def counts(self) -> dict[str, int]:
        """``{reason: statements}``, plus ``"cells skipped"`` and ``"results printed"``."""
        out = {reason: len(items) for reason, items in self.groups}
        if self.skipped:
            out["cells skipped"] = len(self.skipped)
        if self.printed:
            out["results printed"] = len(self.printed)
        return out

    def summary(self) -> str:
        """One sentence of counts for the script's docstring (no notebook text in it)."""
        if not self.groups and not self.skipped and not self.printed:
            return "Nothing of the cells that ran was left out."
        parts = ", ".join(f"{reason}: {n}" for reason, n in self.counts().items())
        return f"Left out or changed (labkit promote lists each by cell and line): {parts}."

    def lines(self) -> list[str]:
        """The report, one line per statement, grouped by reason."""
        if not self.groups and not self.skipped and not self.printed:
            return ["left out of the script: nothing"]
        head = f"left out of the script: {self.dropped} statement(s)"
        if self.skipped:
            head += f", {len(self.skipped)} cell(s) skipped"
        out = [head]
        for reason, items in self.groups:
            hint = f"; {_HINTS[reason]}" if reason in _HINTS else ""
            out.append(f"  {reason} ({len(items)}{hint})")
            out += [f"    {d.cell} line {d.line}: {d.source}" for d in items]
        if self.skipped:
            out.append(f"  cells skipped ({len(self.skipped)})")
            out += [f"    {d.cell}: {d.reason}" for d in self.skipped]
        if self.printed:
            out.append(f"  results printed by the script ({len(self.printed)})")
            out += [f"    {d.cell} line {d.line}: {d.source}" for d in self.printed]
        return out

    def text(self) -> str:
        """:meth:`lines` joined."""
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form: groups, skipped cells, printed results, counts."""
        return {
            "groups": [
                {"reason": r, "items": [d.to_dict() for d in items]} for r, items in self.groups
            ],
            "skipped": [d.to_dict() for d in self.skipped],
            "printed": [d.to_dict() for d in self.printed],
            "counts": self.counts(),
        }

    def __repr__(self) -> str:
        shown = f"dropped={self.dropped}, skipped={len(self.skipped)}"
        return f"Report({shown}, printed={len(self.printed)})"


def promotion_report(analysis: Analysis, *, kept: Sequence[Statement] | None = None) -> Report:
    """The :class:`Report` of ``analysis``: statements not kept, cells skipped, results
    printed.

    Args:
        analysis: From :func:`labkit.promote.analysis`.
        kept: ``kept_statements(analysis)`` when the caller has it already.

    Returns:
        The report.
    """
    kept_ids = {id(s) for s in (kept_statements(analysis) if kept is None else kept)}
    groups: dict[str, list[Dropped]] = {}
    skipped: list[Dropped] = []
    printed: list[Dropped] = []
    for plan in analysis.plans:
        if not plan.statements and plan.reason:
            skipped.append(_whole(plan.cell.label, plan.cell.number, plan.reason))
        elif plan.magics:
            lines = plan.cell.source.split("\n")
            for magic in plan.magics:
                number = next((i for i, x in enumerate(lines, 1) if x.strip() == magic), 0)
                groups.setdefault(MAGIC_LINE, []).append(
                    Dropped(plan.cell.label, plan.cell.number, number, magic, MAGIC_LINE)
                )
        for s in plan.statements:
            if s.printed:
                printed.append(_one(s, "printed"))
            elif id(s) not in kept_ids and s.lineno:
                group = reason_group(s.reason or "not needed")
                groups.setdefault(group, []).append(_one(s, s.reason))
    for cell in analysis.never_run:
        skipped.append(_whole(cell.label, cell.number, "never run"))
    skipped.sort(key=lambda d: d.number)
    return Report(
        tuple((r, tuple(items)) for r, items in groups.items()), tuple(skipped), tuple(printed)
    )


def _one(s: Statement, reason: str) -> Dropped:
    first = s.source.strip().split("\n")[0]
    more = " ..." if "\n" in s.source.strip() else ""
    return Dropped(s.cell.label, s.cell.number, s.lineno, first + more, reason)


def _whole(label: str, number: int, reason: str) -> Dropped:
    return Dropped(label, number, 0, "", reason)
