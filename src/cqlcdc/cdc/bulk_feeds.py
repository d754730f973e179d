"""Changefeed records of a bucket of bulk writes in YDB's JSON, Debezium JSON and DynamoDB
Streams JSON formats, column by column.

``cqlcdc.cdc.bulk_images.bulk_changes`` gives each write's row before and after it; the
per-record path turns each into a ``RowEvent``, then a record dict, then JSON text
(``feed_events``, ``FeedStager.add``), some 20 us of Python per record. Here the same
records' texts are joined from per-column JSON texts (``cqlcdc.changefeed.json_columns``):
the key array, the images as objects of every value column (sorted by name), the operation
(``update``/``erase``), the UPDATES body of the statement's columns, and ``ts``. The
partition is the feed's partitioner's: YDB's MD5 of the JSON key array, or (older feeds) the
same Murmur3 slice of the primary key's bytes, computed for all rows at once.

Debezium records are joined the same way from the same texts (``payload`` with ``before``
and ``after``: the value columns sorted by name, then the key columns; ``op``; ``source``).
DynamoDB Streams records too (``Keys`` and the images as AttributeValue maps, null cells
left out; ``SequenceNumber`` and ``eventID`` from the seq and the partition). Only what
``bulk_changes`` accepts takes this path (no TTL, so never an expiry event). The tests
compare its rows with ``FeedStager``'s for every mode and every format.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.bulk_images import BulkChanges
from cqlcdc.cdc.feeds import STAGE_SCHEMA, Feed
from cqlcdc.changefeed.json_columns import (
    attribute_texts,
    join,
    json_arrays,
    json_objects,
    json_texts,
    sparse_objects,
)
from cqlcdc.changefeed.options import FeedOptions, with_aws_region
from cqlcdc.changefeed.partitioner import MD5
from cqlcdc.changefeed.records import (
    CONNECTOR,
    CONNECTOR_VERSION,
    EVENT_SOURCE,
    EVENT_VERSION,
    INDEX_DIGITS,
    TX_DIGITS,
)
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.storage.bulk import NOW, SEQ, BulkStatement, serialized_keys
from cqlcdc.storage.vectorized import murmur3_tokens, token_buckets

DYNAMODB = "DYNAMODB_STREAMS_JSON"
FORMATS = ("JSON", "DEBEZIUM_JSON", DYNAMODB)  # the formats built here


@dataclass(frozen=True, slots=True)
class _Records:
    """The parts of a bucket's records, one entry per record, as JSON texts."""

    count: int
    erase: npt.NDArray[np.bool_]  # the row is gone after the write
    new_image: npt.NDArray[np.bool_]  # the record carries the row after the write
    old_image: npt.NDArray[np.bool_]  # ... and before it
    names: list[str]  # the value columns, sorted by name
    # per value column, its JSON text after the write (an AttributeValue's for DynamoDB)
    after: dict[str, pa.Array]
    before: dict[str, pa.Array]
    step: pa.Array  # the virtual timestamp (ms) and transaction id (the seq)
    seq: pa.Array


def stage_rows(
    feed: Feed,
    schema: TableSchema,
    writes: pa.Table,
    statements: tuple[BulkStatement, ...],
    changes: BulkChanges,
    rendered: dict[tuple[str, str], pa.Array] | None = None,
    aws_region: str = "",
) -> pa.Table:
    """The staged records (``STAGE_SCHEMA``) of a ``feed`` in one of ``FORMATS`` for the
    writes of one bucket: one per write whose row exists before or after it.

    ``rendered`` keeps the value columns' texts for the next feed of the same bucket (pass
    one dict to every feed of a table: the texts do not depend on the feed, only on its
    format's kind). ``aws_region``: the server's default ``awsRegion`` (``with_aws_region``)."""
    options = with_aws_region(feed.options, aws_region)
    rendered = {} if rendered is None else rendered
    ks = np.flatnonzero(changes.live_before | changes.live_after)
    count = len(ks)
    positions = pa.array(changes.order[ks])
    erase = ~changes.live_after[ks]
    keys = [*schema.partition_key, *schema.clustering_key]
    key_values = [writes.column(c.name).take(positions) for c in keys]
    render = attribute_texts if options.format == DYNAMODB else json_texts
    key_texts = [render(c.type, v) for c, v in zip(keys, key_values, strict=True)]
    names = sorted(c.name for c in schema.regular_columns)
    before: dict[str, pa.Array] = {}
    after: dict[str, pa.Array] = {}
    for name in names:
        source, at_before, at_after = changes.columns[name]
        column = schema.column(name)
        assert column is not None
        texts = rendered.get((render.__name__, name))
        if texts is None:
            texts = rendered[(render.__name__, name)] = render(column.type, source)
        before[name] = texts.take(pa.array(at_before[ks]))
        after[name] = texts.take(pa.array(at_after[ks]))
    none = np.zeros(count, np.bool_)
    records = _Records(
        count=count,
        erase=erase,
        new_image=~erase if options.has_new_image else none,
        old_image=changes.live_before[ks] if options.has_old_image else none,
        names=names,
        after=after,
        before=before,
        step=pa.array(writes.column(NOW).take(positions).to_numpy() // 1000),
        seq=writes.column(SEQ).take(positions).combine_chunks(),
    )
    if feed.partitioner == MD5 and options.partitions > 1:
        # YDB's: the MD5 of the JSON key array (the JSON format's key texts)
        json_keys = key_texts if render is json_texts else None
        if json_keys is None:
            json_keys = [json_texts(c.type, v) for c, v in zip(keys, key_values, strict=True)]
        partitions = md5_partitions(json_arrays(json_keys, count), options.partitions)
    else:
        partitions = _partitions(keys, key_values, options.partitions, count)
    existed = changes.live_before[ks]
    if options.format == DYNAMODB:
        key = json_objects([c.name for c in keys], key_texts, count)
        value = _dynamodb(
            records, [c.name for c in keys], key_texts, key, options, existed, partitions
        )
    elif options.format == "DEBEZIUM_JSON":
        key_object = json_objects([c.name for c in keys], key_texts, count)
        key = join(['{"payload":', key_object, "}"], count)
        value = _debezium(records, [c.name for c in keys], key_texts, options.mode, existed)
    else:
        key = json_arrays(key_texts, count)
        value = _ydb_json(records, key, options, statements, changes.stmt[ks])
    step = records.step
    expiry = pa.array(step.to_numpy() // 1000 + options.retention_ms // 1000)
    return pa.table(
        {
            "partition": pa.array(partitions),
            "key": key,
            "value": value,
            "created_ms": step,
            "_seq": records.seq,
            "_idx": pa.array(np.zeros(count, np.int32)),
            "_step": step,
            "_expiry_s": expiry,
        },
        schema=STAGE_SCHEMA,
    )


def _ydb_json(
    records: _Records,
    key: pa.Array,
    options: FeedOptions,
    statements: tuple[BulkStatement, ...],
    stmt: npt.NDArray[np.int64],
) -> pa.Array:
    """YDB's JSON records: key, the operation (or the UPDATES body), images, ``ts``."""
    r = records
    count = r.count
    operation = pa.array(np.where(r.erase, '"erase":{}', '"update":{}'), pa.string())
    if options.mode == "UPDATES":  # the statement's columns, as they are after the write
        for s, statement in enumerate(statements):
            mine = (stmt == s) & ~r.erase
            if mine.any():
                written = sorted(statement.columns)
                body = json_objects(written, [r.after[c] for c in written], count)
                operation = pc.if_else(pa.array(mine), join(['"update":', body], count), operation)
    pieces: list[str | pa.Array] = ['{"key":', key, ",", operation]
    for flag, label, image in (
        (r.new_image, "newImage", r.after),
        (r.old_image, "oldImage", r.before),
    ):
        if flag.any():
            body = json_objects(r.names, [image[c] for c in r.names], count)
            pieces.append(_where(flag, join([f',"{label}":', body], count)))
    if options.virtual_timestamps:
        pieces += [',"ts":[', r.step.cast(pa.string()), ",", r.seq.cast(pa.string()), "]"]
    pieces.append("}")
    return join(pieces, count)


def _debezium_op(
    mode: str, erase: npt.NDArray[np.bool_], existed: npt.NDArray[np.bool_]
) -> pa.Array:
    """``d`` for an erase, ``c`` for a new row in NEW_AND_OLD_IMAGES mode, else ``u``."""
    created = ~existed if mode == "NEW_AND_OLD_IMAGES" else np.zeros(len(erase), np.bool_)
    return pa.array(np.where(erase, '"d"', np.where(created, '"c"', '"u"')), pa.string())


def _debezium(
    records: _Records,
    key_names: list[str],
    key_texts: list[pa.Array],
    mode: str,
    existed: npt.NDArray[np.bool_],
) -> pa.Array:
    """Debezium records: ``payload`` with ``before``/``after`` (value columns, then keys),
    ``op`` and ``source`` (the connector, ``ts_ms`` = ``step``, ``step``, ``txId``)."""
    r = records
    count = r.count
    names = r.names + key_names
    pieces: list[str | pa.Array] = ['{"payload":{']
    for flag, label, image in ((r.old_image, "before", r.before), (r.new_image, "after", r.after)):
        if flag.any():
            body = json_objects(names, [image[c] for c in r.names] + key_texts, count)
            pieces.append(_where(flag, join([f'"{label}":', body, ","], count)))
    steps = r.step.cast(pa.string())
    source = f'"source":{{"connector":{_text(CONNECTOR)},"version":{_text(CONNECTOR_VERSION)}'
    pieces += [
        '"op":',
        _debezium_op(mode, r.erase, existed),
        "," + source + ',"ts_ms":',
        steps,
        ',"step":',
        steps,
        ',"txId":',
        r.seq.cast(pa.string()),
        ',"snapshot":false}}}',
    ]
    return join(pieces, count)


def _dynamodb(
    records: _Records,
    key_names: list[str],
    key_texts: list[pa.Array],
    keys: pa.Array,
    options: FeedOptions,
    existed: npt.NDArray[np.bool_],
    partitions: npt.NDArray[np.int32],
) -> pa.Array:
    """DynamoDB Streams records: ``awsRegion``; ``dynamodb`` with the creation time (the
    step), ``Keys``, ``NewImage``/``OldImage`` (the non-null value columns, then the keys),
    ``SequenceNumber`` (the seq; each write is its own transaction, so index 0) and the
    view type; ``eventID`` (partition-sequence number), ``eventName``, the source."""
    r = records
    count = r.count
    view = options.mode if options.mode != "UPDATES" else "KEYS_ONLY"  # no UPDATES in AWS
    # sequence_number(step, seq, 0): each write is its own transaction, its record index 0
    digits = pc.utf8_lpad(r.seq.cast(pa.string()), TX_DIGITS, "0")
    sequence = join([digits, "0" * INDEX_DIGITS], count)
    pieces: list[str | pa.Array] = [
        '{"awsRegion":' + _text(options.aws_region or "") + ',"dynamodb":{',
        '"ApproximateCreationDateTime":',
        r.step.cast(pa.string()),
        ',"Keys":',
        keys,
    ]
    if view != "KEYS_ONLY":
        names = r.names + key_names
        for flag, label, image in (
            (r.new_image, "NewImage", r.after),
            (r.old_image, "OldImage", r.before),
        ):
            if flag.any():
                body = sparse_objects(names, [image[c] for c in r.names] + key_texts, count)
                pieces.append(_where(flag, join([f',"{label}":', body], count)))
    created = ~existed if options.mode == "NEW_AND_OLD_IMAGES" else np.zeros(count, np.bool_)
    name = np.where(r.erase, "REMOVE", np.where(created, "INSERT", "MODIFY"))
    pieces += [
        ',"SequenceNumber":"',
        sequence,
        f'","StreamViewType":"{view}"}},"eventID":"',
        pa.array(partitions).cast(pa.string()),
        "-",
        sequence,
        '","eventName":"',
        pa.array(name, pa.string()),
        '","eventSource":' + _text(EVENT_SOURCE) + ',"eventVersion":' + _text(EVENT_VERSION) + "}",
    ]
    return join(pieces, count)


def _text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _where(mask: npt.NDArray[np.bool_], texts: pa.Array) -> pa.Array:
    return pc.if_else(pa.array(mask), texts, pa.scalar("", pa.string()))


def md5_partitions(key_texts: pa.Array, partitions: int) -> npt.NDArray[np.int32]:
    """``md5_partition(ydb_partition_key(text), partitions)`` of every row's JSON key text,
    exactly, with the 128-bit arithmetic done column-wise: a digest's (high, low) 64-bit
    halves are placed among the slice boundaries ``k * ((2^128 - 1) // partitions)``."""
    md5 = hashlib.md5
    texts = key_texts.cast(pa.binary()).to_pylist()
    halves = np.frombuffer(b"".join([md5(t).digest() for t in texts]), ">u8")
    high, low = halves[0::2], halves[1::2]
    width = ((1 << 128) - 1) // partitions
    bounds = [k * width for k in range(1, partitions)]
    bound_high = np.array([b >> 64 for b in bounds], np.uint64)
    bound_low = np.array([b & ((1 << 64) - 1) for b in bounds], np.uint64)
    shard = np.searchsorted(bound_high, high, side="right")
    # a digest whose high half is a boundary's: below that boundary if its low half is
    first = np.searchsorted(bound_high, high, side="left")
    tied = first < len(bound_high)
    tied[tied] = bound_high[first[tied]] == high[tied]
    below = tied.copy()
    below[tied] = low[tied] < bound_low[first[tied]]
    shard = np.where(below, first, shard)
    return np.minimum(shard, partitions - 1).astype(np.int32)


def _partitions(
    keys: list[Column], values: list[pa.Array], partitions: int, count: int
) -> npt.NDArray[np.int32]:
    """``partition_for(primary_key_bytes(...))`` of every row."""
    if partitions == 1:
        return np.zeros(count, np.int32)
    key_bytes = serialized_keys(keys, {c.name: v for c, v in zip(keys, values, strict=True)})
    return token_buckets(murmur3_tokens(key_bytes), partitions)
