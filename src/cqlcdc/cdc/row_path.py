"""The row path: one record of a bucket applied to its partition, in seq order.

For each record the bucket task (``cqlcdc.cdc.processor``) hands over: decode it, decide a
lightweight transaction's condition against the partition as the earlier records left it,
resolve positional list operations, write the CDC log rows and the feed records from the
mutation and the state, then apply the mutation to the state. TTL sweeps and initial-scan
records take the same path. Pure: everything it reads beyond the record comes in with the
context (the schema versions and scan progress as callables and objects the caller owns),
and everything it produces goes to the context's outputs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from cqlcdc.cdc.feeds import Feed, FeedStager, table_feeds
from cqlcdc.cdc.log_writer import LogRow, LogWriter, WriteInfo
from cqlcdc.changefeed.events import expiry_events, row_events, snapshot_events
from cqlcdc.errors import CqlError
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.cells import Cell, CollectionCells
from cqlcdc.storage.codec import (
    ConditionalWrite,
    ScanRequest,
    SweepRequest,
    TickRequest,
    WritePayload,
    decode_payload,
)
from cqlcdc.storage.conditions import evaluate
from cqlcdc.storage.list_ops import resolve_list_ops
from cqlcdc.storage.partition import Partition
from cqlcdc.storage.row_expiry import expiration_sweeps, next_expiration, row_ttl_deletion
from cqlcdc.storage.uuids import splitmix64


class ScanProgress(Protocol):
    """Where initial scans stand (``cqlcdc.cdc.feeds.FeedScans``)."""

    def get(self, table_id: str, feed: str) -> dict[str, int | None] | None: ...

    def scanning(self, table_id: str, feed: str, seq: int) -> bool: ...


@dataclass(slots=True)
class RowOutputs:
    """What the row path produces for the bucket's outputs (``cqlcdc.cdc.outputs``)."""

    base: list[tuple[bytes, int, int, Partition]] = field(
        default_factory=list
    )  # pk, token, seq, the write
    log: list[dict[str, Any]] = field(default_factory=list)
    errors: list[tuple[int, bytes, int, CqlError]] = field(
        default_factory=list
    )  # bucket, pk, seq, why
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    log_internal: list[tuple[int, bytes, int, int]] = field(default_factory=list)


@dataclass(slots=True)
class BucketContext:
    """What one bucket task reads and accumulates while applying its records.

    ``schema`` is the bucket's newest schema version (its records are applied with it);
    ``schema_at`` finds an older version a record was validated against (its feeds);
    ``scans`` tells where the table's initial scans stand.
    """

    schema: TableSchema
    bucket: int
    stager: FeedStager
    schema_at: Callable[[int], TableSchema | None]
    scans: ScanProgress
    out: RowOutputs = field(default_factory=RowOutputs)
    scanned: set[tuple[bytes, str]] = field(default_factory=set)
    new_scans: list[dict[str, Any]] = field(default_factory=list)
    expiries: list[dict[str, Any]] = field(default_factory=list)
    # schema version -> the feed topics it has (``_feeds_of``)
    topics: dict[int, frozenset[str]] = field(default_factory=dict)


def apply_record(
    ctx: BucketContext,
    writer: LogWriter,
    rec: dict[str, Any],
    pk: tuple[Any, ...],
    current: Partition | None,
) -> Partition | None:
    schema, out = ctx.schema, ctx.out
    payload = rec.get("decoded") or decode_payload(rec["payload"])
    if isinstance(payload, ScanRequest):
        _scan(ctx, rec, pk, current, payload)
        return current
    if isinstance(payload, SweepRequest):
        _sweep(ctx, rec, pk, current, payload)
        expired = row_ttl_deletion(schema, current, payload.at_s)
        if expired is not None:
            # the rows past their per-row TTL go, as ScyllaDB's expiration scanner
            # deletes them: applied and logged like a write (seeded by the sweep's seq)
            write = WritePayload(expired, (), payload.at_s * 1_000_000, splitmix64(rec["seq"]))
            expiring = {**rec, "decoded": write, "expiration": True}
            current = apply_record(ctx, writer, expiring, pk, current)
        upcoming = next_expiration(schema, current, payload.at_s)
        if upcoming is not None:
            _expire_at(ctx, rec, upcoming)
        return current
    if isinstance(payload, TickRequest):  # handled per bucket; never keyed by partition
        return current
    if isinstance(payload, ConditionalWrite):  # decided here, in seq order
        if not _decide(ctx, rec, current, payload):
            return current
        payload = payload.write
    mutation = payload.partition
    now_s = payload.now_us // 1_000_000
    try:
        if payload.list_ops:
            resolve_list_ops(schema, mutation, payload.list_ops, current, now_s)
        if "bulk" not in rec:  # a bulk write's mutation is one non-empty row
            mutation.prune_empty()
    except CqlError as e:
        out.errors.append((ctx.bucket, rec["pk"], rec["seq"], e))
        return current
    if mutation.is_empty():
        return current
    if schema.cdc.enabled:
        info = WriteInfo(now_s, payload.seed, rec["seq"], expiration="expiration" in rec)
        rows: list[LogRow] = writer.write(mutation, current, info)
        expiry = now_s + schema.cdc.ttl_s if schema.cdc.ttl_s else 0
        out.log.extend(rows)
        out.log_internal.extend([(ctx.bucket, rec["pk"], rec["seq"], expiry)] * len(rows))
    out.base.append((rec["pk"], rec["token"], rec["seq"], mutation))
    before = current.copy() if (current is not None and ctx.stager.feeds) else current
    if current is None:
        current = Partition(mutation.pk)
    current.apply(mutation)
    for sweep_s in sorted(expiration_sweeps(schema, mutation, now_s)):
        _expire_at(ctx, rec, sweep_s)  # the partition's sweep when a row's TTL column is due
    if ctx.stager.feeds:
        _feed_change(ctx, rec, pk, before, mutation, current, payload.now_us)
        if any(f.options.ttl_expiry_events for f in ctx.stager.feeds):
            for expiry_s in sorted(_expiries(mutation)):
                _expire_at(ctx, rec, expiry_s)
    return current


def _decide(
    ctx: BucketContext,
    rec: dict[str, Any],
    current: Partition | None,
    payload: ConditionalWrite,
) -> bool:
    """Whether a lightweight transaction applies to the partition as the earlier
    records left it; its outcome (and the old rows) is recorded for its writer."""
    schema = ctx.schema
    conditional = payload.conditional
    applied, rows = evaluate(schema, conditional, current, payload.write.now_us // 1_000_000)
    types = [schema.column(name) for name in conditional.result_columns]
    encoded = [
        [
            None if value is None or col is None else col.type.frozen().serialize(value)
            for value, col in zip(row, types, strict=True)
        ]
        for row in rows
    ]
    ctx.out.outcomes.append(
        {
            "bucket": ctx.bucket,
            "pk": rec["pk"],
            "seq": rec["seq"],
            "applied": applied,
            "rows": encoded,
        }
    )
    return applied


def _sweep(
    ctx: BucketContext,
    rec: dict[str, Any],
    pk: tuple[Any, ...],
    current: Partition | None,
    sweep: SweepRequest,
) -> None:
    """A TTL sweep: erase (or update) records marked as expiry for rows that expired."""
    events = expiry_events(ctx.schema, current, sweep.at_s - 1, sweep.at_s)
    for feed in _feeds_of(ctx, rec):
        if feed.options.ttl_expiry_events:
            ctx.stager.add(
                feed,
                pk,
                events,
                seq=rec["seq"],
                step=sweep.at_s * 1000,
                tx_id=rec["seq"],
                created_ms=sweep.at_s * 1000,
            )


def _feed_change(
    ctx: BucketContext,
    rec: dict[str, Any],
    pk: tuple[Any, ...],
    before: Partition | None,
    mutation: Partition,
    after: Partition,
    now_us: int,
) -> None:
    now_s = now_us // 1_000_000
    events = row_events(ctx.schema, before, mutation, after, now_s)
    step = now_us // 1000
    for feed in _feeds_of(ctx, rec):
        index = 0
        if feed.options.initial_scan and _unscanned(ctx, rec, feed.topic):
            # YDB rule 1: a row changed before the scan reached it: its old value first
            scan = ctx.scans.get(ctx.schema.table_id, feed.topic) or {}
            index = ctx.stager.add(
                feed,
                pk,
                snapshot_events(ctx.schema, before, now_s),
                seq=rec["seq"],
                step=int(scan.get("step") or step),
                tx_id=int(scan.get("tx_id") or rec["seq"]),
                created_ms=step,
                snapshot=True,
            )
            _mark_scanned(ctx, rec, feed.topic)
        ctx.stager.add(
            feed,
            pk,
            events,
            seq=rec["seq"],
            step=step,
            tx_id=rec["seq"],
            created_ms=step,
            first_index=index,
        )


def _feeds_of(ctx: BucketContext, rec: dict[str, Any]) -> list[Feed]:
    """The feed incarnations a record's changes go to: those of the bucket's schema that
    the record's own schema version already had.

    A bucket applies its records with its newest schema, but a write validated before
    ``DROP CHANGEFEED f`` + ``ADD CHANGEFEED f`` (appended by another connection after
    the DDL's flush) belongs to the dropped incarnation, never to the new topic; and a
    write validated before ``ADD CHANGEFEED`` was ordered before the feed existed.
    """
    version = int(rec["schema_version"])
    topics = ctx.topics.get(version)
    if topics is None:
        schema = ctx.schema_at(version)
        topics = frozenset(f.topic for f in table_feeds(schema)) if schema else frozenset()
        ctx.topics[version] = topics
    return [f for f in ctx.stager.feeds if f.topic in topics]


def _unscanned(ctx: BucketContext, rec: dict[str, Any], feed: str) -> bool:
    return ctx.scans.scanning(ctx.schema.table_id, feed, rec["seq"]) and (
        (rec["pk"], feed) not in ctx.scanned
    )


def _mark_scanned(ctx: BucketContext, rec: dict[str, Any], feed: str) -> None:
    ctx.scanned.add((rec["pk"], feed))
    ctx.new_scans.append({"bucket": ctx.bucket, "pk": rec["pk"], "feed": feed, "seq": rec["seq"]})


def _scan(
    ctx: BucketContext,
    rec: dict[str, Any],
    pk: tuple[Any, ...],
    current: Partition | None,
    scan: ScanRequest,
) -> None:
    """An initial-scan record: export the partition unless a write already did (rule 2)."""
    feed = next((f for f in _feeds_of(ctx, rec) if f.topic == scan.feed), None)
    if feed is None or (rec["pk"], scan.feed) in ctx.scanned:
        return
    now_s = scan.created_ms // 1000
    ctx.stager.add(
        feed,
        pk,
        snapshot_events(ctx.schema, current, now_s),
        seq=rec["seq"],
        step=scan.step,
        tx_id=scan.tx_id,
        created_ms=scan.created_ms,
        snapshot=True,
    )
    _mark_scanned(ctx, rec, scan.feed)


def _expire_at(ctx: BucketContext, rec: dict[str, Any], expiry_s: int) -> None:
    """Ask for a sweep of the record's partition at ``expiry_s`` (the ``expiry/`` output)."""
    ctx.expiries.append(
        {
            "bucket": ctx.bucket,
            "pk": rec["pk"],
            "token": rec["token"],
            "expiry_s": expiry_s,
            "seq": rec["seq"],
        }
    )


def _expiries(mutation: Partition) -> set[int]:
    """The seconds at which the TTL'd cells and markers of a mutation expire."""
    out: set[int] = set()
    for row in [mutation.static, *mutation.rows.values()]:
        if row.marker is not None and row.marker.expiry_s:
            out.add(row.marker.expiry_s)
        for data in row.cells.values():
            if isinstance(data, Cell) and data.expiry_s and data.value is not None:
                out.add(data.expiry_s)
            elif isinstance(data, CollectionCells):
                out.update(c.expiry_s for c in data.elements.values() if c.expiry_s)
    return out
