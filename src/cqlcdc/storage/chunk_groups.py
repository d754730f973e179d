"""A micro-batch's bulk chunks, decoded once and cut into its tables' buckets.

A chunk (``cqlcdc.storage.bulk``) holds a group of writes whatever buckets they touch, so
that its fixed costs (an Arrow table, an IPC stream, an ingest record, a decode) are paid
once per group; the pipeline's unit of work is a table's bucket. Here every chunk of a
batch is decoded once and cut by its bucket column, and each bucket gets its pieces of the
chunks joined in seq order, with each write's schema version. A chunk made before chunks
had a bucket column is one bucket's: its record's.

>>> split_chunks(INGEST_SCHEMA.empty_table())  # doctest: +SKIP
{}
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cqlcdc.storage.bulk import (
    BUCKET_OF,
    SEQ,
    VERSION,
    BulkStatement,
    Chunk,
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
    and bucket. Raises ``CorruptIngestFile`` on a damaged chunk.

    A chunk's writes come bucket by bucket, each bucket's in seq order, and a chunk's seqs
    are a range no other chunk's overlap: so a bucket's writes are its pieces of every
    chunk (a whole chunk of one bucket, or a slice of one spanning buckets) joined in the
    order of their seqs, and no batch-wide sort or copy is needed (a bulk load's batch is
    millions of writes in chunks of one bucket each).
    """
    table_ids = records.column("table_id").to_pylist()
    versions = records.column("schema_version").to_pylist()
    buckets = records.column("bucket").to_pylist()
    seqs = records.column("seq").to_pylist()
    views = payload_views(records.column("payload"))
    # per (table, bucket): (first seq, piece, its record's schema version and seq)
    pieces: dict[tuple[str, int], list[tuple[int, Chunk, int, int]]] = {}
    for i, view in enumerate(views):
        chunk = decode_chunk(view)
        for bucket, part in _by_bucket(chunk, buckets[i]):
            first = int(part.table.column(SEQ)[0].as_py())
            pieces.setdefault((table_ids[i], bucket), []).append(
                (first, part, versions[i], seqs[i])
            )
    out: dict[tuple[str, int], BucketWrites] = {}
    for key, found in pieces.items():
        found.sort(key=lambda piece: piece[0])
        writes, statements = concat_chunks([part for _, part, _, _ in found])
        counts = [part.table.num_rows for _, part, _, _ in found]
        version = np.repeat(np.array([v for _, _, v, _ in found], np.int32), counts)
        if BUCKET_OF in writes.column_names:
            writes = writes.drop_columns([BUCKET_OF])
        record_seqs = [seq for _, _, _, seq in found]
        out[key] = BucketWrites(
            writes.append_column(VERSION, pa.array(version)),
            statements,
            (min(record_seqs), max(record_seqs)),
        )
    return out


def _by_bucket(chunk: Chunk, record_bucket: int) -> list[tuple[int, Chunk]]:
    """A chunk's writes of each bucket (a chunk made before the bucket column is its
    record's bucket's)."""
    table = chunk.table
    if BUCKET_OF not in table.column_names or record_bucket >= 0:
        return [(record_bucket, chunk)]
    of = table.column(BUCKET_OF).to_numpy()
    bounds = [0, *(np.flatnonzero(np.diff(of)) + 1).tolist(), len(of)]
    return [
        (int(of[lo]), Chunk(table.slice(lo, hi - lo), chunk.statements, chunk.now_us))
        for lo, hi in itertools.pairwise(bounds)
    ]
