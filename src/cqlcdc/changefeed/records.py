"""Row events -> changefeed records in YDB's JSON, Debezium JSON and DynamoDB Streams JSON.

One record per row event, shaped exactly as YDB's serializers shape theirs
(ydb-changefeed-reference.md sections 3-5); docs/changefeeds.md shows one of each kind.

>>> barrier_record(1670792500000, 0).value
{'resolved': [1670792500000, 0]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any

from cqlcdc.changefeed.events import RowEvent
from cqlcdc.changefeed.options import FeedOptions
from cqlcdc.changefeed.partitioner import (
    MD5,
    MURMUR3,
    md5_partition,
    partition_for,
    primary_key_bytes,
    ydb_partition_key,
)
from cqlcdc.changefeed.values import to_attribute_value, to_json
from cqlcdc.schema.model import Column, TableSchema

CONNECTOR = "cqlcdc"  # Debezium source.connector (YDB writes "ydb")
try:
    CONNECTOR_VERSION = metadata.version("cqlcdc")
except metadata.PackageNotFoundError:  # running from a source tree that is not installed
    CONNECTOR_VERSION = "0.0.0"
EVENT_SOURCE = "cqlcdc:table"  # DynamoDB eventSource (YDB: "ydb:document-table")
EVENT_VERSION = "1.0"
# how DynamoDB Streams marks a delete done by TTL rather than by a user
TTL_USER_IDENTITY = {"principalId": "dynamodb.amazonaws.com", "type": "Service"}

# SequenceNumber: txId and index digits, at least 21, YDB's minimum (AWS allows 21 to 40)
TX_DIGITS, INDEX_DIGITS = 14, 7


@dataclass(frozen=True, slots=True)
class FeedRecord:
    """One topic message.

    Attributes:
        key: the message key: JSON the ``key`` array; Debezium ``{"payload": {pk...}}``;
            DynamoDB the ``Keys`` AttributeValue map; None for a barrier.
        value: the record body (a JSON object; ``encode`` gives its bytes).
        partition_key: the bytes the Murmur3 partitioner hashes (``primary_key_bytes``);
            empty for a barrier, which goes to every partition.
        key_text: the key as YDB's JSON format writes it (the compact JSON array of the key
            values), whose MD5 is YDB's partition key; empty for a barrier.
    """

    key: dict[str, Any] | list[Any] | None
    value: dict[str, Any]
    partition_key: bytes
    key_text: str = ""

    def partition(self, partitions: int, partitioner: str = MURMUR3) -> int:
        """The topic partition of this record among ``partitions`` by the feed's
        ``partitioner`` (``MD5``, YDB's, for feeds made now; ``MURMUR3`` for older ones)."""
        if partitioner == MD5 and partitions != 1:  # one partition takes every key
            return md5_partition(ydb_partition_key(self.key_text), partitions)
        return partition_for(self.partition_key, partitions)

    @property
    def ydb_partition_key(self) -> str:
        """The MD5 hex YDB puts in the message's partition key (the record's key hashed)."""
        return ydb_partition_key(self.key_text)


def encode(value: dict[str, Any] | list[Any]) -> str:
    """A record's key or value as compact JSON text (stored and sent as UTF-8; no NaN:
    values render it as text)."""
    return _ENCODER.encode(value)


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def barrier_record(step: int, tx_id: int) -> FeedRecord:
    """A barrier (resolved timestamp): every change below ``[step, tx_id]`` is already in the
    partition. Written to every partition of a JSON feed; YDB has no Debezium or DynamoDB form.
    """
    return FeedRecord(None, {"resolved": [step, tx_id]}, b"")


def sequence_number(step: int, tx_id: int, index: int) -> str:
    """The DynamoDB ``SequenceNumber``: txId zero-padded to 14 digits, then the record's index
    in its transaction (7 digits): at least 21 digits, as YDB pads its counter.

    In this engine txId is the ingest sequence number, the order writes are applied in, so
    the numbers grow with the virtual timestamps; a pure function of the record, so a
    replayed batch gets the same numbers. ``step`` is not needed for uniqueness.

    Raises:
        ValueError: txId or the index does not fit.
    """
    del step
    if not 0 <= tx_id < 1 << 64:
        raise ValueError(f"tx_id {tx_id} does not fit a sequence number")
    if not 0 <= index < 10**INDEX_DIGITS:
        raise ValueError(f"index {index} does not fit a sequence number")
    return f"{tx_id:0{TX_DIGITS}d}{index:0{INDEX_DIGITS}d}"


@dataclass(frozen=True, slots=True)
class _Row:
    """One event's parts in CQL terms, before a format renders them."""

    key: tuple[tuple[Column, Any], ...]
    columns: tuple[Column, ...]
    erase: bool
    old_image: dict[str, Any] | None
    new_image: dict[str, Any] | None
    updates: dict[str, Any]
    created: bool  # no row before: INSERT / "c" in NEW_AND_OLD_IMAGES mode
    expired: bool


def feed_records(
    feed: FeedOptions,
    schema: TableSchema,
    pk: tuple[Any, ...],
    events: list[RowEvent],
    step: int,
    tx_id: int,
    *,
    snapshot: bool = False,
    created_ms: int | None = None,
    first_index: int = 0,
    partitioner: str = MURMUR3,
) -> list[FeedRecord]:
    """The feed's records of one write to one partition (or of one initial-scan batch).

    Args:
        feed: the feed's options (mode, format, ...).
        schema: the table, at the version the write was made with.
        pk: the partition key values.
        events: the write's row events (``cqlcdc.changefeed.events.row_events``), in order.
        step: the virtual timestamp's step: commit time in milliseconds.
        tx_id: the virtual timestamp's transaction id (unsigned 64-bit).
        snapshot: the events are initial-scan rows (upserts whose ``new`` is the row).
        created_ms: the approximate creation time (Debezium ``ts_ms``, DynamoDB
            ``ApproximateCreationDateTime``); ``step`` when not given.
        first_index: the index of the first event within the transaction; a transaction
            spanning several partitions gives each call a distinct range so that sequence
            numbers stay unique.
        partitioner: the feed's partitioner (``MD5`` or ``MURMUR3``): DynamoDB's
            ``eventID`` names the record's partition.

    Returns:
        One record per event, except that TTL-expiry events are dropped unless the feed
        has ``EXPIRY_EVENTS``.

    Raises:
        ValueError: a snapshot event that is not an upsert with a row.
    """
    created_ms = step if created_ms is None else created_ms
    records: list[FeedRecord] = []
    for offset, event in enumerate(events):
        if event.expired and not feed.ttl_expiry_events:
            continue
        row = _row(feed, schema, pk, event, snapshot)
        key = _Key(
            primary_key_bytes(schema, pk, event.ck),
            encode([to_json(c.type, v) for c, v in row.key]),
        )
        if feed.format == "JSON":
            records.append(_ydb_json(feed, row, key, step, tx_id))
        elif feed.format == "DEBEZIUM_JSON":
            records.append(_debezium(feed, row, key, step, tx_id, created_ms, snapshot))
        else:
            seq = sequence_number(step, tx_id, first_index + offset)
            records.append(_dynamodb(feed, row, key, seq, created_ms, partitioner))
    return records


@dataclass(frozen=True, slots=True)
class _Key:
    """What the partitioners hash: the CQL key bytes (Murmur3) and YDB's key text (MD5)."""

    data: bytes
    text: str


def _columns(schema: TableSchema, static: bool) -> tuple[Column, ...]:
    chosen = schema.static_columns if static else schema.regular_columns
    return tuple(sorted(chosen, key=lambda c: c.name))


def _image(columns: tuple[Column, ...], values: dict[str, Any]) -> dict[str, Any]:
    # a YDB image lists every value column, a missing (null) one as null
    return {c.name: values.get(c.name) for c in columns}


def _row(
    feed: FeedOptions, schema: TableSchema, pk: tuple[Any, ...], event: RowEvent, snapshot: bool
) -> _Row:
    static = event.ck is None
    key_columns = schema.partition_key + (() if static else schema.clustering_key)
    key_values = tuple(pk) + (() if event.ck is None else tuple(event.ck))
    columns = _columns(schema, static)
    if snapshot:
        if event.kind != "upsert" or event.new is None:
            raise ValueError("an initial-scan event must be an upsert carrying the row")
        row = _image(columns, event.new)
        # YDB's scan: NEW_* modes get the row as newImage, OLD_IMAGE as oldImage (sic),
        # UPDATES the whole row as the update body
        return _Row(
            key=tuple(zip(key_columns, key_values)),
            columns=columns,
            erase=False,
            old_image=row if feed.mode == "OLD_IMAGE" else None,
            new_image=row if feed.has_new_image else None,
            updates=row if feed.mode == "UPDATES" else {},
            created=True,
            expired=False,
        )
    erase = event.kind == "erase"
    return _Row(
        key=tuple(zip(key_columns, key_values)),
        columns=columns,
        erase=erase,
        old_image=_image(columns, event.old)
        if feed.has_old_image and event.old is not None
        else None,
        new_image=_image(columns, event.new)
        if feed.has_new_image and not erase and event.new is not None
        else None,
        updates={c.name: event.written[c.name] for c in columns if c.name in event.written}
        if feed.mode == "UPDATES" and not erase
        else {},
        created=event.old is None,
        expired=event.expired,
    )


def _json_columns(columns: tuple[Column, ...], values: dict[str, Any]) -> dict[str, Any]:
    by_name = {c.name: c for c in columns}
    return {name: to_json(by_name[name].type, v) for name, v in values.items()}


def _ydb_json(feed: FeedOptions, row: _Row, key_hash: _Key, step: int, tx_id: int) -> FeedRecord:
    key = [to_json(c.type, v) for c, v in row.key]
    value: dict[str, Any] = {"key": key}
    if row.erase:
        value["erase"] = {}
    elif row.old_image is not None or row.new_image is not None:
        value["update"] = {}  # with an image, update is only the operation flag
    else:
        value["update"] = _json_columns(row.columns, row.updates)
    if row.new_image is not None:
        value["newImage"] = _json_columns(row.columns, row.new_image)
    if row.old_image is not None:
        value["oldImage"] = _json_columns(row.columns, row.old_image)
    if row.expired:
        value["expired"] = True  # ours: an erase by TTL expiry, not by a statement
    if feed.virtual_timestamps:
        value["ts"] = [step, tx_id]
    return FeedRecord(key, value, key_hash.data, key_hash.text)


def _debezium(
    feed: FeedOptions,
    row: _Row,
    key: _Key,
    step: int,
    tx_id: int,
    created_ms: int,
    snapshot: bool,
) -> FeedRecord:
    key_payload = {c.name: to_json(c.type, v) for c, v in row.key}
    payload: dict[str, Any] = {}
    if row.old_image is not None:
        payload["before"] = {**_json_columns(row.columns, row.old_image), **key_payload}
    if row.new_image is not None:
        payload["after"] = {**_json_columns(row.columns, row.new_image), **key_payload}
    if snapshot:
        op = "r"
    elif row.erase:
        op = "d"
    elif feed.mode == "NEW_AND_OLD_IMAGES" and row.created:
        op = "c"
    else:
        op = "u"
    payload["op"] = op
    source: dict[str, Any] = {
        "connector": CONNECTOR,
        "version": CONNECTOR_VERSION,
        "ts_ms": created_ms,
        "step": step,
        "txId": tx_id,
        "snapshot": snapshot,
    }
    if row.expired:
        source["expired"] = True  # ours: a delete by TTL expiry
    payload["source"] = source
    return FeedRecord({"payload": key_payload}, {"payload": payload}, key.data, key.text)


def _attribute_map(columns: tuple[Column, ...], values: dict[str, Any]) -> dict[str, Any]:
    # YDB leaves NULL cells out of DynamoDB images
    by_name = {c.name: c for c in columns}
    return {
        name: to_attribute_value(by_name[name].type, v)
        for name, v in values.items()
        if v is not None
    }


def _dynamodb(
    feed: FeedOptions, row: _Row, key: _Key, seq: str, created_ms: int, partitioner: str
) -> FeedRecord:
    keys = {c.name: to_attribute_value(c.type, v) for c, v in row.key}
    view = feed.mode if feed.mode != "UPDATES" else "KEYS_ONLY"  # no UPDATES view in AWS
    stream: dict[str, Any] = {"ApproximateCreationDateTime": created_ms, "Keys": keys}
    if view != "KEYS_ONLY" and row.new_image is not None:
        stream["NewImage"] = {**_attribute_map(row.columns, row.new_image), **keys}
    if view != "KEYS_ONLY" and row.old_image is not None:
        stream["OldImage"] = {**_attribute_map(row.columns, row.old_image), **keys}
    stream["SequenceNumber"] = seq
    stream["StreamViewType"] = view
    if row.erase:
        name = "REMOVE"
    elif feed.mode == "NEW_AND_OLD_IMAGES" and row.created:
        name = "INSERT"
    else:
        name = "MODIFY"
    record = FeedRecord(keys, {}, key.data, key.text)
    value: dict[str, Any] = {
        "awsRegion": feed.aws_region or "",
        "dynamodb": stream,
        "eventID": f"{record.partition(feed.partitions, partitioner)}-{seq}",
        "eventName": name,
        "eventSource": EVENT_SOURCE,
        "eventVersion": EVENT_VERSION,
    }
    if row.expired:
        value["userIdentity"] = dict(TTL_USER_IDENTITY)
    return replace(record, value=value)


__all__ = [
    "CONNECTOR",
    "CONNECTOR_VERSION",
    "EVENT_SOURCE",
    "TTL_USER_IDENTITY",
    "FeedRecord",
    "barrier_record",
    "encode",
    "feed_records",
    "sequence_number",
]
