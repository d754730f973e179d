"""Row events: what one write did to each CQL row, with full before and after images.

Changefeeds are built from these (one record per row change). They come from the pipeline's
state, so a range or partition delete yields one erase event per row it actually removed,
and an OLD_IMAGE needs no extra read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.keys import ClusteringKey, ClusteringOrder
from cqlcdc.storage.partition import ColumnData, Partition
from cqlcdc.storage.view import PartitionView


@dataclass(frozen=True, slots=True)
class RowEvent:
    """One row's change by one write.

    Attributes:
        ck: the clustering key (``()`` for tables without one); None for the static row.
        kind: ``upsert`` when the row exists after the write, ``erase`` when it does not.
        old: the row's live non-key values before the write (None: it did not exist).
        new: the live non-key values after the write (None: it does not exist).
        written: the columns the write set, with their values after the write (a
            non-frozen collection shows its resulting value; a deleted column None).
        inserted: the write carried a row marker (an INSERT).
        expired: an erase caused by TTL expiry rather than by a write.
    """

    ck: ClusteringKey | None
    kind: Literal["upsert", "erase"]
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    written: dict[str, Any]
    inserted: bool = False
    expired: bool = False


def _touched_columns(cells: dict[str, ColumnData]) -> list[str]:
    return sorted(cells)


def row_events(
    schema: TableSchema,
    prior: Partition | None,
    mutation: Partition,
    after: Partition,
    now_s: int,
    order: ClusteringOrder | None = None,
) -> list[RowEvent]:
    """The row events of ``mutation`` applied to ``prior`` giving ``after``.

    Rows are the static row (if the write touched a static column or deleted the partition
    and it had one), every clustering row the write names, and every existing row a range
    or partition tombstone of the write covers; in clustering order, static first. A row
    that neither existed before nor exists after produces no event.
    """
    order = order or ClusteringOrder(schema)
    view = PartitionView(schema, order)
    before = prior if prior is not None else Partition(mutation.pk)
    events: list[RowEvent] = []

    def values(part: Partition, ck: ClusteringKey | None) -> dict[str, Any] | None:
        live = view.static_row(part, now_s) if ck is None else view.clustering_row(part, ck, now_s)
        return None if live is None else dict(live.values)

    def emit(ck: ClusteringKey | None, written_cols: list[str], inserted: bool) -> None:
        old = values(before, ck)
        new = values(after, ck)
        if old is None and new is None:
            return
        written = {c: (new or {}).get(c) for c in written_cols}
        kind: Literal["upsert", "erase"] = "upsert" if new is not None else "erase"
        events.append(RowEvent(ck, kind, old, new, written, inserted))

    if mutation.static.cells or (mutation.deletion is not None and schema.static_columns):
        emit(None, _touched_columns(mutation.static.cells), False)
    touched: set[ClusteringKey] = set(mutation.rows)
    if mutation.deletion is not None or mutation.range_tombstones:
        for ck in before.rows:
            if ck in touched:
                continue
            if mutation.deletion is not None or any(
                order.in_range(ck, rt.start, rt.end) for rt in mutation.range_tombstones
            ):
                touched.add(ck)
    for ck in order.sorted(list(touched)):
        row = mutation.rows.get(ck)
        cols = _touched_columns(row.cells) if row is not None else []
        emit(ck, cols, row is not None and row.marker is not None)
    return events


def snapshot_events(schema: TableSchema, state: Partition | None, now_s: int) -> list[RowEvent]:
    """Every live row of a partition as an upsert with no old image (an initial scan)."""
    if state is None:
        return []
    view = PartitionView(schema)
    events: list[RowEvent] = []
    static = view.static_row(state, now_s)
    if static is not None:
        events.append(RowEvent(None, "upsert", None, dict(static.values), {}))
    for live in view.clustering_rows(state, now_s):
        events.append(RowEvent(live.ck, "upsert", None, dict(live.values), {}))
    return events


def expiry_events(
    schema: TableSchema, state: Partition | None, before_s: int, at_s: int
) -> list[RowEvent]:
    """What TTL expiry did to a partition between two moments (no write involved).

    A row whose last live cell or marker expired is an erase; a row that lost only some
    columns is an upsert whose ``written`` lists them as null. Both are marked ``expired``.
    """
    if state is None:
        return []
    view = PartitionView(schema)
    events: list[RowEvent] = []
    keys: list[ClusteringKey | None] = [None, *view.order.sorted(list(state.rows))]
    for ck in keys:
        if ck is None:
            old_row = view.static_row(state, before_s)
            new_row = view.static_row(state, at_s)
        else:
            old_row = view.clustering_row(state, ck, before_s)
            new_row = view.clustering_row(state, ck, at_s)
        if old_row is None:
            continue
        old = dict(old_row.values)
        new = None if new_row is None else dict(new_row.values)
        if new == old:
            continue
        gone = {c: None for c in old if new is None or c not in new}
        kind: Literal["upsert", "erase"] = "erase" if new is None else "upsert"
        events.append(RowEvent(ck, kind, old, new, gone, False, True))
    return events
