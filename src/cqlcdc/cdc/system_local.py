"""``system.local``, ``system.peers`` and ``system.peers_v2``: the one node a client sees.

Drivers read these on connect (cluster name, partitioner, tokens, data center, host id)
and read ``schema_version`` after every DDL to wait for schema agreement, so it changes
whenever the catalog does.

>>> NodeInfo().address
'127.0.0.1'
"""

from __future__ import annotations

import hashlib
import ipaddress
import uuid
from dataclasses import dataclass
from typing import Any

from cqlcdc.schema.model import Column, ColumnKind, TableSchema
from cqlcdc.storage.token import MIN_TOKEN
from cqlcdc.types import SetType, native_type

CLUSTER_NAME = "cqlcdc"
# clients pick features by it: cqlsh 6 runs DESCRIBE on the server only from 4.0 on, and
# the drivers then read system_schema as Cassandra 4 lays it out (which is what we serve)
RELEASE_VERSION = "4.0.11"
CQL_VERSION = "3.3.1"
PARTITIONER = "org.apache.cassandra.dht.Murmur3Partitioner"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """Where this node is reached and who it is (the server fills in its address)."""

    host_id: uuid.UUID = uuid.UUID(int=0)  # noqa: RUF009 - an immutable value
    address: str = "127.0.0.1"
    port: int = 9042


def _col(name: str, type_name: str, kind: ColumnKind = "regular", pos: int = 0) -> Column:
    return Column(name, native_type(type_name), kind, pos)


_TOKENS = Column("tokens", SetType(native_type("text"), frozen=True), "regular")
_PEER_COLUMNS = (
    _col("data_center", "text"),
    _col("host_id", "uuid"),
    _col("rack", "text"),
    _col("release_version", "text"),
    _col("schema_version", "uuid"),
    _TOKENS,
)
TABLES: dict[tuple[str, str], TableSchema] = {
    ("system", "local"): TableSchema(
        "system",
        "local",
        (
            _col("key", "text", "partition_key"),
            _col("bootstrapped", "text"),
            _col("broadcast_address", "inet"),
            _col("cluster_name", "text"),
            _col("cql_version", "text"),
            _col("data_center", "text"),
            _col("host_id", "uuid"),
            _col("listen_address", "inet"),
            _col("native_protocol_version", "text"),
            _col("partitioner", "text"),
            _col("rack", "text"),
            _col("release_version", "text"),
            _col("rpc_address", "inet"),
            _col("rpc_port", "int"),
            _col("schema_version", "uuid"),
            _TOKENS,
        ),
        table_id="system.local",
    ),
    ("system", "peers"): TableSchema(
        "system",
        "peers",
        (
            _col("peer", "inet", "partition_key"),
            _col("preferred_ip", "inet"),
            _col("rpc_address", "inet"),
            *_PEER_COLUMNS,
        ),
        table_id="system.peers",
    ),
    ("system", "peers_v2"): TableSchema(
        "system",
        "peers_v2",
        (
            _col("peer", "inet", "partition_key"),
            _col("peer_port", "int", "clustering"),
            _col("native_address", "inet"),
            _col("native_port", "int"),
            _col("preferred_ip", "inet"),
            _col("preferred_port", "int"),
            *_PEER_COLUMNS,
        ),
        table_id="system.peers_v2",
    ),
}


def schema_version(tables: list[TableSchema], keyspaces: list[str]) -> uuid.UUID:
    """A version of the whole schema: equal schemas, equal versions; any DDL changes it."""
    digest = hashlib.md5(usedforsecurity=False)
    for ks in sorted(keyspaces):
        digest.update(f"k:{ks}\n".encode())
    for t in sorted(tables, key=lambda t: t.table_id):
        digest.update(f"t:{t.table_id}:{t.schema_version}:{t.keyspace}.{t.name}\n".encode())
    return uuid.UUID(bytes=digest.digest(), version=3)


def local_rows(
    node: NodeInfo, version: uuid.UUID, num_buckets: int
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """``system.local``'s one row; ``system.peers`` and ``peers_v2`` are empty."""
    address = ipaddress.ip_address(node.address)
    span = 1 << 64
    tokens = frozenset(
        str(MIN_TOKEN + (span * (i + 1)) // num_buckets - 1) for i in range(num_buckets)
    )
    row = {
        "key": "local",
        "bootstrapped": "COMPLETED",
        "broadcast_address": address,
        "cluster_name": CLUSTER_NAME,
        "cql_version": CQL_VERSION,
        "data_center": "datacenter1",
        "host_id": node.host_id,
        "listen_address": address,
        "native_protocol_version": "4",
        "partitioner": PARTITIONER,
        "rack": "rack1",
        "release_version": RELEASE_VERSION,
        "rpc_address": address,
        "rpc_port": node.port,
        "schema_version": version,
        "tokens": tokens,
    }
    return {("local",): [row]}
