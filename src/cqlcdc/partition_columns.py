"""A one-partition SELECT of plain columns answered from the base rows' Arrow columns: no
``Partition`` and no row dicts are built, and the result keeps its columns as Arrow (the
server encodes them to the wire without Python values, as it does the CDC window reads').

It answers only when the rows read need nothing the row path's merge and tombstones
decide: each clustering row stored once, no residual (encoded) row, no row, range or
partition deletion, no static row; then a row is live when its marker or a cell is (a cell
with a value whose TTL has not run out), and a column's value is its live cell's. The
columns must be of types whose stored Arrow values are their CQL values as they are. For
anything else it says None, and the row path (``storage.select.evaluate``) answers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cql import ast
from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.physical import value_type
from cqlcdc.storage.base_rows import DELETION, FRAGMENT, MARKER, PARTITION_DELETION, STATIC, layout
from cqlcdc.storage.keys import ClusteringOrder
from cqlcdc.storage.select import ResultSet, result_columns, select_limit
from cqlcdc.storage.where import KeyRestrictions
from cqlcdc.types.base import TermContext

# types stored as their own Arrow values, read back as they are (``python_values``)
_PLAIN = frozenset(
    {"tinyint", "smallint", "int", "bigint", "text", "varchar", "ascii", "boolean", "blob"}
)


def partition_result(
    schema: TableSchema,
    stmt: ast.Select,
    res: KeyRestrictions,
    rows: pa.Table,
    now_s: int,
    ctx: TermContext | None,
) -> ResultSet | None:
    """The result of ``stmt`` (restricted to one partition, ``res``) over that partition's
    base ``rows``, or None when the row path must answer.

    Args:
        schema: the table.
        stmt: the SELECT, already checked (``storage.select.prepare``).
        res: its restrictions.
        rows: the partition's base rows, as read.
        now_s: the read's time (TTLs).
        ctx: the bound values (a bound LIMIT).
    """
    names = _plain_columns(schema, stmt, res)
    if names is None:
        return None
    lay = layout(schema)
    n = rows.num_rows
    for name in (FRAGMENT, DELETION, PARTITION_DELETION):
        if name in rows.column_names and rows[name].null_count != n:
            return None
    if STATIC in rows.column_names and n and pc.any(rows[STATIC]).as_py():
        return None
    keys = [rows[f].to_pylist() if f in rows.column_names else [None] * n for _, f in lay.keys]
    cks = list(zip(*keys, strict=True)) if keys else [()] * n
    if len(set(cks)) != n:
        return None  # a row stored more than once: the row path merges its cells
    live, cells = _liveness(rows, lay.values, now_s)
    order = ClusteringOrder(schema)
    ranked = sorted((i for i in range(n) if live[i]), key=lambda i: order.key(cks[i]))
    limit = select_limit(stmt.limit, ctx)
    if limit is not None:
        ranked = ranked[:limit]
    taken = pa.array(ranked, pa.int64())
    pk = dict(zip((c.name for c in schema.partition_key), res.partition_keys[0], strict=True))  # type: ignore[index]
    ck_columns = dict(zip((c.name for c, _ in lay.keys), keys, strict=True))
    columns: list[pa.Array | pa.ChunkedArray] = []
    for name in names:
        col = schema.column(name)
        assert col is not None
        stored = value_type(col.type)
        if name in pk:
            columns.append(pa.array([pk[name]] * len(ranked), stored))
        elif name in ck_columns:
            columns.append(pa.array([ck_columns[name][i] for i in ranked], stored))
        elif name in cells:
            columns.append(cells[name].take(taken).cast(stored))
        else:  # no cell of it read
            columns.append(pa.nulls(len(ranked), stored))
    out = result_columns(schema, stmt)
    table = pa.table(columns, names=[f"c{i}" for i in range(len(columns))])
    return ResultSet([n for n, _ in out], [t for _, t in out], table=table)


def _plain_columns(schema: TableSchema, stmt: ast.Select, res: KeyRestrictions) -> list[str] | None:
    """The selected columns when the statement and table are of the shape answered here:
    plain columns of plain types, one partition, no clustering restriction or filter, no
    ORDER BY, DISTINCT, JSON, GROUP BY or PER PARTITION LIMIT; a table without static,
    collection, dropped or per-row TTL columns."""
    if stmt.distinct or stmt.json or stmt.order_by or stmt.group_by:
        return None
    if stmt.per_partition_limit is not None:
        return None
    if res.partition_keys is None or len(res.partition_keys) != 1:
        return None
    if res.filters or res.ck_restricted_columns:
        return None
    if res.token_lower is not None or res.token_upper is not None:
        return None
    if schema.static_columns or schema.dropped or schema.ttl_column is not None:
        return None
    if layout(schema).collections:
        return None
    if not all(isinstance(s.expr, ast.ColumnRef) for s in stmt.selectors):
        return None
    names = (
        [c.name for c in schema.select_star_columns]
        if not stmt.selectors
        else [s.expr.name for s in stmt.selectors if isinstance(s.expr, ast.ColumnRef)]
    )
    for name in names:
        col = schema.column(name)
        if col is None or getattr(col.type, "cql_name", "") not in _PLAIN:
            return None
    if any(getattr(c.type, "cql_name", "") not in _PLAIN for c in schema.clustering_key):
        return None
    return names


def _liveness(
    rows: pa.Table, values: Any, now_s: int
) -> tuple[np.ndarray[Any, np.dtype[np.bool_]], dict[str, pa.Array]]:
    """Which rows are live (a live marker or a live cell), and each value column's values
    where its cell is live (null elsewhere), by column name."""
    n = rows.num_rows
    live = np.zeros(n, bool)
    if MARKER in rows.column_names:
        marker = rows[MARKER].combine_chunks()
        live |= _unexpired(marker, now_s)
    cells: dict[str, pa.Array] = {}
    for col, f in values:
        if f not in rows.column_names:
            continue
        column = rows[f].combine_chunks()
        value = column.field("value")
        alive = _unexpired(column, now_s) & value.is_valid().to_numpy(zero_copy_only=False)
        live |= alive
        cells[col.name] = pc.if_else(pa.array(alive), value, None)
    return live, cells


def _unexpired(struct: pa.StructArray, now_s: int) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Where the struct (a marker or a cell) is present and its expiry (0: none) is ahead."""
    present = struct.is_valid().to_numpy(zero_copy_only=False)
    expiry = struct.field("expiry").fill_null(0).to_numpy(zero_copy_only=False)
    return present & ((expiry == 0) | (expiry > now_s))  # type: ignore[no-any-return]


__all__ = ["partition_result"]
