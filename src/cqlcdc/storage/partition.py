"""Partitions: the unit of state and of mutation (a mutation is a partition fragment).

Applying one partition to another is the last-write-wins merge; it is commutative and
idempotent, so state is simply the merge of every mutation ever applied. Shadowing by row,
range and partition tombstones is resolved when the live view is computed.

>>> p = Partition(pk=(0,)); p.static.cells["s"] = Cell(5, 1); p.is_empty()
False
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from cqlcdc.storage.cells import Cell, CollectionCells, CounterCell, RowMarker
from cqlcdc.storage.keys import Bound, ClusteringKey, ClusteringOrder

ColumnData = Cell | CollectionCells | CounterCell


@dataclass(slots=True)
class Row:
    """A clustering row (or the static row): marker, row tombstone and column data."""

    marker: RowMarker | None = None
    deletion: int | None = None
    cells: dict[str, ColumnData] = field(default_factory=dict)

    def __reduce__(self) -> tuple[type[Row], tuple[Any, ...]]:
        return (Row, (self.marker, self.deletion, self.cells))

    def is_empty(self) -> bool:
        return self.marker is None and self.deletion is None and not self.cells

    def copy(self) -> Row:
        return Row(
            self.marker,
            self.deletion,
            {k: (v.copy() if isinstance(v, CollectionCells) else v) for k, v in self.cells.items()},
        )

    def apply(self, other: Row) -> None:
        if other.marker is not None:
            self.marker = (
                other.marker if self.marker is None else self.marker.reconcile(other.marker)
            )
        if other.deletion is not None and (self.deletion is None or other.deletion > self.deletion):
            self.deletion = other.deletion
        for name, data in other.cells.items():
            mine = self.cells.get(name)
            if mine is None:
                self.cells[name] = data.copy() if isinstance(data, CollectionCells) else data
            elif isinstance(mine, CollectionCells) and isinstance(data, CollectionCells):
                mine.apply(data)
            elif isinstance(mine, Cell) and isinstance(data, Cell):
                self.cells[name] = mine.reconcile(data)
            elif isinstance(mine, CounterCell) and isinstance(data, CounterCell):
                self.cells[name] = mine.add(data)
            else:  # a column re-created with another kind: the newer write wins
                self.cells[name] = data


@dataclass(frozen=True, slots=True)
class RangeTombstone:
    """Deletes clustering rows between two bounds (an empty prefix means unbounded)."""

    start: Bound
    end: Bound
    timestamp: int


@dataclass(slots=True)
class Partition:
    """One partition's data or one mutation of it.

    ``rows`` is keyed by full clustering key (``()`` for tables without clustering columns).
    """

    pk: tuple[Any, ...]
    deletion: int | None = None
    static: Row = field(default_factory=Row)
    rows: dict[ClusteringKey, Row] = field(default_factory=dict)
    range_tombstones: list[RangeTombstone] = field(default_factory=list)

    def __reduce__(self) -> tuple[type[Partition], tuple[Any, ...]]:
        return (Partition, (self.pk, self.deletion, self.static, self.rows, self.range_tombstones))

    def is_empty(self) -> bool:
        return (
            self.deletion is None
            and self.static.is_empty()
            and not self.rows
            and not self.range_tombstones
        )

    def row(self, ck: ClusteringKey) -> Row:
        r = self.rows.get(ck)
        if r is None:
            r = self.rows[ck] = Row()
        return r

    def prune_empty(self) -> None:
        """Drop collections and rows a write left without content (``m = m + {}``)."""
        for row in [self.static, *self.rows.values()]:
            for name in [n for n, d in row.cells.items() if _is_empty(d)]:
                del row.cells[name]
        for ck in [k for k, r in self.rows.items() if r.is_empty()]:
            del self.rows[ck]

    def hide_dropped(
        self,
        dropped: Collection[str],
        statics: Collection[str],
        regulars: Collection[str],
        readded: Mapping[str, int],
    ) -> None:
        """Remove what belongs to ``dropped`` columns, as ScyllaDB ignores it at read time:
        their cells where the column is not one of ``statics`` (in the static row) or
        ``regulars`` (in the clustering rows), and, of a column added again after its drop,
        the cells at or below the drop's timestamp (``readded``). Rows left empty go."""
        _hide_dropped(self.static, dropped, statics, readded)
        for ck in list(self.rows):
            row = self.rows[ck]
            _hide_dropped(row, dropped, regulars, readded)
            if row.is_empty():
                del self.rows[ck]

    def copy(self) -> Partition:
        return Partition(
            self.pk,
            self.deletion,
            self.static.copy(),
            {k: r.copy() for k, r in self.rows.items()},
            list(self.range_tombstones),
        )

    def apply(self, other: Partition) -> None:
        """Merge ``other`` into this partition (last write wins, in place)."""
        if other.deletion is not None and (self.deletion is None or other.deletion > self.deletion):
            self.deletion = other.deletion
        self.static.apply(other.static)
        for ck, r in other.rows.items():
            mine = self.rows.get(ck)
            if mine is None:
                self.rows[ck] = r.copy()
            else:
                mine.apply(r)
        for rt in other.range_tombstones:
            if rt not in self.range_tombstones:
                self.range_tombstones.append(rt)

    # ------------------------------------------------------------------------------------
    # shadowing

    def row_shadow(
        self, ck: ClusteringKey, order: ClusteringOrder, include_row: bool = True
    ) -> int | None:
        """The highest tombstone timestamp covering clustering row ``ck``."""
        best = self.deletion
        for rt in self.range_tombstones:
            if (best is None or rt.timestamp > best) and order.in_range(ck, rt.start, rt.end):
                best = rt.timestamp
        row = self.rows.get(ck) if include_row else None
        if row is not None and row.deletion is not None and (best is None or row.deletion > best):
            best = row.deletion
        return best

    def compact(self, order: ClusteringOrder, now_s: int) -> None:
        """Drop data shadowed by tombstones (keeps the tombstones themselves).

        Expired cells are kept: they still shadow older data at their timestamp.
        """
        shadow = self.deletion
        _compact_row(self.static, shadow)
        for ck in list(self.rows):
            row = self.rows[ck]
            _compact_row(row, self.row_shadow(ck, order, include_row=False))
            if row.is_empty():
                del self.rows[ck]


def _hide_dropped(
    row: Row, dropped: Collection[str], names: Collection[str], readded: Mapping[str, int]
) -> None:
    for name in list(row.cells):
        if name not in names:
            if name in dropped:  # not hidden cells of the table's own (COMPACT STORAGE)
                del row.cells[name]
            continue
        at = readded.get(name)
        if at is None:
            continue
        data = row.cells[name]
        if isinstance(data, Cell | CounterCell):
            if data.timestamp <= at:
                del row.cells[name]
            continue
        elements = {k: c for k, c in data.elements.items() if c.timestamp > at}
        tombstone = data.tombstone if data.tombstone is not None and data.tombstone > at else None
        if elements or tombstone is not None:
            row.cells[name] = CollectionCells(tombstone, elements)
        else:
            del row.cells[name]


def _is_empty(data: ColumnData) -> bool:
    return isinstance(data, CollectionCells) and data.tombstone is None and not data.elements


def _compact_row(row: Row, outer: int | None) -> None:
    if row.deletion is not None and outer is not None and row.deletion <= outer:
        row.deletion = None
    shadow = max((t for t in (outer, row.deletion) if t is not None), default=None)
    if shadow is None:
        return
    if row.marker is not None and row.marker.timestamp <= shadow:
        row.marker = None
    for name in list(row.cells):
        data = row.cells[name]
        if isinstance(data, Cell | CounterCell):
            if data.timestamp <= shadow:
                del row.cells[name]
        else:
            if data.tombstone is not None and data.tombstone <= shadow:
                data.tombstone = None
            for key in [k for k, c in data.elements.items() if c.timestamp <= shadow]:
                del data.elements[key]
            if data.tombstone is None and not data.elements:
                del row.cells[name]
