"""The core as the pipeline runs it: one table's records of one bucket -> output rows.

For each partition, in record order: decode the mutation, resolve positional list operations
against the current state, write the CDC log rows from the mutation and the state, then apply
the mutation to the state. Outputs are Arrow tables: ``base/<table_id>`` (one fragment per
write), ``log/<table_id>`` (typed log rows) and ``errors`` (writes that failed in the
pipeline, e.g. a list index out of bounds).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.bucket_groups import BucketGroup, record_groups
from cqlcdc.cdc.columnar import (
    bulk_bucket,
    changes_bucket,
    expanded,
    images_are_columnar,
    log_is_columnar,
    stream_function,
)
from cqlcdc.cdc.data_dir import GENERATIONS_FILE, Truncations, load_generations
from cqlcdc.cdc.feeds import (
    FEED_PREFIX,
    SCAN_SCHEMA,
    STAGE_PREFIX,
    FeedScans,
    FeedStager,
    active_feeds,
    finalize_feeds,
    scan_output,
)
from cqlcdc.cdc.log_writer import LogWriter
from cqlcdc.cdc.outputs import (
    ERRORS,
    EXPIRY_SCHEMA,
    OUTCOMES,
    OUTCOMES_SCHEMA,
    base_output,
    error_rows,
    expiry_output,
    log_output,
    log_rows_to_arrow,
)
from cqlcdc.cdc.row_path import BucketContext, apply_record
from cqlcdc.cdc.streams import Generations
from cqlcdc.directory import Directory
from cqlcdc.errors import UnappliedWrite
from cqlcdc.failure_text import cannot_apply
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import BaseRowsBuilder
from cqlcdc.storage.bulk import (
    PK,
    TOKEN,
    VERSION,
    chunk_mask,
    decode_chunk,
    payload_views,
)
from cqlcdc.storage.bulk_state import StateRows
from cqlcdc.storage.chunk_groups import BucketWrites, split_chunks
from cqlcdc.storage.codec import (
    TickRequest,
    decode_payload,
)

# Test hook: a table (``keyspace.name``) whose every write the core refuses, as a defect
# would, to exercise containment (``cqlcdc.datadir.containment``) through the real engine and
# server. Read when the processor is made and pickled with it, so Spark executors see it too.
FAULT_TABLE_ENV = "CQLCDC_TEST_FAULT_TABLE"
TICK_PK = b""  # the partition key of clock-tick records (no real partition key is empty)


class SchemaSource(Protocol):
    """Where the processor finds table schemas (the catalog)."""

    def table_by_id(self, table_id: str, version: int | None = None) -> TableSchema | None: ...


class CoreProcessor:
    """The ``BucketProcessor`` of cqlcdc (picklable: executors rebuild the catalog from disk).

    Args:
        data_dir: the data directory's documents (catalog, CDC generations, TRUNCATE points,
            initial scans).
        catalog: the live catalog when running in the session's process.
        aws_region: the server's default ``awsRegion`` (``cqlcdc serve --aws-region``).
    """

    def __init__(
        self,
        data_dir: Directory,
        catalog: SchemaSource | None = None,
        aws_region: str = "",
    ) -> None:
        # its documents wherever it is (``cqlcdc.documents.DocumentDirectory``), not a local
        # path: the processor is pickled into executors on other machines
        self.data_dir = data_dir
        self.aws_region = aws_region  # DynamoDB Streams feeds that set no AWS_REGION get it
        self._catalog = catalog
        self._generations: Generations | None = None
        self._generations_doc = self.data_dir.document(GENERATIONS_FILE)
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
        self._generations_doc = self.data_dir.document(GENERATIONS_FILE)
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

    def bucket_groups(self, records: pa.Table) -> list[BucketGroup]:
        """The batch's work by (table_id, bucket): the records of each, and the bulk writes
        of the batch's chunks cut by bucket (``storage.chunk_groups``: a chunk holds a
        group of writes whatever buckets they touch, each is decoded once here)."""
        is_chunk_at = chunk_mask(records.column("payload"))
        if not is_chunk_at.any():
            return record_groups(records)
        groups = {
            (g.table_id, g.bucket): g
            for g in record_groups(records.filter(np.logical_not(is_chunk_at)))
        }
        for key, writes in split_chunks(records.filter(is_chunk_at)).items():
            group = groups.get(key)
            first, last = writes.record_seqs
            if group is None:
                groups[key] = BucketGroup(*key, records.slice(0, 0), first, last, writes)
            else:
                groups[key] = replace(
                    group,
                    first_seq=min(first, group.first_seq),
                    last_seq=max(last, group.last_seq),
                    parts=writes,
                )
        return [groups[key] for key in sorted(groups)]

    def process_bucket(self, group: BucketGroup, state: Any) -> dict[str, pa.Table]:

        table_id, bucket, records = group.table_id, group.bucket, group.records
        bulk: BucketWrites | None = group.parts
        version = pc.max(records.column("schema_version")).as_py() if records.num_rows else None
        if bulk is not None:
            newest = pc.max(bulk.table.column(VERSION)).as_py()
            version = newest if version is None else max(version, newest)
        if version is None:
            return {}
        latest = self._schema(table_id, version)
        if latest is None:  # the table was dropped before its writes were applied
            return {}
        if self.fault_table is not None and latest.qualified_name == self.fault_table:
            raise RuntimeError(f"fault injected by {FAULT_TABLE_ENV}={self.fault_table}")
        fragments: StateRows | None = None
        if bulk is None:
            recs = records.to_pylist()
        else:
            writes, statements = bulk.table, bulk.statements
            only_chunks = records.num_rows == 0
            if log_is_columnar(latest) and (only_chunks or _disjoint(writes, records)):
                # no state in the log: the bulk writes column-wise, and the row path's
                # records of other partitions (none reads what the other writes) beside
                columnar = bulk_bucket(latest, bucket, writes, statements, self.generations)
                if only_chunks:
                    return columnar
                rows = self._apply_rows(latest, bucket, records.to_pylist(), state, None)
                return _joined(columnar, rows)
            same_version = pc.all(pc.equal(writes.column(VERSION), latest.schema_version)).as_py()
            if only_chunks and same_version and images_are_columnar(latest):
                fragments = self._fragments(
                    state,
                    latest,
                    bucket,
                    pc.unique(writes.column(PK)),
                    pc.unique(writes.column(TOKEN)),
                )
                done = changes_bucket(
                    latest,
                    bucket,
                    writes,
                    statements,
                    fragments,
                    self.generations,
                    self.aws_region,
                )
                if done is not None:
                    return done
            # the log needs state (images, feeds) or other records interleave: one by one,
            # each write keeping its chunk's schema version (the feeds it belongs to)
            recs = records.to_pylist()
            recs += expanded(latest, writes, statements, writes.column(VERSION).to_pylist())
        return self._apply_rows(latest, bucket, recs, state, fragments)

    def _apply_rows(
        self,
        latest: TableSchema,
        bucket: int,
        recs: list[dict[str, Any]],
        state: Any,
        fragments: StateRows | None,
    ) -> dict[str, pa.Table]:
        """The row path: records applied one by one, in seq order per partition, on the
        prior state of their partitions (``fragments``, read here when not given)."""
        from cqlcdc.schema.log_table import log_table_schema
        from cqlcdc.storage.token import deserialize_partition_key

        table_id = latest.table_id
        pks = sorted({r["pk"] for r in recs})
        if fragments is None:
            tokens = sorted({r["token"] for r in recs})
            fragments = self._fragments(state, latest, bucket, pks, tokens)
        partitions = fragments.partitions(latest)
        feeds = active_feeds(latest)
        ctx = BucketContext(
            latest,
            bucket,
            FeedStager(latest, feeds, self.aws_region),
            lambda version: self._schema(table_id, version),
            self.scans,
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
        for pk_bytes, writes_of_pk in by_pk.items():
            pk = deserialize_partition_key(latest, pk_bytes)
            current = partitions.get(pk_bytes)
            token: int = writes_of_pk[0]["token"]
            writer = LogWriter(latest, pk, stream_function(token, generations))
            for rec in sorted(writes_of_pk, key=lambda r: r["seq"]):
                try:
                    current = apply_record(ctx, writer, rec, pk, current)
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
            buckets, pks, seqs, errors = (list(c) for c in zip(*out.errors, strict=True))
            keys = {"bucket": pa.array(buckets, pa.int32()), "pk": pks, "seq": seqs}
            result[ERRORS] = error_rows(pa.table(keys), errors)
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
                columnar[table_id] = schema is not None and log_is_columnar(schema)
                images[table_id] = schema is not None and images_are_columnar(schema)
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


def _disjoint(writes: pa.Table, records: pa.Table) -> bool:
    """Whether bulk writes and a bucket's other records touch no partition in common."""
    return not pc.any(pc.is_in(writes.column(PK), value_set=records.column("pk"))).as_py()


def _joined(first: dict[str, pa.Table], second: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """Two results of one bucket as one: an output both have is both's rows."""
    out = dict(first)
    for output, rows in second.items():
        out[output] = (
            pa.concat_tables([out[output], rows], promote_options="default")
            if output in out
            else rows
        )
    return out


def _unapplied(
    schema: TableSchema, bucket: int, seq: int, pk: tuple[Any, ...], err: Exception
) -> UnappliedWrite:
    """The error naming the write the core could not apply: seq, table and partition key."""
    key = ", ".join(
        f"{c.name} = {_clip(c.type.to_cqlsh(v))}"
        for c, v in zip(schema.partition_key, pk, strict=True)
    )
    where = f"table {schema.qualified_name}, bucket {bucket}, partition {key}"
    return UnappliedWrite(cannot_apply(seq, None, where, f"{type(err).__name__}: {err}"))


def _clip(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
