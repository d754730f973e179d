"""ScyllaDB's own node tables: ``system.scylla_local`` (the node's enabled features),
``system.config`` (the options in force, one row per option as ``db/virtual_tables.cc``'s
``db_config_table`` answers) and ``system."IndexInfo"`` (the built secondary indexes).

cqlcdc implements ScyllaDB's CDC, and ScyllaDB's tools recognise ScyllaDB by a ``system``
table whose name holds ``scylla`` (its test suite's ``is_scylla``), then read these. The
protocol still offers no ``SCYLLA_*`` extension: there is one shard and no shard-aware port.

>>> config_rows(NodeInfo(data_dir="/d"), 16)[("data_file_directories",)][0]["value"]
'["/d"]'
"""

from __future__ import annotations

import json
from typing import Any

from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import Column, ColumnKind, TableSchema
from cqlcdc.system.local import CLUSTER_NAME, PARTITIONER, SUPPORTED_FEATURES, NodeInfo
from cqlcdc.types import native_type

DEFAULT_ADDRESS = "127.0.0.1"
DEFAULT_PORT = 9042


def _col(name: str, kind: ColumnKind = "regular", pos: int = 0) -> Column:
    return Column(name, native_type("text"), kind, pos)


TABLES: dict[tuple[str, str], TableSchema] = {
    # system_keyspace.cc: scylla_local()
    ("system", "scylla_local"): TableSchema(
        "system",
        "scylla_local",
        (_col("key", "partition_key"), _col("value")),
        table_id="system.scylla_local",
    ),
    # virtual_tables.cc: db_config_table
    ("system", "config"): TableSchema(
        "system",
        "config",
        (_col("name", "partition_key"), _col("source"), _col("type"), _col("value")),
        table_id="system.config",
    ),
    # system_keyspace.cc: built_indexes() (table_name holds the keyspace's name)
    ("system", "IndexInfo"): TableSchema(
        "system",
        "IndexInfo",
        (_col("table_name", "partition_key"), _col("index_name", "clustering")),
        table_id="system.IndexInfo",
    ),
}


def scylla_local_rows() -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """The node's local parameters: its enabled features (comma-separated, as
    ``gms::feature_service`` persists them)."""
    return {("enabled_features",): [{"key": "enabled_features", "value": SUPPORTED_FEATURES}]}


def _option(name: str, type_name: str, value: object, default: object) -> dict[str, Any]:
    """One option's row: its value as JSON (``config_src::value_as_json``); the source is
    ``cli`` when ``cqlcdc serve``'s options set it, ``default`` otherwise."""
    return {
        "name": name,
        "source": "default" if value == default else "cli",
        "type": type_name,
        "value": json.dumps(value, separators=(",", ":")),
    }


def _fixed(name: str, type_name: str, value: object) -> dict[str, Any]:
    """An option cqlcdc fixes itself (ScyllaDB's ``internal`` source)."""
    return {
        "name": name,
        "source": "internal",
        "type": type_name,
        "value": json.dumps(value, separators=(",", ":")),
    }


def config_rows(node: NodeInfo, num_buckets: int) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """``system.config``: the ScyllaDB options that apply to this node, with their values.
    Read-only: ``enable_cql_config_updates`` is false, as an UPDATE of the table is refused."""
    password = "org.apache.cassandra.auth.PasswordAuthenticator"
    allow_all = "org.apache.cassandra.auth.AllowAllAuthenticator"
    tls = {"enabled": "true" if node.tls else "false"}
    rows = [
        _option("authenticator", "string", password if node.auth else allow_all, allow_all),
        _option(
            "authorizer",
            "string",
            "org.apache.cassandra.auth.CassandraAuthorizer"
            if node.auth
            else "org.apache.cassandra.auth.AllowAllAuthorizer",
            "org.apache.cassandra.auth.AllowAllAuthorizer",
        ),
        _option("client_encryption_options", "string map", tls, {"enabled": "false"}),
        _fixed("cluster_name", "string", CLUSTER_NAME),
        _option("data_file_directories", "string list", [node.data_dir], None),
        _fixed("enable_cql_config_updates", "bool", False),
        # COMPACT STORAGE is taken (ScyllaDB's default refuses it)
        _fixed("enable_create_table_with_compact_storage", "bool", True),
        _option("listen_address", "string", node.address, DEFAULT_ADDRESS),
        _option("native_transport_port", "integer", node.port, DEFAULT_PORT),
        _fixed("num_tokens", "integer", num_buckets),
        _fixed("partitioner", "string", PARTITIONER),
        _option("rpc_address", "string", node.address, DEFAULT_ADDRESS),
    ]
    return {(r["name"],): [r] for r in rows}


def index_info_rows(catalog: Catalog) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """Every secondary index by keyspace (an index answers as soon as it is created: it
    is evaluated on the table's state, so it is built at once)."""
    parts: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for table in catalog.tables():
        for index in table.indexes:
            parts.setdefault((table.keyspace,), []).append(
                {"table_name": table.keyspace, "index_name": index.name}
            )
    for rows in parts.values():
        rows.sort(key=lambda r: r["index_name"])
    return parts


__all__ = ["TABLES", "config_rows", "index_info_rows", "scylla_local_rows"]
