"""CDC log rows of bulk writes, column-wise (``cqlcdc.storage.bulk``).

With ``delta: 'full'`` and no images, the log row of a bulk write depends on the write
alone: one row per write (``cdc$batch_seq_no`` 0, ``cdc$end_of_batch`` true), UPDATE or
INSERT with the bound values and ``cdc$deleted_X`` for bound nulls, ROW_DELETE with the key,
UPDATE with ``cdc$deleted_X`` for a column DELETE; ``cdc$ttl`` is the write's TTL. That is a
projection of the chunk, computed here without a loop per write. One case splits into two
rows in ScyllaDB (a TTL together with a bound null: the tombstone carries no TTL), so
:func:`columnar_rows` leaves those writes to the log writer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cqlcdc.cdc.log_writer import OP_INSERT, OP_ROW_DELETE, OP_UPDATE
from cqlcdc.cdc.streams import Generations
from cqlcdc.schema.log_table import (
    BATCH_SEQ_NO,
    END_OF_BATCH,
    OPERATION,
    STREAM_ID,
    TICKS,
    TIME,
    TTL,
    deleted_column,
)
from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.physical import column_name, conform
from cqlcdc.storage.bulk import (
    KIND_CELL_DELETE,
    KIND_INSERT,
    KIND_ROW_DELETE,
    NOW,
    PK,
    SEED,
    SEQ,
    STMT,
    TOKEN,
    TS,
    BulkStatement,
)
from cqlcdc.storage.bulk import TTL as TTL_COLUMN
from cqlcdc.storage.vectorized import splitmix64, timeuuid_strings, timeuuid_time
from cqlcdc.types.arrow import NullColumns

_OPERATION = {
    KIND_INSERT: OP_INSERT,
    KIND_ROW_DELETE: OP_ROW_DELETE,
    KIND_CELL_DELETE: OP_UPDATE,
}


def columnar_rows(table: pa.Table, statements: Sequence[BulkStatement]) -> npt.NDArray[np.bool_]:
    """Which writes give exactly one log row (all but TTL'd writes binding a null)."""
    which = table.column(STMT).to_numpy()
    ttl = table.column(TTL_COLUMN).to_numpy()
    single = np.ones(table.num_rows, np.bool_)
    for i, stmt in enumerate(statements):
        if stmt.kind in (KIND_ROW_DELETE, KIND_CELL_DELETE) or not stmt.columns:
            continue
        rows = which == i
        has_null = np.zeros(table.num_rows, np.bool_)
        for c in stmt.columns:
            has_null |= table.column(c).is_null().to_numpy(zero_copy_only=False)
        single &= ~(rows & has_null & (ttl > 0))
    return single


def cdc_time_bits(
    seeds: npt.NDArray[np.uint64], records: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    """The first ``CdcTimeBits(seed, record).next64()`` of every write."""
    return splitmix64(splitmix64(seeds ^ records))


def bulk_log_rows(
    schema: TableSchema,
    log_schema: pa.Schema,
    table: pa.Table,
    statements: Sequence[BulkStatement],
    bucket: int,
    generations: Generations,
) -> pa.Table:
    """The log rows (``log_schema``: internal columns, then the log table's) of the writes
    in ``table``, every one of which :func:`columnar_rows` accepts."""
    n = table.num_rows
    which = table.column(STMT).to_numpy()
    kinds = np.array([s.kind for s in statements], np.int8)[which]
    ts = table.column(TS).to_numpy()
    seq = table.column(SEQ).to_numpy()
    now_s = table.column(NOW).to_numpy() // 1_000_000
    ttl = table.column(TTL_COLUMN).to_numpy().astype(np.int64)
    seeds = table.column(SEED).to_numpy().view(np.uint64)
    operation = np.full(n, OP_UPDATE, np.int8)
    for kind, op in _OPERATION.items():
        operation[kinds == kind] = op
    live = (kinds == 0) | (kinds == KIND_INSERT)
    log_ttl = schema.cdc.ttl_s
    columns: dict[str, pa.Array] = {
        "_bucket": pa.array(np.full(n, bucket, np.int32)),
        "_pk": table.column(PK).combine_chunks(),
        "_seq": pa.array(seq),
        "_expiry_s": pa.array(now_s + log_ttl if log_ttl else np.zeros(n, np.int64)),
        STREAM_ID: generations.stream_ids(table.column(TOKEN).to_numpy(), ts),
        TIME: timeuuid_strings(ts, cdc_time_bits(seeds, seq.view(np.uint64))),
        TICKS: pa.array(timeuuid_time(ts)),
        BATCH_SEQ_NO: pa.array(np.zeros(n, np.int32)),
        OPERATION: pa.array(operation),
        TTL: pa.array(ttl, mask=~(live & (ttl > 0))),
        END_OF_BATCH: pa.array(np.ones(n, np.bool_)),
    }
    for col in (*schema.partition_key, *schema.clustering_key):
        columns[column_name(schema, col.name)] = table.column(col.name).combine_chunks()
    for col in schema.value_columns:
        setters = [i for i, s in enumerate(statements) if col.name in s.columns]
        if not setters:
            continue
        deleted = np.zeros(n, np.bool_)
        bound = col.name in table.column_names
        nulls = (
            table.column(col.name).is_null().to_numpy(zero_copy_only=False)
            if bound
            else np.ones(n, np.bool_)
        )
        for i in setters:
            rows = which == i
            if statements[i].kind == KIND_CELL_DELETE:
                deleted |= rows
            else:
                deleted |= rows & nulls
        columns[column_name(schema, deleted_column(col.name))] = pa.array(deleted, mask=~deleted)
        if bound:
            columns[column_name(schema, col.name)] = table.column(col.name).combine_chunks()
    nulls = NullColumns(n)  # the columns no statement writes: shared per type
    arrays = [
        conform(columns[f.name], f.type) if f.name in columns else nulls(f.type) for f in log_schema
    ]
    return pa.Table.from_arrays(arrays, schema=log_schema)
