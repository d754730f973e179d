"""Writes for tests: executions of prepared bulk statements as the session chunks them,
single writes as the row path builds them, and the row events of bulk writes.

>>> chunk_writes(schema, plans, [0, 1, 0], params)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.bulk_images import BulkChanges
from cqlcdc.changefeed.events import RowEvent
from cqlcdc.cql import ast
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.bulk import (
    KIND_INSERT,
    KIND_ROW_DELETE,
    BulkStatement,
    ChunkWrites,
    bound_columns,
    python_values,
)
from cqlcdc.storage.mutations import (
    Mutation,
    WriteContext,
    build_delete,
    build_insert,
    build_update,
)
from cqlcdc.storage.vectorized import splitmix64


def chunk_writes(
    schema: TableSchema,
    plans: Sequence[BulkStatement],
    which: Sequence[int],
    params: Sequence[tuple[Any, ...]],
    first_ts: int = 10_000,
) -> ChunkWrites:
    """Execution i runs ``plans[which[i]]`` with ``params[i]``, at timestamp ``first_ts + i``
    (or its statement's ``USING TIMESTAMP``), with seed ``splitmix64(i)``."""
    n = len(which)
    stmt = np.array(which, np.int8)
    timestamps = np.arange(first_ts, first_ts + n, dtype=np.int64)
    for i, plan in enumerate(plans):
        if plan.timestamp is not None:
            timestamps[stmt == i] = plan.timestamp
    tables = []
    for i, plan in enumerate(plans):
        positions = np.flatnonzero(stmt == i)
        columns = bound_columns(schema, plan, [params[j] for j in positions])
        assert columns is not None
        columns["_pos"] = pa.array(positions)
        tables.append(pa.table(columns))
    merged = pa.concat_tables(tables, promote_options="default")
    merged = merged.take(pc.sort_indices(merged.column("_pos"))).drop_columns(["_pos"])
    seeds = splitmix64(np.arange(n, dtype=np.uint64))
    return ChunkWrites(tuple(plans), stmt, merged, timestamps, seeds)


def row_mutation(schema: TableSchema, stmt: ast.Statement, ctx: WriteContext) -> Mutation:
    """The row path's mutation of one single-partition INSERT, UPDATE or DELETE."""
    if isinstance(stmt, ast.Insert):
        built = build_insert(schema, stmt, ctx, 0)
    elif isinstance(stmt, ast.Update):
        built = build_update(schema, stmt, ctx, 0)
    else:
        assert isinstance(stmt, ast.Delete)
        built = build_delete(schema, stmt, ctx)
    assert len(built) == 1
    return built[0]


def feed_events(
    schema: TableSchema,
    writes: pa.Table,
    statements: Sequence[BulkStatement],
    changes: BulkChanges,
) -> list[tuple[int, RowEvent]]:
    """Each write's row event (``cqlcdc.changefeed.events``) from ``bulk_changes``' before
    and after state, as ``(position in the bucket, event)`` in sorted order; a write that
    leaves its row absent before and after has none. The values are the Python values the
    row path holds (columns of the bulk types only). The tests check these events against
    the row path's and use them as the oracle of the column-wise feed records."""
    names = list(changes.columns)
    before_values: dict[str, list[Any]] = {}
    after_values: dict[str, list[Any]] = {}
    for name, (source, before, after) in changes.columns.items():
        if pa.types.is_timestamp(source.type):
            source = source.cast(pa.int64())
        before_values[name] = source.take(pa.array(before)).to_pylist()
        after_values[name] = source.take(pa.array(after)).to_pylist()
    columns_of = [sorted(s.columns) for s in statements]
    cks = [python_values(writes, c.name, schema) for c in schema.clustering_key]
    out: list[tuple[int, RowEvent]] = []
    live_before = changes.live_before.tolist()
    live_after = changes.live_after.tolist()
    kinds = changes.kind.tolist()
    stmts = changes.stmt.tolist()
    for k, position in enumerate(changes.order.tolist()):
        old = new = None
        if live_before[k]:
            old = {c: v for c in names if (v := before_values[c][k]) is not None}
        if live_after[k]:
            new = {c: v for c in names if (v := after_values[c][k]) is not None}
        if old is None and new is None:
            continue
        row_delete = kinds[k] == KIND_ROW_DELETE
        written = {} if row_delete else {c: (new or {}).get(c) for c in columns_of[stmts[k]]}
        event_kind: Literal["upsert", "erase"] = "upsert" if new is not None else "erase"
        ck = tuple(values[position] for values in cks)
        inserted = kinds[k] == KIND_INSERT
        out.append((position, RowEvent(ck, event_kind, old, new, written, inserted)))
    return out
