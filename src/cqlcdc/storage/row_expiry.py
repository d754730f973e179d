"""The deletion ScyllaDB's expiration scanner writes for rows past their per-row TTL.

A table with a TTL column (``cqlcdc.schema.row_ttl``) gets, at each expiration second a
write scheduled, a sweep of the partition: the rows whose TTL column has expired by then
are deleted, a row tombstone each (a partition tombstone in a table without clustering
key, as alternator/ttl.cc ``expire_item`` writes it). The log shows the deletion as
``cdc$operation`` -3 or -4 (``cdc::operation::service_row_delete`` /
``service_partition_delete``), with its preimage.
"""

from __future__ import annotations

from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.row_ttl import FIVE_YEARS_S, expiration_s, is_expired
from cqlcdc.storage.cells import Cell, CollectionCells, CounterCell
from cqlcdc.storage.partition import Partition, Row
from cqlcdc.storage.view import PartitionView


def _newest_timestamp(row: Row) -> int:
    newest = row.marker.timestamp if row.marker is not None else 0
    for data in row.cells.values():
        if isinstance(data, Cell | CounterCell):
            newest = max(newest, data.timestamp)
        elif isinstance(data, CollectionCells):
            if data.tombstone is not None:
                newest = max(newest, data.tombstone)
            newest = max([newest, *(c.timestamp for c in data.elements.values())])
    return newest


def row_ttl_deletion(schema: TableSchema, part: Partition | None, at_s: int) -> Partition | None:
    """The expiration deletion of ``part`` at second ``at_s`` (None: nothing expired).

    Its timestamp is the sweep's second, or just after the newest cell of a deleted row
    (a row inserted already expired carries its write's microseconds), so the deletion
    covers what the scanner would have read.
    """
    view = PartitionView(schema, expire_rows=False)
    if view.row_ttl is None or part is None:
        return None
    name, type_name = view.row_ttl
    doomed = [
        live.ck
        for live in view.clustering_rows(part, at_s)
        if live.ck is not None and is_expired(live.values.get(name), type_name, at_s)
    ]
    if not doomed:
        return None
    ts = max(
        at_s * 1_000_000,
        *(_newest_timestamp(part.rows[ck]) + 1 for ck in doomed),
    )
    out = Partition(part.pk)
    if not schema.clustering_key:
        out.deletion = ts
        return out
    for ck in doomed:
        out.row(ck).deletion = ts
    return out


def next_expiration(schema: TableSchema, part: Partition | None, after_s: int) -> int | None:
    """The earliest expiration second after ``after_s`` of a live row of ``part``: a sweep
    schedules the partition's next one, so rows that were there before ``ALTER TABLE ...
    TTL e`` (no write scheduled them) are swept in turn."""
    view = PartitionView(schema, expire_rows=False)
    if view.row_ttl is None or part is None:
        return None
    name, type_name = view.row_ttl
    due = [
        at
        for live in view.clustering_rows(part, after_s)
        if (at := expiration_s(live.values.get(name), type_name)) is not None and at > after_s
    ]
    return min(due, default=None)


def expiration_sweeps(schema: TableSchema, mutation: Partition, now_s: int) -> set[int]:
    """The seconds at which a write's TTL-column values call for a sweep (an expiration
    already past is swept at the next second; one more than five years past never)."""
    if schema.ttl_column is None:
        return set()
    column = schema.column(schema.ttl_column)
    if column is None:
        return set()
    out: set[int] = set()
    for row in mutation.rows.values():
        cell = row.cells.get(column.name)
        if not isinstance(cell, Cell) or cell.value is None:
            continue
        at = expiration_s(cell.value, column.type.cql_name)
        if at is not None and at > now_s - FIVE_YEARS_S:
            out.add(max(at, now_s + 1))
    return out


__all__ = ["expiration_sweeps", "next_expiration", "row_ttl_deletion"]
