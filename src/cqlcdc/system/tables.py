"""The system tables: virtual, read-only, computed from the catalog, the data directory's
CDC generations and the node's address, and read by the normal CQL evaluator.

This module dispatches to ``system_local`` (``system.local``/``peers``/``peers_v2``),
``system_scylla`` (``scylla_local``, ``config``, ``IndexInfo``), ``system_schema`` (the
schema tables) and ``system_virtual_schema``, and serves the tables CDC clients discover
generations and streams with (reference 6): ``system_distributed.cdc_generation_timestamps``
and ``cdc_streams_descriptions_v2`` (the vnode-based discovery queries of ScyllaDB's CDC
client libraries), and the tablets-style ``system.cdc_timestamps`` and ``system.cdc_streams``.
It also declares cqlcdc's ``system_cqlcdc`` tables, whose rows ``cqlcdc.feed_tables`` reads.

>>> [c.name for c in system_table("system_schema", "tables").primary_key]
['keyspace_name', 'table_name']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cqlcdc.cdc.streams import Generations
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import Column, ColumnKind, Keyspace, TableSchema
from cqlcdc.schema.system_catalog import SystemCatalog
from cqlcdc.storage.select import PartitionRows
from cqlcdc.storage.token import murmur3_token
from cqlcdc.system import local as system_local
from cqlcdc.system import schema as system_schema
from cqlcdc.system import scylla as system_scylla
from cqlcdc.system import virtual_schema as system_virtual_schema
from cqlcdc.types import SetType, native_type

# cqlcdc's own: the changefeed topics over CQL (rows served by cqlcdc.feed_tables)
FEEDS_KEYSPACE = "system_cqlcdc"
SYSTEM_KEYSPACES = (
    "system",
    "system_distributed",
    "system_schema",
    system_virtual_schema.KS,
    FEEDS_KEYSPACE,
)


def _col(name: str, type_name: str, kind: ColumnKind, pos: int = 0, desc: bool = False) -> Column:
    return Column(name, native_type(type_name), kind, pos, desc)


_TABLES: dict[tuple[str, str], TableSchema] = {
    ("system_distributed", "cdc_generation_timestamps"): TableSchema(
        "system_distributed",
        "cdc_generation_timestamps",
        (
            _col("key", "text", "partition_key"),
            _col("time", "timestamp", "clustering", 0, True),
            _col("expired", "timestamp", "regular"),
        ),
        table_id="system_distributed.cdc_generation_timestamps",
    ),
    ("system_distributed", "cdc_streams_descriptions_v2"): TableSchema(
        "system_distributed",
        "cdc_streams_descriptions_v2",
        (
            _col("time", "timestamp", "partition_key"),
            _col("range_end", "bigint", "clustering"),
            Column("streams", SetType(native_type("blob"), frozen=True), "regular"),
        ),
        table_id="system_distributed.cdc_streams_descriptions_v2",
    ),
    ("system", "cdc_timestamps"): TableSchema(
        "system",
        "cdc_timestamps",
        (
            _col("keyspace_name", "text", "partition_key", 0),
            _col("table_name", "text", "partition_key", 1),
            _col("timestamp", "timestamp", "clustering", 0, True),
        ),
        table_id="system.cdc_timestamps",
    ),
    (FEEDS_KEYSPACE, "changefeed_partitions"): TableSchema(
        FEEDS_KEYSPACE,
        "changefeed_partitions",
        (
            _col("feed", "text", "partition_key"),  # keyspace.table/feed
            _col("partition", "int", "clustering"),
            _col("earliest_offset", "bigint", "regular"),  # the oldest retained record
            _col("next_offset", "bigint", "regular"),  # the offset the next record gets
        ),
        table_id=f"{FEEDS_KEYSPACE}.changefeed_partitions",
    ),
    (FEEDS_KEYSPACE, "changefeed_records"): TableSchema(
        FEEDS_KEYSPACE,
        "changefeed_records",
        (
            _col("feed", "text", "partition_key", 0),
            _col("partition", "int", "partition_key", 1),
            _col("offset", "bigint", "clustering"),
            _col("key", "text", "regular"),  # the message key as JSON text (null: none)
            _col("value", "text", "regular"),  # the message value as JSON text
        ),
        table_id=f"{FEEDS_KEYSPACE}.changefeed_records",
    ),
    ("system", "cdc_streams"): TableSchema(
        "system",
        "cdc_streams",
        (
            _col("keyspace_name", "text", "partition_key", 0),
            _col("table_name", "text", "partition_key", 1),
            _col("timestamp", "timestamp", "clustering", 0),
            _col("stream_state", "tinyint", "clustering", 1),
            _col("stream_id", "blob", "clustering", 2),
        ),
        table_id="system.cdc_streams",
    ),
}


def system_table(keyspace: str, name: str) -> TableSchema | None:
    """The schema of a system table, or None when there is no such table."""
    key = (keyspace, name)
    for tables in (
        _TABLES,
        system_local.TABLES,
        system_scylla.TABLES,
        system_schema.TABLES,
        system_virtual_schema.TABLES,
    ):
        if key in tables:
            return tables[key]
    return None


_LOCAL = (("class", "org.apache.cassandra.locator.LocalStrategy"),)
# as ScyllaDB makes them (system_distributed_keyspace.cc: SimpleStrategy, RF 3)
SYSTEM_KEYSPACE_SCHEMAS = (
    Keyspace("system", _LOCAL),
    # listed so cqlsh prints LIST ROLES/PERMISSIONS (it looks the keyspace up, then fakes the
    # tables' metadata); the roles themselves are never a readable table (cqlcdc.auth)
    Keyspace(
        "system_auth",
        (("class", "org.apache.cassandra.locator.SimpleStrategy"), ("replication_factor", "1")),
    ),
    Keyspace(
        "system_distributed",
        (("class", "org.apache.cassandra.locator.SimpleStrategy"), ("replication_factor", "3")),
    ),
    Keyspace("system_schema", _LOCAL),
    Keyspace(FEEDS_KEYSPACE, _LOCAL),
)
# what system_schema lists (system_virtual_schema describes itself, as in Cassandra 4)
SYSTEM_TABLES: tuple[TableSchema, ...] = (
    *_TABLES.values(),
    *system_local.TABLES.values(),
    *system_scylla.TABLES.values(),
    *system_schema.TABLES.values(),
)


# what DESCRIBE describes beside the catalog (ScyllaDB describes system keyspaces too)
SYSTEM_CATALOG = SystemCatalog(SYSTEM_KEYSPACE_SCHEMAS, SYSTEM_TABLES)


def system_listing() -> dict[str, list[str]]:
    """The system keyspaces and their tables' names, as DESC KEYSPACES / TABLES list them
    (ScyllaDB lists its system keyspaces and tables there too)."""
    return SYSTEM_CATALOG.names()


@dataclass(frozen=True, slots=True)
class SystemView:
    """What the virtual system tables are computed from: the CDC generations, the catalog
    (a snapshot), the node clients see (host id, address, port) and the token buckets."""

    generations: Generations
    catalog: Catalog
    node: system_local.NodeInfo
    num_buckets: int


def _token_of(schema: TableSchema, pk: tuple[Any, ...]) -> int:
    from cqlcdc.storage.token import serialize_partition_key

    return murmur3_token(serialize_partition_key(schema, pk))


def system_rows(schema: TableSchema, view: SystemView) -> list[PartitionRows]:
    """The current content of a system table, as partitions of rows in clustering order."""
    gens = view.generations.generations
    key = (schema.keyspace, schema.name)
    parts: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    catalog = view.catalog
    tables = catalog.tables()
    cdc_tables = [t for t in tables if t.cdc.enabled]
    source = system_schema.SchemaSource(
        catalog.keyspaces(), tables, catalog.user_types, SYSTEM_KEYSPACE_SCHEMAS, SYSTEM_TABLES
    )
    if key in system_schema.TABLES:
        parts = system_schema.schema_rows(schema.name, source)
    elif key in system_local.TABLES:
        if key == ("system", "local"):
            version = system_schema.schema_version(source)
            parts = system_local.local_rows(view.node, version, view.num_buckets)
    elif key in system_virtual_schema.TABLES:
        parts = system_virtual_schema.virtual_schema_rows(schema.name)
    elif key == ("system", "scylla_local"):
        parts = system_scylla.scylla_local_rows()
    elif key == ("system", "config"):
        parts = system_scylla.config_rows(view.node, view.num_buckets)
    elif key == ("system", "IndexInfo"):
        parts = system_scylla.index_info_rows(catalog)
    elif key == ("system_distributed", "cdc_generation_timestamps"):
        parts[("timestamps",)] = [
            {"key": "timestamps", "time": g.timestamp_ms, "expired": None}
            for g in sorted(gens, key=lambda g: -g.timestamp_ms)
        ]
    elif key == ("system_distributed", "cdc_streams_descriptions_v2"):
        for g in gens:
            parts[(g.timestamp_ms,)] = [
                {
                    "time": g.timestamp_ms,
                    "range_end": g.range_end(i),
                    "streams": frozenset({g.streams[i]}),
                }
                for i in range(g.num_ranges)
            ]
    elif schema.keyspace == FEEDS_KEYSPACE:
        # read from the topics' files, restricted by the WHERE clause: not a catalog view
        raise ValueError(f"{schema.qualified_name} is read by cqlcdc.feed_tables")
    else:
        current = max(g.timestamp_ms for g in gens)
        for t in cdc_tables:
            pk = (t.keyspace, t.name)
            if key == ("system", "cdc_timestamps"):
                parts[pk] = [
                    {"keyspace_name": t.keyspace, "table_name": t.name, "timestamp": g.timestamp_ms}
                    for g in sorted(gens, key=lambda g: -g.timestamp_ms)
                ]
            else:
                rows = []
                for g in sorted(gens, key=lambda g: g.timestamp_ms):
                    state = 0 if g.timestamp_ms == current else 1
                    for sid in sorted(g.streams):
                        rows.append(
                            {
                                "keyspace_name": t.keyspace,
                                "table_name": t.name,
                                "timestamp": g.timestamp_ms,
                                "stream_state": state,
                                "stream_id": sid,
                            }
                        )
                parts[pk] = rows
    return [PartitionRows(_token_of(schema, pk), pk, rows) for pk, rows in parts.items()]
