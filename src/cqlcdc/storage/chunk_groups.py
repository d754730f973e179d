"""A micro-batch's bulk chunks, decoded once and cut into its tables' buckets.

A chunk (``cqlcdc.storage.bulk``) holds a group of writes whatever buckets they touch, so
that its fixed costs (an Arrow table, an IPC stream, an ingest record, a decode) are paid
once per group; the pipeline's unit of work is a table's bucket. Here every chunk of a
batch is decoded once, a table's chunks are joined into one table with each write's schema
version and bucket, and each bucket gets its writes, in seq order, as a slice of it. A
chunk made before chunks had a bucket column is one bucket's: its record's.

>>> split_chunks(INGEST_SCHEMA.empty_table())  # doctest: +SKIP
{}
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.storage.bulk import (
    BUCKET_OF,
    SEQ,
    VERSION,
    BulkStatement,
    concat_chunks,
    decode_chunk,
    payload_views,
)


@dataclass(frozen=True, slots=True)
class BucketWrites:
    """The bulk writes of one table's bucket in a micro-batch.

    Attributes:
        table: one row per write (the chunk columns, ``NOW`` and ``VERSION``), in seq order.
        statements: the statements ``table``'s ``STMT`` column numbers.
        record_seqs: the first and last seq of the ingest records the writes came in (what
            a failure names: records, not writes, are what ``cqlcdc recover`` skips).
    """

    table: pa.Table
    statements: tuple[BulkStatement, ...]
    record_seqs: tuple[int, int]


def split_chunks(records: pa.Table) -> dict[tuple[str, int], BucketWrites]:
    """The writes of chunk records (ingest rows whose payloads are all chunks) by table id
    and bucket. Raises ``CorruptIngestFile`` on a damaged chunk."""
    table_ids = records.column("table_id").to_pylist()
    versions = records.column("schema_version").to_numpy()
    buckets = records.column("bucket").to_numpy()
    seqs = records.column("seq").to_numpy()
    views = payload_views(records.column("payload"))
    by_table: dict[str, list[int]] = {}
    for i, table_id in enumerate(table_ids):
        by_table.setdefault(table_id, []).append(i)
    out: dict[tuple[str, int], BucketWrites] = {}
    for table_id, rows in by_table.items():
        chunks = [decode_chunk(views[i]) for i in rows]
        writes, statements = concat_chunks(chunks)
        counts = [chunk.table.num_rows for chunk in chunks]
        at = np.array(rows, np.int64)
        of_record = np.repeat(buckets[at].astype(np.int32), counts)
        if BUCKET_OF in writes.column_names:
            bucket = np.asarray(
                pc.coalesce(writes.column(BUCKET_OF), pa.array(of_record)).to_numpy(), np.int32
            )
            writes = writes.drop_columns([BUCKET_OF])
        else:
            bucket = of_record
        record_seq = np.repeat(seqs[at], counts)
        writes = writes.append_column(
            VERSION, pa.array(np.repeat(versions[at].astype(np.int32), counts))
        )
        order = np.lexsort((writes.column(SEQ).to_numpy(), bucket))
        writes = writes.take(pa.array(order)).combine_chunks()
        bucket, record_seq = bucket[order], record_seq[order]
        bounds = (np.flatnonzero(np.diff(bucket)) + 1).tolist()
        for lo, hi in itertools.pairwise([0, *bounds, len(bucket)]):
            seqs_of = record_seq[lo:hi]
            out[(table_id, int(bucket[lo]))] = BucketWrites(
                writes.slice(lo, hi - lo),
                statements,
                (int(seqs_of.min()), int(seqs_of.max())),
            )
    return out
