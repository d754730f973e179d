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

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cql import ast
from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.physical import value_type
from cqlcdc.storage.base_rows import DELETION, FRAGMENT, MARKER, PARTITION_DELETION, STATIC, layout
from cqlcdc.storage.keys import ClusteringOrder
from cqlcdc.storage.select import ResultSet, plain_selection, result_columns, select_limit
from cqlcdc.storage.where import KeyRestrictions
from cqlcdc.types.base import TermContext

# types stored as their own Arrow values, read back as they are (``python_values``)
_PLAIN = frozenset(
    {"tinyint", "smallint", "int", "bigint", "text", "varchar", "ascii", "boolean", "blob"}
)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a statement's reads answered here share: worked out once per statement."""

    names: list[str]  # the selected columns
    stored: list[pa.DataType]  # each one's Arrow type in a result
    result: list[tuple[str, Any]]  # the result's column names and CQL types
    partition_key: list[str]
    keys: list[tuple[str, str]]  # each clustering column, its base rows column
    values: list[tuple[str, str]]  # each value column, its base rows column
    order: ClusteringOrder


# plans by the ids of the table schema and the statement (both kept, so an id is not reused
# while its plan is): a prepared statement's executions share its parsed statement
_PLANS: dict[tuple[int, int], tuple[TableSchema, ast.Select, _Plan | None]] = {}
_KEPT_PLANS = 1024


def _plan(schema: TableSchema, stmt: ast.Select) -> _Plan | None:
    key = (id(schema), id(stmt))
    known = _PLANS.get(key)
    if known is not None and known[0] is schema and known[1] is stmt:
        return known[2]
    names = _plain_columns(schema, stmt)
    plan = None
    if names is not None:
        lay = layout(schema)
        stored = []
        for name in names:
            col = schema.column(name)
            assert col is not None
            stored.append(value_type(col.type))
        plan = _Plan(
            names,
            stored,
            result_columns(schema, stmt),
            [c.name for c in schema.partition_key],
            [(c.name, f) for c, f in lay.keys],
            [(c.name, f) for c, f in lay.values],
            ClusteringOrder(schema),
        )
    if len(_PLANS) >= _KEPT_PLANS:
        _PLANS.clear()
    _PLANS[key] = (schema, stmt, plan)
    return plan


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
    if res.partition_keys is None or len(res.partition_keys) != 1:
        return None
    if res.filters or res.ck_restricted_columns:
        return None
    if res.token_lower is not None or res.token_upper is not None:
        return None
    plan = _plan(schema, stmt)
    if plan is None:
        return None
    n = rows.num_rows
    present = set(rows.column_names)
    for name in (FRAGMENT, DELETION, PARTITION_DELETION):
        if name in present and rows[name].null_count != n:
            return None
    if STATIC in present and n and rows[STATIC].to_numpy().any():
        return None
    keys = [rows[f].to_pylist() if f in present else [None] * n for _, f in plan.keys]
    cks = list(zip(*keys, strict=True)) if keys else [()] * n
    if len(set(cks)) != n:
        return None  # a row stored more than once: the row path merges its cells
    live, cells = _liveness(rows, plan.values, present, now_s)
    key = plan.order.key
    ranked = sorted((i for i in range(n) if live[i]), key=lambda i: key(cks[i]))
    limit = select_limit(stmt.limit, ctx)
    if limit is not None:
        ranked = ranked[:limit]
    taken = pa.array(ranked, pa.int64())
    pk = dict(zip(plan.partition_key, res.partition_keys[0], strict=True))
    ck_columns = dict(zip((name for name, _ in plan.keys), keys, strict=True))
    columns: list[pa.Array | pa.ChunkedArray] = []
    for name, stored in zip(plan.names, plan.stored, strict=True):
        if name in pk:
            columns.append(pa.array([pk[name]] * len(ranked), stored))
        elif name in ck_columns:
            columns.append(pa.array([ck_columns[name][i] for i in ranked], stored))
        elif name in cells:
            value, alive = cells[name]
            value = value.take(taken)
            if not alive[ranked].all():
                value = pc.if_else(pa.array(alive[ranked]), value, None)
            columns.append(value if value.type == stored else value.cast(stored))
        else:  # no cell of it read
            columns.append(pa.nulls(len(ranked), stored))
    table = pa.table(columns, names=[f"c{i}" for i in range(len(columns))])
    return ResultSet([n for n, _ in plan.result], [t for _, t in plan.result], table=table)


def _plain_columns(schema: TableSchema, stmt: ast.Select) -> list[str] | None:
    """The selected columns when the statement and table are of the shape answered here:
    plain columns of plain types, no ORDER BY, DISTINCT, JSON, GROUP BY or PER PARTITION
    LIMIT; a table without static, collection, counter, dropped or per-row TTL columns."""
    if schema.static_columns or schema.dropped or schema.ttl_column is not None:
        return None
    if layout(schema).collections:
        return None
    if any(getattr(c.type, "cql_name", "") == "counter" for c in schema.columns):
        return None  # counter cells merge by shards, not by timestamp
    names = plain_selection(schema, stmt)
    if names is None:
        return None
    for name in names:
        col = schema.column(name)
        if col is None or getattr(col.type, "cql_name", "") not in _PLAIN:
            return None
    if any(getattr(c.type, "cql_name", "") not in _PLAIN for c in schema.clustering_key):
        return None
    return names


def _liveness(
    rows: pa.Table, values: list[tuple[str, str]], present: set[str], now_s: int
) -> tuple[npt.NDArray[np.bool_], dict[str, tuple[pa.Array, npt.NDArray[np.bool_]]]]:
    """Which rows are live (a live marker or a live cell), and each value column's values
    with where its cell is live, by column name."""
    n = rows.num_rows
    live = np.zeros(n, bool)
    if MARKER in present:
        live |= _unexpired(rows[MARKER].combine_chunks(), now_s)
    cells: dict[str, tuple[pa.Array, npt.NDArray[np.bool_]]] = {}
    for name, f in values:
        if f not in present:
            continue
        column = rows[f].combine_chunks()
        value = column.field("value")
        alive = _unexpired(column, now_s)
        if value.null_count:
            alive &= value.is_valid().to_numpy(zero_copy_only=False)
        live |= alive
        cells[name] = (value, alive)
    return live, cells


def _unexpired(struct: pa.StructArray, now_s: int) -> npt.NDArray[np.bool_]:
    """Where the struct (a marker or a cell) is present and its expiry (0: none) is ahead."""
    present: npt.NDArray[np.bool_] = np.ones(len(struct), bool)
    if struct.null_count:
        present = struct.is_valid().to_numpy(zero_copy_only=False)
    expiry = struct.field("expiry")
    if expiry.null_count:
        expiry = expiry.fill_null(0)
    at = expiry.to_numpy(zero_copy_only=False)
    alive: npt.NDArray[np.bool_] = present & ((at == 0) | (at > now_s))
    return alive


__all__ = ["partition_result"]
