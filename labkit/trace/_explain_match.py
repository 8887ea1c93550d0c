"""Which module of one trace is which module of another (``labkit.diff``'s matching).

Modules match by path first. When paths differ because a model was wrapped (``module.``
of DistributedDataParallel, a user's wrapper), compiled (``_orig_mod.`` of
``torch.compile``) or a module renamed, they match by structure: the wrapper prefix that
lines up most paths with equal types, then, under every matched pair, children by name
and the rest in order by type. Each match says which rule made it; what matches nothing
is added (only in the other trace) or removed (only in the base).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass

_COMPILED = "_orig_mod"


@dataclass(frozen=True)
class Match:
    """One row of a matching: a module of the base trace, of the other, or of both.

    Args:
        a: Path in the base trace (``None``: added in the other).
        b: Path in the other trace (``None``: removed).
        rule: How they were matched, in words (``"path"``, ``"path, '_orig_mod.' dropped
            (torch.compile)"``, ``"structure: Linear #2 under 'blocks.0'"``, ``"added"``...).
    """

    a: str | None
    b: str | None
    rule: str


def _parent(path: str) -> str | None:
    if not path:
        return None
    return path.rsplit(".", 1)[0] if "." in path else ""


def _strip(path: str, prefix: str) -> str | None:
    """``path`` relative to ``prefix`` with ``_orig_mod`` components dropped (None: outside)."""
    if prefix:
        if path != prefix and not path.startswith(prefix + "."):
            return None
        path = path[len(prefix) + 1 :]
    return ".".join(p for p in path.split(".") if p and p != _COMPILED)


def _norm_map(types: dict[str, str], prefix: str, other: dict[str, str]) -> dict[str, str]:
    """Normalised path -> path; on a collision (a compiled wrapper and what it wraps) the
    module whose type the other trace has at that path wins."""
    out: dict[str, str] = {}
    for path, typ in types.items():
        key = _strip(path, prefix)
        if key is None:
            continue
        if key not in out or (typ == other.get(key) and types[out[key]] != other.get(key)):
            out[key] = path
    return out


def _prefixes(types: dict[str, str], root_type: str) -> list[str]:
    return ["", *[p for p, t in types.items() if p and t == root_type][:8]]


def _wrapper_rule(pa: str, pb: str, a: str, b: str) -> str:
    reasons = []
    if pb and not pa:
        reasons.append(f"under wrapper '{pb}.' in the other trace")
    elif pa and not pb:
        reasons.append(f"under wrapper '{pa}.' in the base")
    elif pa != pb:
        reasons.append(f"wrapper '{pa}.' -> '{pb}.'")
    if _COMPILED in a.split(".") or _COMPILED in b.split("."):
        reasons.append("'_orig_mod.' dropped (torch.compile)")
    return "path, " + ", ".join(reasons) if reasons else "path"


def match_modules(a: Sequence[tuple[str, str]], b: Sequence[tuple[str, str]]) -> list[Match]:
    """Match modules ``(path, type)`` of a base trace ``a`` with those of ``b``.

    Returns:
        One :class:`Match` per module of either trace, in ``a``'s order with ``b``'s
        added modules after the module they follow.

    Example:
        >>> a = [("", "Net"), ("fc", "Linear")]
        >>> b = [("", "DistributedDataParallel"), ("module", "Net"), ("module.fc", "Linear")]
        >>> [(m.a, m.b, m.rule) for m in match_modules(a, b)]  # doctest: +NORMALIZE_WHITESPACE
        [(None, '', 'added'), ('', 'module', "path, under wrapper 'module.' in the other trace"),
         ('fc', 'module.fc', "path, under wrapper 'module.' in the other trace")]
    """
    ta, tb = dict(a), dict(b)
    pairs: dict[str, tuple[str, str]] = {}  # a path -> (b path, rule)
    if ta.keys() & tb.keys() == ta.keys() or not ta:
        best = ("", "")
    else:  # the wrapper prefixes that line up most paths with equal types
        scores = []
        for pa in _prefixes(ta, tb.get("", "")):
            for pb in _prefixes(tb, ta.get("", "")):
                na, nb = _norm_map(ta, pa, tb), _norm_map(tb, pb, ta)
                hits = sum(1 for k, p in na.items() if k in nb and ta[p] == tb[nb[k]])
                scores.append((hits, -len(pa) - len(pb), pa, pb))
        _, _, *best_ = max(scores)
        best = (best_[0], best_[1])
    pa, pb = best
    na, nb = _norm_map(ta, pa, tb), _norm_map(tb, pb, ta)
    for key, x in na.items():
        if key in nb:
            y = nb[key]
            pairs[x] = (y, _wrapper_rule(pa, pb, x, y))
    _by_structure(ta, tb, pairs)
    return _ordered(a, b, pairs)


def _children(types: dict[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in types:
        parent = _parent(path)
        if parent is not None:
            out.setdefault(parent, []).append(path)
    return out


def _by_structure(
    ta: dict[str, str], tb: dict[str, str], pairs: dict[str, tuple[str, str]]
) -> None:
    """Under every matched pair, unmatched children by name, then in order by type."""
    kids_a, kids_b = _children(ta), _children(tb)
    taken = {y for y, _ in pairs.values()}
    work = list(pairs.items())
    while work:
        x, (y, _) = work.pop(0)
        ca = [c for c in kids_a.get(x, []) if c not in pairs]
        cb = [c for c in kids_b.get(y, []) if c not in taken]
        if not ca or not cb:
            continue
        by_name = {c.rsplit(".", 1)[-1]: c for c in cb}
        rest_a = []
        for c in ca:
            d = by_name.pop(c.rsplit(".", 1)[-1], None)
            if d is None:
                rest_a.append(c)
                continue
            c, d, why = _unwrap(ta, tb, c, d)
            pairs[c] = (d, f"name under matched '{x or '(root)'}'{why}")
            taken.add(d)
            work.append((c, pairs[c]))
        rest_b = [c for c in cb if c not in taken]
        sm = difflib.SequenceMatcher(
            None, [ta[c] for c in rest_a], [tb[c] for c in rest_b], autojunk=False
        )
        for i, j, n in sm.get_matching_blocks():
            for k in range(n):
                c, d = rest_a[i + k], rest_b[j + k]
                nth = [ta[s] for s in kids_a[x]].count(ta[c]) > 1
                where = f"#{[s for s in kids_a[x] if ta[s] == ta[c]].index(c) + 1} " if nth else ""
                pairs[c] = (d, f"structure: {ta[c]} {where}under '{x or '(root)'}' (renamed)")
                taken.add(d)
                work.append((c, pairs[c]))


def _unwrap(ta: dict[str, str], tb: dict[str, str], c: str, d: str) -> tuple[str, str, str]:
    """A pair of different types where one side is a compiled wrapper of the other's type:
    the wrapped module instead (the wrapper is then added or removed)."""
    if ta[c] != tb[d]:
        if tb.get(f"{d}.{_COMPILED}") == ta[c]:
            return c, f"{d}.{_COMPILED}", ", '_orig_mod.' dropped (torch.compile)"
        if ta.get(f"{c}.{_COMPILED}") == tb[d]:
            return f"{c}.{_COMPILED}", d, ", '_orig_mod.' dropped (torch.compile)"
    return c, d, ""


def _ordered(
    a: Sequence[tuple[str, str]], b: Sequence[tuple[str, str]], pairs: dict[str, tuple[str, str]]
) -> list[Match]:
    """Matches in ``a``'s order; each added module right after the ``b`` module before it."""
    after: dict[str | None, list[str]] = {}
    back = {y: x for x, (y, _) in pairs.items()}
    last: str | None = None
    for path, _ in b:
        if path in back:
            last = back[path]
        else:
            after.setdefault(last, []).append(path)
    out = [Match(None, y, "added") for y in after.get(None, [])]
    for path, _ in a:
        if path in pairs:
            y, rule = pairs[path]
            out.append(Match(path, y, rule))
        else:
            out.append(Match(path, None, "removed"))
        out.extend(Match(None, y, "added") for y in after.get(path, []))
    return out
