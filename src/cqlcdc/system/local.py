"""``system.local``, ``system.peers`` and ``system.peers_v2``: the one node a client sees.

Drivers read these on connect (cluster name, partitioner, tokens, data center, host id,
addresses and ports) and read ``schema_version`` after every DDL to wait for schema
agreement, so it changes whenever the catalog does. The columns are Cassandra 4's, with
ScyllaDB's ``supported_features``.

>>> NodeInfo().address
'127.0.0.1'
"""

from __future__ import annotations

import ipaddress
import uuid
from dataclasses import dataclass
from typing import Any

from cqlcdc.schema.catalog import DATACENTER
from cqlcdc.schema.model import Column, ColumnKind, TableSchema
from cqlcdc.storage.token import MIN_TOKEN
from cqlcdc.types import MapType, SetType, native_type

CLUSTER_NAME = "cqlcdc"
# clients pick features by it: cqlsh 6 runs DESCRIBE on the server only from 4.0 on, and
# the drivers then read system_schema as Cassandra 4 lays it out (which is what we serve)
RELEASE_VERSION = "4.0.11"
# what the server's SUPPORTED answer offers, so cqlsh shows one CQL version
CQL_VERSION = "3.4.5"
NATIVE_PROTOCOL_VERSION = "4"
# ScyllaDB's comma-separated gossip features: the ones this node's CDC tables follow
SUPPORTED_FEATURES = "CDC,CDC_GENERATIONS_V2"
PARTITIONER = "org.apache.cassandra.dht.Murmur3Partitioner"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """Where this node is reached and who it is: the context ``system.local`` is computed
    in. The coordinator keeps the data directory's host id (the same on every restart);
    the server fills in the address and port it listens on, and whether it requires a
    login and serves TLS (``system.config``)."""

    host_id: uuid.UUID = uuid.UUID(int=0)  # noqa: RUF009 - an immutable value
    address: str = "127.0.0.1"
    port: int = 9042
    data_dir: str = ""
    auth: bool = False
    tls: bool = False


def _col(name: str, type_name: str, kind: ColumnKind = "regular", pos: int = 0) -> Column:
    return Column(name, native_type(type_name), kind, pos)


_TOKENS = Column("tokens", SetType(native_type("text"), frozen=True), "regular")
_PEER_COLUMNS = (
    _col("data_center", "text"),
    _col("host_id", "uuid"),
    _col("rack", "text"),
    _col("release_version", "text"),
    _col("schema_version", "uuid"),
    _col("supported_features", "text"),
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
            _col("broadcast_port", "int"),
            _col("cluster_name", "text"),
            _col("cql_version", "text"),
            _col("data_center", "text"),
            _col("gossip_generation", "int"),
            _col("host_id", "uuid"),
            _col("listen_address", "inet"),
            _col("listen_port", "int"),
            _col("native_protocol_version", "text"),
            _col("partitioner", "text"),
            _col("rack", "text"),
            _col("release_version", "text"),
            _col("rpc_address", "inet"),
            _col("rpc_port", "int"),
            _col("schema_version", "uuid"),
            _col("supported_features", "text"),
            _TOKENS,
            Column("truncated_at", MapType(native_type("uuid"), native_type("blob")), "regular"),
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


def local_rows(
    node: NodeInfo, version: uuid.UUID, num_buckets: int
) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    """``system.local``'s one row; ``system.peers`` and ``peers_v2`` are empty.

    Args:
        node: this node's identity and address.
        version: the schema version (``system_schema.schema_version``).
        num_buckets: token buckets; the node owns one token per bucket (its upper end).
    """
    address = ipaddress.ip_address(node.address)
    span = 1 << 64
    tokens = frozenset(
        str(MIN_TOKEN + (span * (i + 1)) // num_buckets - 1) for i in range(num_buckets)
    )
    row = {
        "key": "local",
        "bootstrapped": "COMPLETED",
        "broadcast_address": address,
        # no gossip: no storage port, no generation, no truncation records
        "broadcast_port": None,
        "cluster_name": CLUSTER_NAME,
        "cql_version": CQL_VERSION,
        "data_center": DATACENTER,
        "gossip_generation": None,
        "host_id": node.host_id,
        "listen_address": address,
        "listen_port": None,
        "native_protocol_version": NATIVE_PROTOCOL_VERSION,
        "partitioner": PARTITIONER,
        "rack": "rack1",
        "release_version": RELEASE_VERSION,
        "rpc_address": address,
        "rpc_port": node.port,
        "schema_version": version,
        "supported_features": SUPPORTED_FEATURES,
        "tokens": tokens,
        "truncated_at": None,
    }
    return {("local",): [row]}
