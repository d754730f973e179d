"""Splitting a mutation into CDC changes, as ScyllaDB's ``cdc/split.cc`` does.

A mutation with one timestamp, one TTL and one kind of change is logged as it is; otherwise it
is split into groups by timestamp (a collection tombstone at T counts as T+1), each group into
static updates, clustered inserts, clustered updates, row deletions, range deletions and a
partition deletion, each ordered by clustering key then TTL.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.cells import Cell, CollectionCells, CounterCell, RowMarker
from cqlcdc.storage.keys import ClusteringKey, ClusteringOrder
from cqlcdc.storage.partition import Partition, RangeTombstone, Row


@dataclass(slots=True)
class RowChange:
    """The cells one log delta row describes (one row, one timestamp, one TTL).

    ``atomic`` maps column -> cell (live or dead); ``collections`` maps column -> the
    collection tombstone (or None) and element cells.
    """

    ck: ClusteringKey | None
    ttl_s: int = 0
    marker: RowMarker | None = None
    atomic: dict[str, Cell] = field(default_factory=dict)
    collections: dict[str, CollectionCells] = field(default_factory=dict)

    @property
    def columns(self) -> set[str]:
        return set(self.atomic) | set(self.collections)


@dataclass(slots=True)
class ChangeGroup:
    """All changes of one timestamp (one ``cdc$time``), by kind."""

    static_updates: list[RowChange] = field(default_factory=list)
    inserts: list[RowChange] = field(default_factory=list)
    updates: list[RowChange] = field(default_factory=list)
    row_deletions: list[ClusteringKey] = field(default_factory=list)
    range_deletions: list[RangeTombstone] = field(default_factory=list)
    partition_deletion: bool = False


def _cell_ttl(cell: Cell) -> int:
    return cell.ttl_s if cell.value is not None and cell.ttl_s else 0


def _bucket_row(row: Row) -> dict[tuple[int, int], RowChange]:
    """A row's cells bucketed by (timestamp, ttl); columns visited in name order."""
    out: dict[tuple[int, int], RowChange] = {}

    def entry(ts: int, ttl: int) -> RowChange:
        e = out.get((ts, ttl))
        if e is None:
            e = out[(ts, ttl)] = RowChange(None, ttl)
        return e

    for name in sorted(row.cells):
        data = row.cells[name]
        if isinstance(data, CounterCell):
            continue  # CDC is never enabled on counter tables
        if isinstance(data, Cell):
            entry(data.timestamp, _cell_ttl(data)).atomic[name] = data
            continue
        if data.tombstone is not None:
            e = entry(data.tombstone + 1, 0)
            e.collections.setdefault(name, CollectionCells()).tombstone = data.tombstone
        for key, cell in data.elements.items():
            e = entry(cell.timestamp, _cell_ttl(cell))
            e.collections.setdefault(name, CollectionCells()).elements[key] = cell
    return out


def extract_changes(part: Partition, order: ClusteringOrder) -> dict[int, ChangeGroup]:
    """Group a mutation's changes by timestamp (``extract_changes`` in split.cc)."""
    groups: dict[int, ChangeGroup] = defaultdict(ChangeGroup)
    for (ts, ttl), change in sorted(_bucket_row(part.static).items()):
        change.ttl_s = ttl
        groups[ts].static_updates.append(change)
    for ck in order.sorted(list(part.rows)):
        row = part.rows[ck]
        buckets = _bucket_row(row)
        marker = row.marker
        if marker is not None:
            mttl = marker.ttl_s
            buckets.setdefault((marker.timestamp, mttl), RowChange(None, mttl))
        for (ts, ttl), change in sorted(buckets.items()):
            change.ck = ck
            change.ttl_s = ttl
            if marker is not None and ts == marker.timestamp and ttl == marker.ttl_s:
                insert = RowChange(ck, ttl, marker, change.atomic)
                groups[ts].inserts.append(insert)
                update: RowChange | None = None
                for name, coll in change.collections.items():
                    if coll.tombstone is not None:
                        insert.collections[name] = coll
                    else:
                        # an INSERT cannot add collection cells without a tombstone
                        if update is None:
                            update = RowChange(ck, ttl)
                            groups[ts].updates.append(update)
                        update.collections[name] = coll
            else:
                groups[ts].updates.append(change)
        if row.deletion is not None:
            groups[row.deletion].row_deletions.append(ck)
    for rt in part.range_tombstones:
        groups[rt.timestamp].range_deletions.append(rt)
    if part.deletion is not None:
        groups[part.deletion].partition_deletion = True
    return dict(sorted(groups.items()))


def needs_split(part: Partition, order: ClusteringOrder) -> bool:
    """True unless the mutation has one timestamp, one TTL and one kind of change.

    Mirrors ``should_split_visitor``: the visit order is the static row, then each clustering
    row (marker, cells by column, row tombstone), then range tombstones, then the partition
    tombstone.
    """
    state: dict[str, Any] = {"ts": None, "ttl": None}

    def visit(ts: int, ttl: int = 0) -> bool:
        if state["ts"] is not None and state["ts"] != ts:
            return True
        state["ts"] = ts
        if state["ttl"] is not None and state["ttl"] != ttl:
            return True
        state["ttl"] = ttl
        return False

    def visit_cells(row: Row, had_marker: bool) -> bool:
        for name in sorted(row.cells):
            data = row.cells[name]
            if isinstance(data, CounterCell):
                continue
            if isinstance(data, Cell):
                if visit(data.timestamp, _cell_ttl(data)):
                    return True
                continue
            if data.tombstone is not None and visit(data.tombstone + 1):
                return True
            for cell in data.elements.values():
                if cell.value is not None and had_marker:
                    return True  # collection additions cannot be expressed by an INSERT
                if visit(cell.timestamp, _cell_ttl(cell)):
                    return True
        return False

    had_static = bool(part.static.cells)
    if had_static and visit_cells(part.static, False):
        return True
    had_clustered = had_upsert = had_range = False
    for ck in order.sorted(list(part.rows)):
        row = part.rows[ck]
        if row.marker is not None or row.cells:
            if had_static:
                return True
            had_clustered = had_upsert = True
            had_marker = False
            if row.marker is not None:
                had_marker = True
                if visit(row.marker.timestamp, row.marker.ttl_s):
                    return True
            if visit_cells(row, had_marker):
                return True
        if row.deletion is not None:
            if had_static or had_upsert:
                return True
            had_clustered = True
            if visit(row.deletion):
                return True
    for rt in part.range_tombstones:
        if had_static or had_clustered:
            return True
        had_range = True
        if visit(rt.timestamp):
            return True
    if part.deletion is not None and (had_range or had_static or had_clustered):
        return True
    return state["ts"] is None


def find_timestamp(part: Partition) -> int:
    """The single timestamp of an unsplit mutation (collection tombstones count as T+1)."""
    for row in [part.static, *part.rows.values()]:
        if row.marker is not None:
            return row.marker.timestamp
        for data in row.cells.values():
            if isinstance(data, Cell | CounterCell):
                return data.timestamp
            if data.tombstone is not None:
                return data.tombstone + 1
            for cell in data.elements.values():
                return cell.timestamp
        if row.deletion is not None:
            return row.deletion
    for rt in part.range_tombstones:
        return rt.timestamp
    if part.deletion is not None:
        return part.deletion
    raise ValueError("cdc: could not find timestamp of mutation")


def schema_order(schema: TableSchema) -> ClusteringOrder:
    return ClusteringOrder(schema)
