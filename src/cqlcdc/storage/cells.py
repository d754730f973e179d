"""Cells, tombstones and row markers: the units of last-write-wins state.

A cell carries its write timestamp (microseconds), its value (None for a tombstone) and, when
written with a TTL, the TTL and the second at which it expires. Reconciliation follows
Cassandra/ScyllaDB: the higher timestamp wins; on a tie a tombstone beats a live cell, then the
later expiry, then the larger serialized value.

>>> Cell(10, 1).reconcile(Cell(10, None)).value is None
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cqlcdc.types.values import EMPTY


@dataclass(frozen=True, slots=True)
class Cell:
    """An atomic cell (or one element of a non-frozen collection / UDT field).

    ``value`` None means a tombstone (a deleted cell). ``expiry_s`` is the expiry second for
    a TTL'd live cell (0: never expires).
    """

    timestamp: int
    value: Any
    ttl_s: int = 0
    expiry_s: int = 0

    def __reduce__(self) -> tuple[type[Cell], tuple[int, Any, int, int]]:
        # positional pickling: the dataclass default walks fields() on every cell
        return (Cell, (self.timestamp, self.value, self.ttl_s, self.expiry_s))

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    def is_live(self, now_s: int) -> bool:
        return self.value is not None and (self.expiry_s == 0 or self.expiry_s > now_s)

    def remaining_ttl(self, now_s: int) -> int | None:
        if self.value is None or self.expiry_s == 0:
            return None
        return max(self.expiry_s - now_s, 0)

    def reconcile(self, other: Cell) -> Cell:
        """The cell that survives when both are written to the same place."""
        if self.timestamp != other.timestamp:
            return self if self.timestamp > other.timestamp else other
        if self.is_tombstone != other.is_tombstone:
            return self if self.is_tombstone else other
        if self.expiry_s != other.expiry_s:
            # a non-expiring cell counts as expiring last
            mine = self.expiry_s or (1 << 62)
            theirs = other.expiry_s or (1 << 62)
            return self if mine > theirs else other
        if self.value == other.value:
            return self
        if self.value is EMPTY or other.value is EMPTY:  # no bytes: the least value
            return other if self.value is EMPTY else self
        return self if repr(self.value) >= repr(other.value) else other


_INT64_SPAN = 1 << 64
_INT64_MIN = -(1 << 63)


def wrap_int64(value: int) -> int:
    """``value`` in two's complement 64 bits, as a counter holds it: ScyllaDB adds a delta
    to a counter shard through ``uint64_t`` (``counter_shard::update`` in counters.hh, "signed
    int overflow is undefined hence the cast") and Cassandra in Java ``long``, so an
    overflowing increment wraps and the row stays readable (a value outside 64 bits could
    not be stored or sent).

    >>> wrap_int64((1 << 63) - 1 + 1)
    -9223372036854775808
    """
    return (value - _INT64_MIN) % _INT64_SPAN + _INT64_MIN


@dataclass(frozen=True, slots=True)
class CounterCell:
    """A counter column: the sum of every increment applied to it.

    Counters merge by addition, not last-write-wins; each mutation carries its own delta and
    the state is the merge of every mutation exactly once (the pipeline guarantees that).
    """

    timestamp: int
    value: int

    def is_live(self, now_s: int) -> bool:
        return True

    @property
    def is_tombstone(self) -> bool:
        return False

    @property
    def ttl_s(self) -> int:
        return 0

    def remaining_ttl(self, now_s: int) -> int | None:
        return None

    def add(self, other: CounterCell) -> CounterCell:
        total = wrap_int64(self.value + other.value)
        return CounterCell(max(self.timestamp, other.timestamp), total)


@dataclass(frozen=True, slots=True)
class RowMarker:
    """The invisible liveness column an INSERT writes (basic operations spec)."""

    timestamp: int
    ttl_s: int = 0
    expiry_s: int = 0

    def __reduce__(self) -> tuple[type[RowMarker], tuple[int, int, int]]:
        return (RowMarker, (self.timestamp, self.ttl_s, self.expiry_s))

    def is_live(self, now_s: int) -> bool:
        return self.expiry_s == 0 or self.expiry_s > now_s

    def reconcile(self, other: RowMarker) -> RowMarker:
        if self.timestamp != other.timestamp:
            return self if self.timestamp > other.timestamp else other
        mine = self.expiry_s or (1 << 62)
        theirs = other.expiry_s or (1 << 62)
        return self if mine >= theirs else other


@dataclass(slots=True)
class CollectionCells:
    """A non-frozen collection or UDT column: a collection-wide tombstone plus element cells.

    ``elements`` maps the element key (map key, set element, list timeuuid, UDT field index)
    to its cell; for sets the cell value is ``True``.
    """

    tombstone: int | None = None
    elements: dict[Any, Cell] = field(default_factory=dict)

    def __reduce__(self) -> tuple[type[CollectionCells], tuple[int | None, dict[Any, Cell]]]:
        return (CollectionCells, (self.tombstone, self.elements))

    def copy(self) -> CollectionCells:
        return CollectionCells(self.tombstone, dict(self.elements))

    def apply(self, other: CollectionCells) -> None:
        if other.tombstone is not None and (
            self.tombstone is None or other.tombstone > self.tombstone
        ):
            self.tombstone = other.tombstone
        for key, cell in other.elements.items():
            mine = self.elements.get(key)
            self.elements[key] = cell if mine is None else mine.reconcile(cell)

    def live_elements(self, now_s: int, shadow: int | None) -> dict[Any, Cell]:
        """Elements alive at ``now_s``, not covered by this column's or an outer tombstone."""
        limit = (
            max(t for t in (self.tombstone, shadow) if t is not None)
            if (self.tombstone is not None or shadow is not None)
            else None
        )
        return {
            k: c
            for k, c in self.elements.items()
            if c.is_live(now_s) and (limit is None or c.timestamp > limit)
        }
