"""What a write of CDC tables touches, as ScyllaDB's CDC counters classify it.

ScyllaDB's change visitor (``cdc/log.cc``) marks a part each time it meets one: a static
row with cells, a clustering row with a marker or cells, a non-frozen list, set, map or
UDT cell, a row tombstone, a range tombstone, a partition tombstone. A write is *split*
when its mutation needs ``should_split`` (``cqlcdc.cdc.changes.needs_split``). The counts
live in ``cqlcdc.observe.cdc_operations``; this module turns mutations into them, held by
the coordinator until the write's append settles (succeeded or failed). Whether they are
counted at all (a metrics endpoint serves them) is the caller's (``cqlcdc.writes``): the
core never imports the metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableSequence
from dataclasses import dataclass
from typing import Protocol

from cqlcdc.cdc.changes import needs_split, schema_order
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.cells import CollectionCells
from cqlcdc.storage.mutations import Mutation
from cqlcdc.storage.partition import Row
from cqlcdc.types import ListType, MapType, SetType, UserType

# ScyllaDB's part names, in its order (``stats::part_type``)
PARTS = (
    "static_row",
    "clustering_row",
    "map",
    "set",
    "list",
    "udt",
    "range_tombstone",
    "partition_delete",
    "row_delete",
)


@dataclass(frozen=True, slots=True)
class Operation:
    """What one write of CDC tables did (ScyllaDB's ``operation_details``)."""

    parts: frozenset[str]  # members of PARTS
    split: bool
    preimage: bool
    postimage: bool
    preimage_selects: int  # one per partition of a table with a preimage or postimage


class Coordinator(Protocol):
    """What this module needs of ``cqlcdc.coordinator.Coordinator`` (the core does not
    import the coordinator): the operations waiting for their append to settle."""

    @property
    def cdc_operations(self) -> MutableSequence[tuple[int, Operation, int]]: ...


def _has_images(schema: TableSchema) -> bool:
    return schema.cdc.preimage != "false" or schema.cdc.postimage


def _cell_parts(schema: TableSchema, row: Row, parts: set[str]) -> None:
    for name, data in row.cells.items():
        if not isinstance(data, CollectionCells):
            continue  # an atomic cell (frozen values too) or a counter
        column = schema.column(name)
        kind = column.type if column is not None else None
        if isinstance(kind, ListType):
            parts.add("list")
        elif isinstance(kind, SetType):
            parts.add("set")
        elif isinstance(kind, MapType):
            parts.add("map")
        elif isinstance(kind, UserType):
            parts.add("udt")


def write_operation(
    mutations: Iterable[Mutation], schemas: Mapping[str, TableSchema]
) -> Operation | None:
    """The operation one write (a statement or a batch) is to ScyllaDB's counters; None
    when it writes no CDC-enabled table (ScyllaDB does not augment it)."""
    parts: set[str] = set()
    split = preimage = postimage = False
    selects = 0
    cdc_write = False
    for m in mutations:
        schema = schemas[m.table_id]
        if not schema.cdc.enabled:
            continue
        cdc_write = True
        if _has_images(schema):
            selects += 1
        preimage |= schema.cdc.preimage != "false"
        postimage |= schema.cdc.postimage
        part = m.partition
        split |= needs_split(part, schema_order(schema))
        if part.static.cells:
            parts.add("static_row")
            _cell_parts(schema, part.static, parts)
        for row in part.rows.values():
            if row.marker is not None or row.cells:
                parts.add("clustering_row")
                _cell_parts(schema, row, parts)
            if row.deletion is not None:
                parts.add("row_delete")
        if part.range_tombstones:
            parts.add("range_tombstone")
        if part.deletion is not None:
            parts.add("partition_delete")
    if not cdc_write:
        return None
    return Operation(frozenset(parts), split, preimage, postimage, selects)


def note_write(
    coordinator: Coordinator,
    last_seq: int,
    mutations: Iterable[Mutation],
    schemas: Mapping[str, TableSchema],
) -> None:
    """Hold one write of the row path (its records end at ``last_seq``) for counting when
    its append settles (``Coordinator.make_durable``). Call with ``coordinator.lock`` held,
    before the records' append, and only while a metrics endpoint serves the counts."""
    op = write_operation(mutations, schemas)
    if op is not None:
        coordinator.cdc_operations.append((last_seq, op, 1))


def note_bulk(
    coordinator: Coordinator,
    last_seq: int,
    schema: TableSchema,
    row_deletes: int,
    upserts: int,
    split: int,
) -> None:
    """Hold bulk writes of one table (records ending at ``last_seq``) for counting, as
    :func:`note_write`: ``row_deletes`` row deletions and ``upserts`` writes of a clustering
    row's atomic columns (inserts, updates, cell deletions), ``split`` of which ScyllaDB
    splits (a TTL with a bound null: the tombstone has no TTL)."""
    if not schema.cdc.enabled:
        return
    selects = 1 if _has_images(schema) else 0
    pre, post = schema.cdc.preimage != "false", schema.cdc.postimage
    for parts, is_split, times in (
        (frozenset({"row_delete"}), False, row_deletes),
        (frozenset({"clustering_row"}), False, upserts - split),
        (frozenset({"clustering_row"}), True, split),
    ):
        if times:
            op = Operation(parts, is_split, pre, post, selects)
            coordinator.cdc_operations.append((last_seq, op, times))
