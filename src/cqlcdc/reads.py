"""CQL reads: the committed partitions a SELECT needs, from base, log and system tables.

Reads see every output at the versions of the last fully committed micro-batch (the
engine's snapshot), so a write and its log rows appear together.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.processor import base_output, log_output, merge_fragments
from cqlcdc.cdc.system_tables import SYSTEM_KEYSPACES, SystemView, system_rows
from cqlcdc.cql import ast
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.mutations import WriteContext
from cqlcdc.storage.select import PartitionRows, ResultSet, base_partition_rows, evaluate, prepare
from cqlcdc.storage.token import deserialize_partition_key, serialize_partition_key
from cqlcdc.storage.view import PartitionView

if TYPE_CHECKING:
    from cqlcdc.coordinator import Coordinator


def select(
    coordinator: Coordinator,
    schema: TableSchema,
    stmt: ast.Select,
    parameters: Sequence[Any] | Mapping[str, Any] | None = None,
) -> ResultSet:
    """Evaluate ``stmt`` on ``schema`` at the last committed batch."""
    now_s = time.time_ns() // 1_000_000_000
    now_us = time.time_ns() // 1000
    ctx = WriteContext(now_us, now_us, 0, bindings=parameters)
    res = prepare(schema, stmt, ctx)
    snap = coordinator.engine.snapshot()
    catalog = coordinator.catalog
    if schema.keyspace in SYSTEM_KEYSPACES:
        view = SystemView(
            coordinator.generations, catalog, coordinator.node, coordinator.num_buckets
        )
        parts = system_rows(schema, view)
    elif schema.log_of is not None:
        base = catalog.table(schema.keyspace, schema.log_of)
        parts = _log_partitions(base, snap, res, now_s)
    else:
        truncated = coordinator.processor.truncations.upto(schema.table_id)
        parts = _base_partitions(schema, snap, res, now_s, truncated)
    return evaluate(schema, stmt, res, parts, now_s, ctx)


def _base_partitions(
    schema: TableSchema, snap: Any, res: Any, now_s: int, truncated: int
) -> list[PartitionRows]:
    output = base_output(schema)
    if snap.version_of(output) is None:
        return []
    filters: list[tuple[str, str, Any]] | None = None
    if res.partition_keys is not None:
        keys = [serialize_partition_key(schema, pk) for pk in res.partition_keys]
        filters = [("pk", "in", keys)]
    if truncated:
        filters = [*(filters or []), ("seq", ">", truncated)]
    table = snap.read(output, filters, ["pk", "token", "seq", "fragment"])
    frags: dict[bytes, list[tuple[int, bytes]]] = {}
    tokens: dict[bytes, int] = {}
    for row in table.to_pylist():
        frags.setdefault(row["pk"], []).append((row["seq"], row["fragment"]))
        tokens[row["pk"]] = row["token"]
    view = PartitionView(schema)
    out = []
    for pk_bytes, items in frags.items():
        pk = deserialize_partition_key(schema, pk_bytes)
        part = merge_fragments(pk, [f for _, f in sorted(items)])
        out.append(base_partition_rows(schema, part, tokens[pk_bytes], now_s, view))
    return out


def _log_partitions(
    base: TableSchema | None, snap: Any, res: Any, now_s: int
) -> list[PartitionRows]:
    if base is None:
        return []
    output = log_output(base)
    if snap.version_of(output) is None:
        return []
    table = snap.read(output)
    if res.partition_keys is not None:
        wanted = [pk[0] for pk in res.partition_keys]
        table = table.filter(
            pc.is_in(table["cdc$stream_id"], value_set=pa.array(wanted, type=pa.binary()))
        )
    expiry = table["_expiry_s"]
    table = table.filter(pc.or_(pc.equal(expiry, 0), pc.greater(expiry, now_s)))
    current = log_table_schema(base)
    by_stream: dict[bytes, list[dict[str, Any]]] = {}
    names = set(table.column_names)
    columns = {c.name: c for c in current.columns if c.name in names}
    for raw in table.to_pylist():
        row = {
            n: (None if raw[n] is None else c.type.from_arrow(raw[n])) for n, c in columns.items()
        }
        stream: bytes = raw["cdc$stream_id"]
        by_stream.setdefault(stream, []).append(row)
    time_type = current.column("cdc$time")
    assert time_type is not None
    out = []
    for stream, rows in by_stream.items():
        rows.sort(key=lambda r: (time_type.type.sort_key(r["cdc$time"]), r["cdc$batch_seq_no"]))
        token = int.from_bytes(stream[:8], "big", signed=True)
        out.append(PartitionRows(token, (stream,), rows))
    return out
