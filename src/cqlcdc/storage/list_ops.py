"""Positional list operations, resolved against the partition's current state.

``l[i] = v``, ``DELETE l[i]`` and ``l = l - [...]`` need the list as it is before the write
(advanced column types spec, "Deleting elements"): ScyllaDB reads first, then writes cells
under the keys it found. The pipeline does the same with its state, so the keys revealed in the
log are the real ones.
"""

from __future__ import annotations

from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.cells import Cell, CollectionCells
from cqlcdc.storage.keys import ClusteringOrder
from cqlcdc.storage.mutations import ListOp
from cqlcdc.storage.partition import Partition
from cqlcdc.storage.uuids import timeuuid_sort_key


def _current_list(
    state: Partition | None, op: ListOp, order: ClusteringOrder, now_s: int
) -> list[tuple[object, Cell]]:
    if state is None:
        return []
    if op.ck is None:
        row = state.static
        shadow = state.deletion
    else:
        row_ = state.rows.get(op.ck)
        if row_ is None:
            return []
        row = row_
        shadow = state.row_shadow(op.ck, order)
    data = row.cells.get(op.column)
    if not isinstance(data, CollectionCells):
        return []
    live = data.live_elements(now_s, shadow)
    return sorted(live.items(), key=lambda kv: timeuuid_sort_key(kv[0]))


# the range of each fixed-width integer type (a result outside it overflows)
_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}


def _arithmetic(
    schema: TableSchema,
    mutation: Partition,
    op: ListOp,
    state: Partition | None,
    order: ClusteringOrder,
    now_s: int,
) -> None:
    """``r = r + v`` / ``r = r - v``: the column's live value before the write, plus or
    minus ``v``, written as the statement's cell; null (no value, or a null operand) stays
    null, written as a tombstone, as ScyllaDB's setter writes it.

    Raises:
        InvalidRequest: the result does not fit a fixed-width integer (ScyllaDB's message).
    """
    column = schema.column(op.column)
    assert column is not None
    current: object = None
    if state is not None:
        row = state.static if op.ck is None else state.rows.get(op.ck)
        shadow = state.deletion if op.ck is None else state.row_shadow(op.ck, order)
        cell = None if row is None else row.cells.get(op.column)
        if (
            isinstance(cell, Cell)
            and cell.is_live(now_s)
            and (shadow is None or cell.timestamp > shadow)
        ):
            current = cell.value
    result: object = None
    if current is not None and op.value is not None:
        result = current + op.value if op.kind == "add" else current - op.value
        bits = _BITS.get(column.type.cql_name)
        if bits is not None and not -(2 ** (bits - 1)) <= result < 2 ** (bits - 1):
            raise InvalidRequest(f"Arithmetic {op.kind.upper()} overflow")
        result = column.type.validate(result, op.column)
    target = mutation.static if op.ck is None else mutation.row(op.ck)
    target.cells[op.column] = (
        Cell(op.timestamp, None)
        if result is None
        else Cell(op.timestamp, result, op.ttl_s, op.expiry_s)
    )


def resolve_list_ops(
    schema: TableSchema,
    mutation: Partition,
    ops: tuple[ListOp, ...],
    state: Partition | None,
    now_s: int,
) -> None:
    """Turn each ListOp into element cells of ``mutation`` (in place).

    Raises:
        InvalidRequest: an index is out of the list's bounds (ScyllaDB's message).
    """
    order = ClusteringOrder(schema)
    for op in ops:
        if op.kind in ("add", "sub"):
            _arithmetic(schema, mutation, op, state, order, now_s)
            continue
        current = _current_list(state, op, order, now_s)
        row = mutation.static if op.ck is None else mutation.row(op.ck)
        coll = row.cells.get(op.column)
        if not isinstance(coll, CollectionCells):
            coll = row.cells[op.column] = CollectionCells()
        if op.kind == "discard":
            doomed = {k: Cell(op.timestamp, None) for k, c in current if c.value in op.values}
            coll.apply(CollectionCells(None, doomed))
            continue
        if op.index < 0 or op.index >= len(current):
            raise InvalidRequest(
                f"List index {op.index} out of bound, list has size {len(current)}"
            )
        key = current[op.index][0]
        if op.kind == "delete_index" or op.value is None:
            cell = Cell(op.timestamp, None)
        else:
            cell = Cell(op.timestamp, op.value, op.ttl_s, op.expiry_s)
        coll.apply(CollectionCells(None, {key: cell}))
    mutation.prune_empty()
