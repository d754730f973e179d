"""Multi-column slices, ``(c1, c2) > (1, 'a')``, as ranges in clustering order.

CQL compares the tuples column by column in each type's natural order. When every column of
the relation has the same clustering direction that is one range (with its ends swapped for
DESC). With mixed directions the set of rows is not one range in clustering order, so it is
split into disjoint pieces, each an equality on a prefix plus an interval on the next column:
the decomposition ScyllaDB and Cassandra also apply to mixed-order slices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cqlcdc.storage.keys import Bound
from cqlcdc.types.base import CqlType

Side = tuple[Any, bool] | None  # (value, inclusive) or unbounded


@dataclass(frozen=True, slots=True)
class Piece:
    """Rows with ``t[:len(prefix)] == prefix`` and ``lower <= t[i] <= upper`` (i = len)."""

    prefix: tuple[Any, ...]
    lower: Side
    upper: Side


def _pieces(values: tuple[Any, ...], inclusive: bool, is_lower: bool) -> list[Piece]:
    """``t >= values`` (or ``<=``) in lexicographic order as disjoint pieces."""
    out = []
    for j in range(len(values)):
        incl = inclusive if j == len(values) - 1 else False
        side: Side = (values[j], incl)
        out.append(Piece(values[:j], side if is_lower else None, None if is_lower else side))
    return out


Compare = Callable[[Any, Any], int]


def natural_order(t: CqlType) -> Compare:
    """The type's own order (what tuple relations compare by)."""

    def cmp(a: Any, b: Any) -> int:
        ka, kb = t.sort_key(a), t.sort_key(b)
        return -1 if ka < kb else (1 if kb < ka else 0)

    return cmp


def clustering_order(t: CqlType, descending: bool) -> Compare:
    """The column's clustering order (natural, reversed for DESC)."""
    nat = natural_order(t)
    return (lambda a, b: nat(b, a)) if descending else nat


def _tighter(cmp: Compare, a: Side, b: Side, lower: bool) -> Side:
    if a is None:
        return b
    if b is None:
        return a
    c = cmp(a[0], b[0])
    if c == 0:
        return (a[0], a[1] and b[1])
    return (a if c > 0 else b) if lower else (a if c < 0 else b)


def _within(cmp: Compare, v: Any, lower: Side, upper: Side) -> bool:
    if lower is not None:
        c = cmp(v, lower[0])
        if c < 0 or (c == 0 and not lower[1]):
            return False
    if upper is not None:
        c = cmp(v, upper[0])
        if c > 0 or (c == 0 and not upper[1]):
            return False
    return True


def _intersect(cmps: list[Compare], p: Piece, q: Piece) -> Piece | None:
    if len(p.prefix) > len(q.prefix):
        p, q = q, p
    i = len(p.prefix)
    pairs = zip(q.prefix[:i], p.prefix, strict=True)
    if any(cmps[k](a, b) != 0 for k, (a, b) in enumerate(pairs)):
        return None
    if len(q.prefix) > i:  # q fixes column i: it must lie in p's interval
        return q if _within(cmps[i], q.prefix[i], p.lower, p.upper) else None
    lower = _tighter(cmps[i], p.lower, q.lower, True)
    upper = _tighter(cmps[i], p.upper, q.upper, False)
    if lower is not None and upper is not None:
        c = cmps[i](lower[0], upper[0])
        if c > 0 or (c == 0 and not (lower[1] and upper[1])):
            return None
    return Piece(p.prefix, lower, upper)


def decompose(
    cmps: list[Compare],
    lo: tuple[tuple[Any, ...], bool] | None,
    hi: tuple[tuple[Any, ...], bool] | None,
) -> list[Piece]:
    """The tuples between ``lo`` and ``hi`` (lexicographic by ``cmps``) as disjoint pieces."""
    lows = _pieces(lo[0], lo[1], True) if lo is not None else [Piece((), None, None)]
    highs = _pieces(hi[0], hi[1], False) if hi is not None else [Piece((), None, None)]
    return [x for p in lows for q in highs if (x := _intersect(cmps, p, q)) is not None]


def tuple_slice_ranges(
    types: list[CqlType],
    descending: list[bool],
    lo: tuple[tuple[Any, ...], bool] | None,
    hi: tuple[tuple[Any, ...], bool] | None,
) -> list[tuple[Bound | None, Bound | None]]:
    """Ranges in clustering order (bounds relative to the columns of the relation)."""
    width = max(len(x[0]) for x in (lo, hi) if x is not None)
    if len(set(descending[:width])) == 1:
        start = None if lo is None else Bound(lo[0], lo[1])
        end = None if hi is None else Bound(hi[0], hi[1])
        return [(end, start)] if descending[0] else [(start, end)]
    pieces = decompose([natural_order(t) for t in types], lo, hi)
    out: list[tuple[Bound | None, Bound | None]] = []
    for piece in pieces:
        i = len(piece.prefix)
        first, last = (piece.upper, piece.lower) if descending[i] else (piece.lower, piece.upper)
        start = Bound((*piece.prefix, first[0]), first[1]) if first else Bound(piece.prefix, True)
        end = Bound((*piece.prefix, last[0]), last[1]) if last else Bound(piece.prefix, True)
        out.append((start, end))
    return out
