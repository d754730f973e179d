"""Where a write may hold the empty value (``types.values.EMPTY``), checked before it is
appended, so the pipeline never meets one it cannot store.

The base table keeps an empty value exactly (``storage.base_rows``: the residual row holds
what has it), in a partition key component, a clustering key column or an atomic column's
cell, as ScyllaDB does. Two places cannot, and refuse the write with a message naming the
column rather than store null in its place:

- an element of a non-frozen collection (a key or value of a map, a list element): its
  cells are typed (``types.base.not_empty`` already refuses one inside a frozen value);
- any column of a table with CDC or changefeeds: the log's and feeds' columns are typed,
  where an empty ``int`` would read back as null (docs/types.md, "The empty value").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.cells import Cell, CollectionCells
from cqlcdc.storage.mutations import ListOp, Mutation
from cqlcdc.storage.partition import Row
from cqlcdc.types.values import EMPTY


def _refuse(schema: TableSchema, column: str, why: str) -> InvalidRequest:
    col = schema.column(column)
    type_name = col.type.cql_name if col is not None else "?"
    return InvalidRequest(
        f"Empty value for {column} of type {type_name} is not supported {why} (docs/types.md)"
    )


def _logged(schema: TableSchema) -> bool:
    return schema.cdc.enabled or bool(schema.changefeeds)


def check_empty_values(schema: TableSchema, mutation: Mutation) -> None:
    """Refuse a write whose empty values cqlcdc cannot keep (module docstring).

    Raises:
        InvalidRequest: names the column and why.
    """
    part = mutation.partition
    logged = _logged(schema)
    where = "in a table with CDC or changefeeds"
    if logged:
        for col, v in zip(schema.partition_key, part.pk, strict=True):
            if v is EMPTY:
                raise _refuse(schema, col.name, where)
        keys: Iterable[tuple[Any, ...]] = [
            *part.rows,
            *(b for rt in part.range_tombstones for b in (rt.start.prefix, rt.end.prefix)),
        ]
        for ck in keys:
            for col, v in zip(schema.clustering_key, ck, strict=False):
                if v is EMPTY:
                    raise _refuse(schema, col.name, where)
    for row in (part.static, *part.rows.values()):
        _check_row(schema, row, logged)
    for op in mutation.list_ops:
        _check_list_op(schema, op)


def _check_row(schema: TableSchema, row: Row, logged: bool) -> None:
    for name, data in row.cells.items():
        if isinstance(data, Cell):
            if logged and data.value is EMPTY:
                raise _refuse(schema, name, "in a table with CDC or changefeeds")
        elif isinstance(data, CollectionCells):
            for key, cell in data.elements.items():
                if key is EMPTY or cell.value is EMPTY:
                    raise _refuse(schema, name, "as an element of a non-frozen collection")


def _check_list_op(schema: TableSchema, op: ListOp) -> None:
    if op.value is EMPTY or EMPTY in op.values:
        raise _refuse(schema, op.column, "as an element of a list or an operand")


__all__ = ["check_empty_values"]
