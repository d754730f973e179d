"""The core as the pipeline runs it: one table's records of one bucket -> output rows.

For each partition, in record order: decode the mutation, resolve positional list operations
against the current state, write the CDC log rows from the mutation and the state, then apply
the mutation to the state. Outputs are Arrow tables: ``base/<table_id>`` (one fragment per
write), ``log/<table_id>`` (typed log rows) and ``errors`` (writes that failed in the
pipeline, e.g. a list index out of bounds).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.bulk_feeds import stage_rows
from cqlcdc.cdc.bulk_images import bulk_changes, image_log_rows, keys_by_bytes
from cqlcdc.cdc.bulk_log import bulk_log_rows, columnar_rows
from cqlcdc.cdc.feeds import (
    FEED_PREFIX,
    SCAN_SCHEMA,
    STAGE_PREFIX,
    Feed,
    FeedScans,
    FeedStager,
    active_feeds,
    finalize_feeds,
    scan_output,
    stage_output,
    table_feeds,
)
from cqlcdc.cdc.log_writer import LogRow, LogWriter, WriteInfo
from cqlcdc.cdc.streams import Generations
from cqlcdc.changefeed.events import expiry_events, row_events, snapshot_events
from cqlcdc.documents import JsonDocument
from cqlcdc.errors import CqlError, InvalidRequest, UnappliedWrite
from cqlcdc.location import Location
from cqlcdc.schema.log_table import TIME
from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.physical import LOG_INTERNAL, TICKS, column_name, conform, value_type
from cqlcdc.storage.base_rows import BaseRowsBuilder
from cqlcdc.storage.bulk import (
    NOW,
    PK,
    SEED,
    SEQ,
    TOKEN,
    BulkStatement,
    bulk_base_rows,
    chunk_mask,
    chunk_mutations,
    concat_chunks,
    decode_chunk,
    payload_views,
)
from cqlcdc.storage.bulk_state import StateRows
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
from cqlcdc.storage.vectorized import BULK_TYPES, timeuuid_ticks
from cqlcdc.types.arrow import NullColumns, none_array
from cqlcdc.types.base import CqlType
from cqlcdc.types.values import EMPTY

# the outcome of each conditional write (read back by the writer waiting for it): whether it
# applied, and per statement the old row's result columns, each value in its CQL encoding
OUTCOMES_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("applied", pa.bool_(), nullable=False),
        pa.field("rows", pa.list_(pa.list_(pa.binary())), nullable=False),
    ]
)
ERRORS_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("code", pa.int32(), nullable=False),
        pa.field("class", pa.string(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
    ]
)
GENERATIONS_FILE = "cdc_generations.json"
OUTCOMES = "outcomes"  # the output of conditional writes' outcomes
# Test hook: a table (``keyspace.name``) whose every write the core refuses, as a defect
# would, to exercise containment (``cqlcdc.store.containment``) through the real engine and
# server. Read when the processor is made and pickled with it, so Spark executors see it too.
FAULT_TABLE_ENV = "CQLCDC_TEST_FAULT_TABLE"
TICK_PK = b""  # the partition key of clock-tick records (no real partition key is empty)
# when TTL'd data of a partition expires, for feeds with EXPIRY_EVENTS (swept by the session)
EXPIRY_SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("token", pa.int64(), nullable=False),
        pa.field("expiry_s", pa.int64(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
    ]
)


def expiry_output(table_id: str) -> str:
    return f"expiry/{table_id}"


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


def base_output(schema: TableSchema) -> str:
    return f"base/{schema.table_id}"


def log_output(schema: TableSchema) -> str:
    return f"log/{schema.table_id}"


class SchemaSource(Protocol):
    """Where the processor finds table schemas (the catalog)."""

    def table_by_id(self, table_id: str, version: int | None = None) -> TableSchema | None: ...


def log_arrow_schema(log: TableSchema) -> pa.Schema:
    """A log output's columns: the internal ones, the log table's by physical name and type
    (``schema.physical``), then ``TICKS``."""
    layout = log.physical_layout
    fields = [pa.field(column_name(log, c.name), value_type(c.type, layout)) for c in log.columns]
    return pa.schema([*LOG_INTERNAL, *fields, pa.field(TICKS, pa.int64())])


def log_rows_to_arrow(
    log: TableSchema, rows: list[dict[str, Any]], internal: list[tuple[int, bytes, int, int]]
) -> pa.Table:
    """Log rows (by CQL name) and each one's internal columns (``_bucket``, ``_pk``,
    ``_seq``, ``_expiry_s``: kept apart, a CQL column may have any of their names) as a log
    output's table. A row holds only the columns its change has; a column no row has is one
    null array shared by every such column of its type, so a wide table's log rows cost
    what their cells cost, not what the table's columns do."""
    schema = log_arrow_schema(log)
    present: set[str] = set().union(*rows) if rows else set()
    nulls = NullColumns(len(rows), none_array)
    arrays: list[pa.Array] = [
        pa.array([row[i] for row in internal], f.type) for i, f in enumerate(LOG_INTERNAL)
    ]
    times: pa.Array = pa.array([], pa.string())
    for col, f in zip(log.columns, list(schema)[len(LOG_INTERNAL) : -1], strict=True):
        name = col.name
        if name not in present:
            arrays.append(nulls(f.type))
            continue
        try:
            array = _log_column(col.type, [row.get(name) for row in rows])
        except (pa.ArrowException, InvalidRequest):
            # an image of a value written empty before the table had CDC (writes of an empty
            # value to a CDC table are refused): null, as every driver reads an empty value
            cells = [row.get(name) for row in rows]
            if EMPTY not in cells:
                raise
            array = _log_column(col.type, [None if v is EMPTY else v for v in cells])
        arrays.append(conform(array, f.type))
        if name == TIME:
            times = arrays[-1]
    arrays.append(pa.array(timeuuid_ticks(times) if rows else [], pa.int64()))
    return pa.Table.from_arrays(arrays, schema=schema)


def _log_column(ctype: CqlType, values: list[Any]) -> pa.Array:
    if not ctype.arrow_as_is:
        convert = ctype.to_arrow
        values = [convert(v) for v in values]
    return pa.array(values, ctype.arrow_type())


@dataclass(slots=True)
class _Outputs:
    base: list[tuple[bytes, int, int, Partition]]  # pk, token, seq, the write
    log: list[dict[str, Any]]
    errors: list[dict[str, Any]]
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    log_internal: list[tuple[int, bytes, int, int]] = field(default_factory=list)


class CoreProcessor:
    """The ``BucketProcessor`` of cqlcdc (picklable: executors rebuild the catalog from disk).

    Args:
        data_dir: the data directory (catalog and CDC generations live there).
        catalog: the live catalog when running in the session's process.
        aws_region: the server's default ``awsRegion`` (``cqlcdc serve --aws-region``).
    """

    def __init__(
        self,
        data_dir: Location | str | os.PathLike[str],
        catalog: SchemaSource | None = None,
        aws_region: str = "",
    ) -> None:
        # a Location, not a path: the processor is pickled into executors on other machines
        self.data_dir = Location.of(data_dir)
        self.aws_region = aws_region  # DynamoDB Streams feeds that set no AWS_REGION get it
        self._catalog = catalog
        self._generations: Generations | None = None
        self._generations_doc = JsonDocument(self.data_dir / GENERATIONS_FILE)
        self._generations_data: Any = None
        self.truncations = Truncations(self.data_dir)
        self.scans = FeedScans(self.data_dir)
        # a test hook (FAULT_TABLE_ENV): writes of this table fail in process_bucket
        self.fault_table: str | None = os.environ.get(FAULT_TABLE_ENV) or None

    def __getstate__(self) -> dict[str, Any]:
        return {
            "data_dir": self.data_dir,
            "aws_region": self.aws_region,
            "fault_table": self.fault_table,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.data_dir = state["data_dir"]
        self.aws_region = state["aws_region"]
        self.fault_table = state.get("fault_table")
        self._catalog = None
        self._generations = None
        self._generations_doc = JsonDocument(self.data_dir / GENERATIONS_FILE)
        self._generations_data = None
        self.truncations = Truncations(self.data_dir)
        self.scans = FeedScans(self.data_dir)

    @property
    def catalog(self) -> SchemaSource:
        if self._catalog is None:
            from cqlcdc.schema.catalog import Catalog

            self._catalog = Catalog(self.data_dir)
        return self._catalog

    @property
    def generations(self) -> Generations:
        """The CDC generations, re-read when a new generation was added to the file."""
        data = self._generations_doc.load()
        if data is None:
            self._generations = load_generations(self.data_dir)
        elif self._generations is None or data is not self._generations_data:
            self._generations = Generations.from_json(data)
        self._generations_data = data
        return self._generations

    def expiry_column(self, output: str) -> str | None:
        """Outputs whose rows expire by ``_expiry_s``: CDC logs (the log ``ttl``) and feed
        topics (``RETENTION_PERIOD``)."""
        return "_expiry_s" if output.startswith(("log/", FEED_PREFIX)) else None

    def compact_rows(self, output: str, rows: pa.Table) -> pa.Table | None:
        """Mergeable state: the rows of some files of `output` merged into fewer rows.

        Called by the engine's compaction, between batches, in the driver. ``base/`` outputs
        merge to one row per partition (``compact_base_rows``); None for every other output
        (its rows are kept as they are, only their files are joined).
        """
        import time

        from cqlcdc.cdc.compaction import compact_base_rows

        if not output.startswith("base/"):
            return None
        table_id = output.removeprefix("base/")
        schema = self.catalog.table_by_id(table_id)
        if schema is None:  # dropped: nobody reads it, keep its rows as they are
            return None
        return compact_base_rows(schema, rows, self.truncations.upto(table_id), int(time.time()))

    def table_name(self, table_id: str) -> str:
        """``keyspace.name`` of a table (its id if it is gone)."""
        schema = self.catalog.table_by_id(table_id)
        return schema.qualified_name if schema is not None else table_id

    def _schema(self, table_id: str, version: int) -> TableSchema | None:
        schema = self.catalog.table_by_id(table_id, version)
        if schema is None and self._catalog is not None and hasattr(self._catalog, "reload"):
            self._catalog.reload()
            schema = self.catalog.table_by_id(table_id, version)
        return schema

    def process_bucket(
        self, table_id: str, bucket: int, records: pa.Table, state: Any
    ) -> dict[str, pa.Table]:
        from cqlcdc.schema.log_table import log_table_schema
        from cqlcdc.storage.token import deserialize_partition_key

        if records.num_rows == 0:
            return {}
        latest = self._schema(table_id, pc.max(records.column("schema_version")).as_py())
        if latest is None:  # the table was dropped before its writes were applied
            return {}
        if self.fault_table is not None and latest.qualified_name == self.fault_table:
            raise RuntimeError(f"fault injected by {FAULT_TABLE_ENV}={self.fault_table}")
        fragments: StateRows | None = None
        payloads = records.column("payload")
        is_chunk_at = chunk_mask(payloads)
        if not is_chunk_at.any():
            recs = records.to_pylist()
        else:
            chunk_recs = records.filter(is_chunk_at)
            chunks = [decode_chunk(view) for view in payload_views(chunk_recs.column("payload"))]
            writes, statements = concat_chunks(chunks)
            only_chunks = bool(is_chunk_at.all())
            if only_chunks and bulk_log_applies(latest):
                return self._bulk_bucket(latest, bucket, writes, statements)
            same_version = pc.all(
                pc.equal(records.column("schema_version"), latest.schema_version)
            ).as_py()
            if only_chunks and same_version and changes_apply(latest):
                fragments = self._fragments(
                    state,
                    latest,
                    bucket,
                    pc.unique(writes.column(PK).combine_chunks()),
                    pc.unique(writes.column(TOKEN).combine_chunks()),
                )
                done = self._changes_bucket(latest, bucket, writes, statements, fragments)
                if done is not None:
                    return done
            # the log needs state (images, feeds) or other records interleave: one by one,
            # each write keeping its chunk's schema version (the feeds it belongs to)
            versions = [
                version
                for version, chunk in zip(
                    chunk_recs.column("schema_version").to_pylist(), chunks, strict=True
                )
                for _ in range(chunk.table.num_rows)
            ]
            recs = records.filter(np.logical_not(is_chunk_at)).to_pylist()
            recs += _expanded(latest, writes, statements, versions)
        pks = sorted({r["pk"] for r in recs})
        if fragments is None:
            tokens = sorted({r["token"] for r in recs})
            fragments = self._fragments(state, latest, bucket, pks, tokens)
        partitions = fragments.partitions(latest)
        feeds = active_feeds(latest)
        ctx = _BucketContext(
            latest, bucket, _Outputs([], [], []), FeedStager(latest, feeds, self.aws_region)
        )
        ctx.topics[latest.schema_version] = frozenset(f.topic for f in feeds)
        if any(f.options.initial_scan for f in feeds):
            scanned = state.read(scan_output(table_id), bucket, pks)
            if scanned.num_rows:
                for row in scanned.select(["pk", "feed"]).to_pylist():
                    ctx.scanned.add((row["pk"], row["feed"]))
        generations = self.generations
        by_pk: dict[bytes, list[dict[str, Any]]] = {}
        for r in recs:
            if r["pk"] == TICK_PK:  # a clock tick: no partition, only the feeds' clocks move
                tick = decode_payload(r["payload"])
                assert isinstance(tick, TickRequest)
                ctx.stager.tick(r["seq"], tick.now_ms)
                continue
            by_pk.setdefault(r["pk"], []).append(r)
        for pk_bytes, group in by_pk.items():
            pk = deserialize_partition_key(latest, pk_bytes)
            current = partitions.get(pk_bytes)
            token: int = group[0]["token"]
            writer = LogWriter(latest, pk, self._stream_function(token, generations))
            for rec in sorted(group, key=lambda r: r["seq"]):
                try:
                    current = self._apply(ctx, writer, rec, pk, current)
                except Exception as err:
                    raise _unapplied(latest, bucket, rec["seq"], pk, err) from err
        out = ctx.out
        result: dict[str, pa.Table] = dict(ctx.stager.tables())
        if out.base:
            builder = BaseRowsBuilder(latest)
            for pk_bytes, token, seq, mutation in out.base:
                builder.add(bucket, pk_bytes, token, seq, mutation)
            result[base_output(latest)] = builder.table()
        if out.log:
            result[log_output(latest)] = log_rows_to_arrow(
                log_table_schema(latest), out.log, out.log_internal
            )
        if out.errors:
            result["errors"] = pa.Table.from_pylist(out.errors, schema=ERRORS_SCHEMA)
        if out.outcomes:
            result[OUTCOMES] = pa.Table.from_pylist(out.outcomes, schema=OUTCOMES_SCHEMA)
        if ctx.expiries:
            result[expiry_output(table_id)] = pa.Table.from_pylist(
                ctx.expiries, schema=EXPIRY_SCHEMA
            )
        if ctx.new_scans:
            result[scan_output(table_id)] = pa.Table.from_pylist(ctx.new_scans, schema=SCAN_SCHEMA)
        return result

    def _fragments(
        self,
        state: Any,
        schema: TableSchema,
        bucket: int,
        pks: Sequence[bytes] | pa.Array,
        tokens: Sequence[int] | pa.Array,
    ) -> StateRows:
        """The base rows of partitions ``pks`` (of ``tokens``) of the bucket, leaving out
        what a TRUNCATE removed."""
        prior = state.read(base_output(schema), bucket, pks, None, tokens)
        return StateRows.of_rows(prior, self.truncations.upto(schema.table_id))

    def _changes_bucket(
        self,
        schema: TableSchema,
        bucket: int,
        writes: pa.Table,
        statements: tuple[BulkStatement, ...],
        fragments: StateRows,
    ) -> dict[str, pa.Table] | None:
        """A bucket of bulk writes only, for a table whose log has images or that has
        changefeeds: base fragments, log rows and feed records column-wise
        (``cqlcdc.cdc.bulk_images``), or None when the writes must be applied one by one."""
        from cqlcdc.schema.log_table import log_table_schema

        changes = bulk_changes(schema, writes, statements, fragments)
        if changes is None:
            return None
        result = {base_output(schema): self._base_rows(schema, bucket, writes, statements)}
        if schema.cdc.enabled:
            result[log_output(schema)] = image_log_rows(
                schema,
                log_arrow_schema(log_table_schema(schema)),
                writes,
                statements,
                bucket,
                self.generations,
                changes,
            )
        rendered: dict[tuple[str, str], pa.Array] = {}  # value texts, shared by the feeds
        for feed in active_feeds(schema):  # every format column-wise (cdc/bulk_feeds.py)
            staged = stage_rows(
                feed, schema, writes, statements, changes, rendered, self.aws_region
            )
            if staged.num_rows:
                result[stage_output(schema.table_id, feed.topic)] = staged
        return result

    @staticmethod
    def _base_rows(
        schema: TableSchema, bucket: int, writes: pa.Table, statements: tuple[BulkStatement, ...]
    ) -> pa.Table:
        return bulk_base_rows(schema, writes, statements, bucket)

    def _bulk_bucket(
        self,
        schema: TableSchema,
        bucket: int,
        writes: pa.Table,
        statements: tuple[BulkStatement, ...],
    ) -> dict[str, pa.Table]:
        """A bucket of bulk writes only, for a table whose log needs no state: base
        fragments and log rows column-wise (``cqlcdc.storage.bulk``, ``cqlcdc.cdc.bulk_log``)."""
        from cqlcdc.schema.log_table import log_table_schema

        result = {base_output(schema): self._base_rows(schema, bucket, writes, statements)}
        if not schema.cdc.enabled:
            return result
        log = log_table_schema(schema)
        arrow_schema = log_arrow_schema(log)
        single = columnar_rows(writes, statements)
        every = bool(single.all())
        parts = [
            bulk_log_rows(
                schema,
                arrow_schema,
                writes if every else writes.filter(single),
                statements,
                bucket,
                self.generations,
            )
        ]
        if not every:  # writes whose log row splits: the log writer's way
            rest = writes.filter(~single)
            generations = self.generations
            rows: list[dict[str, Any]] = []
            internal: list[tuple[int, bytes, int, int]] = []
            expiry_ttl = schema.cdc.ttl_s
            for rec in _expanded(schema, rest, statements):
                payload = rec["decoded"]
                now_s = payload.now_us // 1_000_000
                writer = LogWriter(
                    schema, payload.partition.pk, self._stream_function(rec["token"], generations)
                )
                info = WriteInfo(now_s, payload.seed, rec["seq"])
                written = writer.write(payload.partition, None, info)
                rows.extend(written)
                expiry = now_s + expiry_ttl if expiry_ttl else 0
                internal.extend([(bucket, rec["pk"], rec["seq"], expiry)] * len(written))
            parts.append(log_rows_to_arrow(log, rows, internal))
        result[log_output(schema)] = pa.concat_tables(parts)
        return result

    def _stream_function(
        self, token: int, gens: Generations | None = None
    ) -> Callable[[int], bytes]:
        gens = gens or self.generations

        def stream_of(timestamp_us: int) -> bytes:
            return gens.stream_id(token, timestamp_us)

        return stream_of

    def _apply(
        self,
        ctx: _BucketContext,
        writer: LogWriter,
        rec: dict[str, Any],
        pk: tuple[Any, ...],
        current: Partition | None,
    ) -> Partition | None:
        schema, out = ctx.schema, ctx.out
        payload = rec.get("decoded") or decode_payload(rec["payload"])
        if isinstance(payload, ScanRequest):
            self._scan(ctx, rec, pk, current, payload)
            return current
        if isinstance(payload, SweepRequest):
            self._sweep(ctx, rec, pk, current, payload)
            expired = row_ttl_deletion(schema, current, payload.at_s)
            if expired is not None:
                # the rows past their per-row TTL go, as ScyllaDB's expiration scanner
                # deletes them: applied and logged like a write (seeded by the sweep's seq)
                write = WritePayload(expired, (), payload.at_s * 1_000_000, splitmix64(rec["seq"]))
                expiring = {**rec, "decoded": write, "expiration": True}
                current = self._apply(ctx, writer, expiring, pk, current)
            upcoming = next_expiration(schema, current, payload.at_s)
            if upcoming is not None:
                ctx.expiries.append(
                    {
                        "bucket": ctx.bucket,
                        "pk": rec["pk"],
                        "token": rec["token"],
                        "expiry_s": upcoming,
                        "seq": rec["seq"],
                    }
                )
            return current
        if isinstance(payload, TickRequest):  # handled per bucket; never keyed by partition
            return current
        if isinstance(payload, ConditionalWrite):  # decided here, in seq order
            if not self._decide(ctx, rec, current, payload):
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
            out.errors.append(
                {
                    "bucket": ctx.bucket,
                    "pk": rec["pk"],
                    "seq": rec["seq"],
                    "code": e.code,
                    "class": e.class_name,
                    "message": e.message,
                }
            )
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
            ctx.expiries.append(  # the partition's sweep when a row's TTL column is due
                {
                    "bucket": ctx.bucket,
                    "pk": rec["pk"],
                    "token": rec["token"],
                    "expiry_s": sweep_s,
                    "seq": rec["seq"],
                }
            )
        if ctx.stager.feeds:
            self._feed_change(ctx, rec, pk, before, mutation, current, payload.now_us)
            if any(f.options.ttl_expiry_events for f in ctx.stager.feeds):
                for expiry_s in sorted(_expiries(mutation)):
                    ctx.expiries.append(
                        {
                            "bucket": ctx.bucket,
                            "pk": rec["pk"],
                            "token": rec["token"],
                            "expiry_s": expiry_s,
                            "seq": rec["seq"],
                        }
                    )
        return current

    def _decide(
        self,
        ctx: _BucketContext,
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
        self,
        ctx: _BucketContext,
        rec: dict[str, Any],
        pk: tuple[Any, ...],
        current: Partition | None,
        sweep: SweepRequest,
    ) -> None:
        """A TTL sweep: erase (or update) records marked as expiry for rows that expired."""
        events = expiry_events(ctx.schema, current, sweep.at_s - 1, sweep.at_s)
        for feed in self._feeds_of(ctx, rec):
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
        self,
        ctx: _BucketContext,
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
        for feed in self._feeds_of(ctx, rec):
            index = 0
            if feed.options.initial_scan and self._unscanned(ctx, rec, feed.topic):
                # YDB rule 1: a row changed before the scan reached it: its old value first
                scan = self.scans.get(ctx.schema.table_id, feed.topic) or {}
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
                self._mark_scanned(ctx, rec, feed.topic)
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

    def _feeds_of(self, ctx: _BucketContext, rec: dict[str, Any]) -> list[Feed]:
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
            schema = self._schema(ctx.schema.table_id, version)
            topics = frozenset(f.topic for f in table_feeds(schema)) if schema else frozenset()
            ctx.topics[version] = topics
        return [f for f in ctx.stager.feeds if f.topic in topics]

    def _unscanned(self, ctx: _BucketContext, rec: dict[str, Any], feed: str) -> bool:
        return self.scans.scanning(ctx.schema.table_id, feed, rec["seq"]) and (
            (rec["pk"], feed) not in ctx.scanned
        )

    def _mark_scanned(self, ctx: _BucketContext, rec: dict[str, Any], feed: str) -> None:
        ctx.scanned.add((rec["pk"], feed))
        ctx.new_scans.append(
            {"bucket": ctx.bucket, "pk": rec["pk"], "feed": feed, "seq": rec["seq"]}
        )

    def _scan(
        self,
        ctx: _BucketContext,
        rec: dict[str, Any],
        pk: tuple[Any, ...],
        current: Partition | None,
        scan: ScanRequest,
    ) -> None:
        """An initial-scan record: export the partition unless a write already did (rule 2)."""
        feed = next((f for f in self._feeds_of(ctx, rec) if f.topic == scan.feed), None)
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
        self._mark_scanned(ctx, rec, scan.feed)

    def driver_cost(self, records: pa.Table) -> int:
        """How many writes of ``records`` the core applies one by one in Python.

        Bulk chunks of tables logged column-wise cost nothing here (they are vectorized and
        fastest in the driver, next to the data), nor do those whose images are made
        column-wise (``cqlcdc.cdc.bulk_images``; a bucket it declines for other reasons than
        a TTL runs the log writer in the driver); every other write counts, and a batch with
        many of them runs on the executors, whose Python workers share the load.
        """
        payloads = records.column("payload")
        is_chunk_at = chunk_mask(payloads)
        cost = int(np.count_nonzero(~is_chunk_at))
        if cost == len(is_chunk_at):
            return cost
        columnar: dict[str, bool] = {}
        images: dict[str, bool] = {}
        table_ids = records.column("table_id").to_pylist()
        views = payload_views(payloads)
        for i in np.flatnonzero(is_chunk_at).tolist():
            table_id = table_ids[i]
            if table_id not in columnar:
                schema = self.catalog.table_by_id(table_id)
                columnar[table_id] = schema is not None and bulk_log_applies(schema)
                images[table_id] = schema is not None and changes_apply(schema)
            if columnar[table_id]:
                continue
            chunk = decode_chunk(views[i])
            # images made column-wise: cheap, unless the chunk has TTLs, which the image path
            # leaves to the log writer
            if images[table_id] and not any(s.ttl for s in chunk.statements):
                continue
            cost += chunk.table.num_rows
        return cost

    # -- the driver's pass over a whole batch ---------------------------------------------

    def is_staged(self, output: str) -> bool:
        """Outputs the engine hands to ``finalize_batch`` instead of committing as written."""
        return output.startswith(STAGE_PREFIX)

    def finalize_batch(
        self, batch_id: int, max_seq: int, staged: dict[str, pa.Table], extra: dict[str, Any]
    ) -> tuple[dict[str, pa.Table], dict[str, Any]]:
        """Feed offsets and barriers for the batch (see ``cqlcdc.cdc.feeds``)."""
        return finalize_feeds(
            lambda table_id: self.catalog.table_by_id(table_id), self.scans, max_seq, staged, extra
        )


def _unapplied(
    schema: TableSchema, bucket: int, seq: int, pk: tuple[Any, ...], err: Exception
) -> UnappliedWrite:
    """The error naming the write the core could not apply: seq, table and partition key."""
    key = ", ".join(
        f"{c.name} = {_clip(c.type.to_cqlsh(v))}"
        for c, v in zip(schema.partition_key, pk, strict=True)
    )
    return UnappliedWrite(
        f"cannot apply ingest record seq={seq} (table {schema.qualified_name}, bucket "
        f"{bucket}, partition {key}): {type(err).__name__}: {err}"
    )


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def bulk_log_applies(schema: TableSchema) -> bool:
    """Whether bulk writes to ``schema`` are logged column-wise: their log rows and feed
    records must not depend on the state (no images, no ``delta: 'keys'``, no feeds)."""
    cdc = schema.cdc
    if active_feeds(schema):
        return False
    return not cdc.enabled or (
        cdc.delta == "full" and cdc.preimage == "false" and not cdc.postimage
    )


def changes_apply(schema: TableSchema) -> bool:
    """Whether bulk writes to ``schema`` whose log or feeds need the prior state may be
    handled column-wise (where ``cqlcdc.cdc.bulk_images`` accepts the bucket): a log with
    full deltas (and any images), and changefeeds without an initial scan on tables whose
    non-key columns are all of the bulk types (their values become the records' Python
    values as the row path holds them)."""
    cdc = schema.cdc
    feeds = active_feeds(schema)
    if cdc.enabled and cdc.delta != "full":
        return False
    if feeds and (
        any(f.options.initial_scan for f in feeds)
        or any(c.type.cql_name not in BULK_TYPES for c in schema.value_columns)
    ):
        return False
    return keys_by_bytes(schema) and not bulk_log_applies(schema)


def _expanded(
    schema: TableSchema,
    writes: pa.Table,
    statements: tuple[BulkStatement, ...],
    versions: list[int] | None = None,
) -> list[dict[str, Any]]:
    """Bulk writes as ordinary records, their payloads already decoded (``versions``: each
    write's schema version, default ``schema``'s)."""
    mutations = chunk_mutations(schema, writes, statements)
    seqs = writes.column(SEQ).to_pylist()
    pks = writes.column(PK).to_pylist()
    tokens = writes.column(TOKEN).to_pylist()
    seeds = writes.column(SEED).to_pylist()
    now = writes.column(NOW).to_pylist()
    return [
        {
            "seq": seqs[i],
            "pk": pks[i],
            "token": tokens[i],
            "schema_version": schema.schema_version if versions is None else versions[i],
            "payload": b"",
            "decoded": WritePayload(m, (), now[i], seeds[i] & 0xFFFFFFFFFFFFFFFF),
            "bulk": True,
        }
        for i, m in enumerate(mutations)
    ]


@dataclass(slots=True)
class _BucketContext:
    """What one bucket task accumulates while applying its records."""

    schema: TableSchema
    bucket: int
    out: _Outputs
    stager: FeedStager
    scanned: set[tuple[bytes, str]] = field(default_factory=set)
    new_scans: list[dict[str, Any]] = field(default_factory=list)
    expiries: list[dict[str, Any]] = field(default_factory=list)
    # schema version -> the feed topics it has (``CoreProcessor._feeds_of``)
    topics: dict[int, frozenset[str]] = field(default_factory=dict)


class Truncations:
    """TRUNCATE points: base fragments with ``seq <= truncations[table_id]`` are gone.

    TRUNCATE empties the base table but not its CDC log (reference section 6); rather than
    rewriting files, the engine records the last seq the truncation covers and every reader
    of base state skips older fragments. Kept in ``<data_dir>/truncations.json``.
    """

    def __init__(self, data_dir: Location | str | os.PathLike[str]) -> None:
        self.document = JsonDocument(Location.of(data_dir) / "truncations.json")
        self._raw: Any = None
        self._seqs: dict[str, int] = {}

    def seqs(self) -> dict[str, int]:
        raw = self.document.load()
        if raw is None:
            return {}
        if raw is not self._raw:
            self._seqs = {str(k): int(v) for k, v in raw.items()}
            self._raw = raw
        return self._seqs

    def upto(self, table_id: str) -> int:
        return self.seqs().get(table_id, 0)

    def truncate(self, table_id: str, seq: int) -> None:
        seqs = dict(self.seqs())
        seqs[table_id] = seq
        self.document.save(seqs)


def load_generations(
    data_dir: Location | str | os.PathLike[str], num_ranges: int = 16, seed: int = 0
) -> Generations:
    """The CDC generations of a data directory (created with the first one if missing)."""
    root = Location.of(data_dir)
    root.makedirs()
    return Generations.load_or_create(root / GENERATIONS_FILE, num_ranges, seed)
