"""The column-wise paths of a bucket of bulk chunks, and when each applies.

A bucket whose records are all bulk chunks (``cqlcdc.storage.bulk``) need not take the row
path one write at a time: when its table's log needs no state (``log_is_columnar``) its base
rows and log rows are made column-wise from the chunks alone (``bulk_bucket``); when the log
or the feeds need the prior state but only as plain overwriting (``images_are_columnar``,
then ``cqlcdc.cdc.bulk_images`` decides per bucket), from the chunks and the prior base rows
(``changes_bucket``). Otherwise the processor expands the chunks into ordinary records
(``expanded``) for the row path. Apart from the processor, which only chooses between them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from cqlcdc.cdc.bulk_feeds import stage_rows
from cqlcdc.cdc.bulk_images import bulk_changes, image_log_rows, keys_by_bytes
from cqlcdc.cdc.bulk_log import bulk_log_rows, columnar_rows
from cqlcdc.cdc.feeds import active_feeds, stage_output
from cqlcdc.cdc.log_writer import LogWriter, WriteInfo
from cqlcdc.cdc.outputs import base_output, log_arrow_schema, log_output, log_rows_to_arrow
from cqlcdc.cdc.streams import Generations
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.bulk import (
    NOW,
    PK,
    SEED,
    SEQ,
    TOKEN,
    BulkStatement,
    bulk_base_rows,
    chunk_mutations,
)
from cqlcdc.storage.bulk_state import StateRows
from cqlcdc.storage.codec import WritePayload
from cqlcdc.storage.vectorized import BULK_TYPES


def log_is_columnar(schema: TableSchema) -> bool:
    """Whether bulk writes to ``schema`` are logged column-wise: their log rows and feed
    records must not depend on the state (no images, no ``delta: 'keys'``, no feeds)."""
    cdc = schema.cdc
    if active_feeds(schema):
        return False
    return not cdc.enabled or (
        cdc.delta == "full" and cdc.preimage == "false" and not cdc.postimage
    )


def images_are_columnar(schema: TableSchema) -> bool:
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
    return keys_by_bytes(schema) and not log_is_columnar(schema)


def expanded(
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


def changes_bucket(
    schema: TableSchema,
    bucket: int,
    writes: pa.Table,
    statements: tuple[BulkStatement, ...],
    fragments: StateRows,
    generations: Generations,
    aws_region: str,
) -> dict[str, pa.Table] | None:
    """A bucket of bulk writes only, for a table whose log has images or that has
    changefeeds: base fragments, log rows and feed records column-wise
    (``cqlcdc.cdc.bulk_images``), or None when the writes must be applied one by one."""
    changes = bulk_changes(schema, writes, statements, fragments)
    if changes is None:
        return None
    result = {base_output(schema): bulk_base_rows(schema, writes, statements, bucket)}
    if schema.cdc.enabled:
        result[log_output(schema)] = image_log_rows(
            schema,
            log_arrow_schema(log_table_schema(schema)),
            writes,
            statements,
            bucket,
            generations,
            changes,
        )
    rendered: dict[tuple[str, str], pa.Array] = {}  # value texts, shared by the feeds
    for feed in active_feeds(schema):  # every format column-wise (cdc/bulk_feeds.py)
        staged = stage_rows(feed, schema, writes, statements, changes, rendered, aws_region)
        if staged.num_rows:
            result[stage_output(schema.table_id, feed.topic)] = staged
    return result


def bulk_bucket(
    schema: TableSchema,
    bucket: int,
    writes: pa.Table,
    statements: tuple[BulkStatement, ...],
    generations: Generations,
) -> dict[str, pa.Table]:
    """A bucket of bulk writes only, for a table whose log needs no state: base
    fragments and log rows column-wise (``cqlcdc.storage.bulk``, ``cqlcdc.cdc.bulk_log``)."""
    result = {base_output(schema): bulk_base_rows(schema, writes, statements, bucket)}
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
            generations,
        )
    ]
    if not every:  # writes whose log row splits: the log writer's way
        rest = writes.filter(~single)
        rows: list[dict[str, Any]] = []
        internal: list[tuple[int, bytes, int, int]] = []
        expiry_ttl = schema.cdc.ttl_s
        for rec in expanded(schema, rest, statements):
            payload = rec["decoded"]
            now_s = payload.now_us // 1_000_000
            writer = LogWriter(
                schema, payload.partition.pk, stream_function(rec["token"], generations)
            )
            info = WriteInfo(now_s, payload.seed, rec["seq"])
            written = writer.write(payload.partition, None, info)
            rows.extend(written)
            expiry = now_s + expiry_ttl if expiry_ttl else 0
            internal.extend([(bucket, rec["pk"], rec["seq"], expiry)] * len(written))
        parts.append(log_rows_to_arrow(log, rows, internal))
    result[log_output(schema)] = pa.concat_tables(parts)
    return result


def stream_function(token: int, gens: Generations) -> Callable[[int], bytes]:
    """The stream of a partition of ``token`` at each write time (the log writer's)."""

    def stream_of(timestamp_us: int) -> bytes:
        return gens.stream_id(token, timestamp_us)

    return stream_of
