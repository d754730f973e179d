"""Changefeed records of a bucket of bulk writes in YDB's JSON format, column by column.

``cqlcdc.cdc.bulk_images.bulk_changes`` gives each write's row before and after it; the
per-record path turns each into a ``RowEvent``, then a record dict, then JSON text
(``feed_events``, ``FeedStager.add``), some 20 us of Python per record. Here the same
records' texts are joined from per-column JSON texts (``cqlcdc.changefeed.json_columns``):
the key array, the images as objects of every value column (sorted by name), the operation
(``update``/``erase``), the UPDATES body of the statement's columns, and ``ts``. The
partition is the same Murmur3 slice of the primary key's bytes, computed for all rows at once.

Only the JSON format takes this path (Debezium and DynamoDB records stay per record), and
only for what ``bulk_changes`` accepts (no TTL, so never an expiry event). The tests
compare its rows with ``FeedStager``'s for every mode.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.bulk_images import BulkChanges
from cqlcdc.cdc.feeds import STAGE_SCHEMA, Feed
from cqlcdc.changefeed.json_columns import join, json_arrays, json_objects, json_texts
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.bulk import NOW, SEQ, BulkStatement
from cqlcdc.storage.vectorized import ByteRows, murmur3_tokens, native_bytes, token_buckets


def json_stage_rows(
    feed: Feed,
    schema: TableSchema,
    writes: pa.Table,
    statements: tuple[BulkStatement, ...],
    changes: BulkChanges,
) -> pa.Table:
    """The staged records (``STAGE_SCHEMA``) of a JSON ``feed`` for the writes of one bucket:
    one per write whose row exists before or after it."""
    options = feed.options
    has_event = changes.live_before | changes.live_after
    ks = np.flatnonzero(has_event)
    count = len(ks)
    positions = pa.array(changes.order[ks])
    erase = ~changes.live_after[ks]
    keys = [*schema.partition_key, *schema.clustering_key]
    key_values = [writes.column(c.name).take(positions) for c in keys]
    key = json_arrays([json_texts(c.type, v) for c, v in zip(keys, key_values, strict=True)], count)

    columns = sorted(schema.regular_columns, key=lambda c: c.name)
    names = [c.name for c in columns]
    before: dict[str, pa.Array] = {}
    after: dict[str, pa.Array] = {}
    for col in columns:
        source, at_before, at_after = changes.columns[col.name]
        texts = json_texts(col.type, source)
        before[col.name] = texts.take(pa.array(at_before[ks]))
        after[col.name] = texts.take(pa.array(at_after[ks]))
    old_image = changes.live_before[ks] if options.has_old_image else np.zeros(count, np.bool_)
    new_image = ~erase if options.has_new_image else np.zeros(count, np.bool_)

    operation = pa.array(np.where(erase, '"erase":{}', '"update":{}'), pa.string())
    if options.mode == "UPDATES":  # the statement's columns, as they are after the write
        stmt = changes.stmt[ks]
        for s, statement in enumerate(statements):
            mine = (stmt == s) & ~erase
            if mine.any():
                written = sorted(statement.columns)
                body = json_objects(written, [after[c] for c in written], count)
                operation = pc.if_else(pa.array(mine), join(['"update":', body], count), operation)
    pieces: list[str | pa.Array] = ['{"key":', key, ",", operation]
    if new_image.any():
        image = join([',"newImage":', json_objects(names, [after[c] for c in names], count)], count)
        pieces.append(_where(new_image, image))
    if old_image.any():
        image = join(
            [',"oldImage":', json_objects(names, [before[c] for c in names], count)], count
        )
        pieces.append(_where(old_image, image))
    seq = writes.column(SEQ).take(positions).combine_chunks()
    step = pa.array(writes.column(NOW).take(positions).to_numpy() // 1000)
    if options.virtual_timestamps:
        pieces += [',"ts":[', step.cast(pa.string()), ",", seq.cast(pa.string()), "]"]
    pieces.append("}")
    value = join(pieces, count)

    expiry = pa.array(step.to_numpy() // 1000 + options.retention_ms // 1000)
    return pa.table(
        {
            "partition": pa.array(_partitions(keys, key_values, options.partitions, count)),
            "key": key,
            "value": value,
            "created_ms": step,
            "_seq": seq,
            "_idx": pa.array(np.zeros(count, np.int32)),
            "_step": step,
            "_expiry_s": expiry,
        },
        schema=STAGE_SCHEMA,
    )


def _where(mask: npt.NDArray[np.bool_], texts: pa.Array) -> pa.Array:
    return pc.if_else(pa.array(mask), texts, pa.scalar("", pa.string()))


def _partitions(
    keys: list[Column], values: list[pa.Array], partitions: int, count: int
) -> npt.NDArray[np.int32]:
    """``partition_for(primary_key_bytes(...))`` of every row: one key column's native bytes,
    or the composite of several (per column a u16 length, the bytes, a zero byte)."""
    if partitions == 1:
        return np.zeros(count, np.int32)
    encoded = [native_bytes(v, c.type.cql_name) for c, v in zip(keys, values, strict=True)]
    if len(encoded) == 1:
        key_bytes = encoded[0]
    else:
        rows = ByteRows(count)
        for data in encoded:
            lengths = pc.binary_length(data).to_numpy(zero_copy_only=False)
            rows.numbers(lengths, ">u2")
            rows.binary(data)
            rows.fixed(np.zeros((count, 1), np.uint8))
        key_bytes = rows.build()
    return token_buckets(murmur3_tokens(key_bytes), partitions)
