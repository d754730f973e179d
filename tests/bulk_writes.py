"""Writes for tests: executions of prepared bulk statements as the session chunks them, and
single writes as the row path builds them.

>>> chunk_writes(schema, plans, [0, 1, 0], params)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cql import ast
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.bulk import BulkStatement, ChunkWrites, bound_columns
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
