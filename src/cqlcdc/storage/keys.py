"""Key order: clustering keys and prefixes compared as the table's CLUSTERING ORDER says.

A clustering key is a tuple of values; a bound is a prefix of one plus inclusiveness.

>>> Bound((1,), inclusive=True).prefix
(1,)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cqlcdc.schema.model import TableSchema
from cqlcdc.types.base import CqlType

ClusteringKey = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Bound:
    """One side of a clustering range: a key prefix (possibly empty: unbounded)."""

    prefix: ClusteringKey
    inclusive: bool = True


@dataclass(frozen=True, slots=True)
class _Reversed:
    key: Any

    def __lt__(self, other: _Reversed) -> bool:
        return bool(other.key < self.key)

    def __gt__(self, other: _Reversed) -> bool:
        return bool(other.key > self.key)

    def __le__(self, other: _Reversed) -> bool:
        return bool(other.key <= self.key)

    def __ge__(self, other: _Reversed) -> bool:
        return bool(other.key >= self.key)


class ClusteringOrder:
    """Sorts clustering keys and decides whether a key lies inside a range.

    Built once per table schema; the column types' ``sort_key`` give CQL comparator order and
    DESC columns are reversed.
    """

    def __init__(self, schema: TableSchema) -> None:
        cols = schema.clustering_key
        self._types: tuple[CqlType, ...] = tuple(c.type for c in cols)
        self._desc: tuple[bool, ...] = tuple(c.descending for c in cols)
        self.size = len(cols)

    def component_key(self, index: int, value: Any) -> Any:
        k = self._types[index].sort_key(value)
        return _Reversed(k) if self._desc[index] else k

    def key(self, ck: Sequence[Any]) -> tuple[Any, ...]:
        """Sort key of a full clustering key or a prefix (a prefix sorts before extensions,
        whatever the order; a null component ends the prefix: a dense COMPACT STORAGE row
        written under a prefix of its clustering key)."""
        out = []
        for i, v in enumerate(ck):
            if v is None:
                break
            out.append(self.component_key(i, v))
        return tuple(out)

    def compare_prefix(self, ck: Sequence[Any], prefix: Sequence[Any]) -> int:
        """-1/0/1: ``ck`` restricted to len(prefix) components vs the prefix."""
        for i, pv in enumerate(prefix):
            if i >= len(ck) or ck[i] is None:
                return -1  # a dense table's row under a shorter prefix sorts first
            a = self.component_key(i, ck[i])
            b = self.component_key(i, pv)
            if a < b:
                return -1
            if b < a:
                return 1
        return 0

    def after_start(self, ck: Sequence[Any], start: Bound | None) -> bool:
        if start is None or not start.prefix:
            return True
        c = self.compare_prefix(ck, start.prefix)
        return c > 0 or (c == 0 and start.inclusive)

    def before_end(self, ck: Sequence[Any], end: Bound | None) -> bool:
        if end is None or not end.prefix:
            return True
        c = self.compare_prefix(ck, end.prefix)
        return c < 0 or (c == 0 and end.inclusive)

    def in_range(self, ck: Sequence[Any], start: Bound | None, end: Bound | None) -> bool:
        return self.after_start(ck, start) and self.before_end(ck, end)

    def sorted(self, keys: Sequence[ClusteringKey]) -> list[ClusteringKey]:
        return sorted(keys, key=self.key)


def compare(a: Any, op: str, b: Any) -> bool:
    """``a op b`` for a slice operator (``<``, ``<=``, ``>``, ``>=``) on two sort keys
    (``CqlType.sort_key``), as restrictions, filters and conditions compare values."""
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)
