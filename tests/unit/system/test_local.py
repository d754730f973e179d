"""``system.local`` and the peers tables answer every query the clients send on connect
(the Python and Node.js drivers, gocql, cqlsh, scylla-cdc-go) with what they need: the
node's address and port from the server, a stable host id, tokens the driver's token map
takes, a release that picks the schema parser we serve, and schema agreement."""

from __future__ import annotations

import doctest
import itertools
import uuid
from pathlib import Path
from typing import Any

import pytest
from cassandra.cluster import ControlConnection
from cassandra.metadata import Metadata, Murmur3Token, SchemaParserV4, _NodeInfo, get_schema_parser
from cassandra.policies import SimpleConvictionPolicy
from cassandra.pool import Host
from cqlshlib.cqlshmain import full_cql_version

from cqlcdc.cdc.streams import Generation, Generations
from cqlcdc.cql import parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.server.responses import CQL_VERSION as SERVED_CQL_VERSION
from cqlcdc.system import local as system_local
from cqlcdc.system.local import NodeInfo
from cqlcdc.system.tables import SystemView

from .driver_schema import FakeConnection, driver_rows, select, view_rows

HOST_ID = uuid.UUID("8a3a0ab4-2cd8-4a34-b2a7-4d0d2b1d7c11")
BUCKETS = 8

CC = ControlConnection
PYTHON_DRIVER = [
    CC._SELECT_LOCAL,
    CC._SELECT_LOCAL_NO_TOKENS,
    CC._SELECT_LOCAL_NO_TOKENS_RPC_ADDRESS,
    CC._SELECT_SCHEMA_LOCAL,
    CC._SELECT_PEERS,
    CC._SELECT_PEERS_V2,
    CC._SELECT_PEERS_NO_TOKENS_TEMPLATE.format(nt_col_name="rpc_address"),
    CC._SELECT_PEERS_NO_TOKENS_V2,
    CC._SELECT_SCHEMA_PEERS_TEMPLATE.format(nt_col_name="rpc_address"),
    CC._SELECT_SCHEMA_PEERS_V2,
]
# scylladb/gocql conn.go, the Node.js driver's control-connection.js and metadata/index.js,
# cqlsh 6's get_connection_versions, scylla-cdc-go's cluster size
OTHER_CLIENTS = [
    "SELECT broadcast_address, cluster_name, data_center, host_id, listen_address, "
    "partitioner, rack, release_version, rpc_address, schema_version, tokens "
    "FROM system.local WHERE key='local'",
    "SELECT peer, data_center, host_id, preferred_ip, rack, release_version, rpc_address, "
    "schema_version, tokens FROM system.peers",
    "SELECT peer, data_center, host_id, native_address, native_port, preferred_ip, rack, "
    "release_version, schema_version, tokens FROM system.peers_v2",
    "SELECT host_id, data_center, rack, schema_version, preferred_ip FROM system.peers_v2",
    "SELECT schema_version FROM system.local WHERE key='local'",
    "SELECT * FROM system.local WHERE key='local'",
    "SELECT schema_version FROM system.local",
    "SELECT schema_version FROM system.peers",
    "select * from system.local where key = 'local'",
]


def _view(tmp_path: Path, node: NodeInfo) -> SystemView:
    catalog = Catalog(DocumentDirectory.of(tmp_path))
    catalog.execute(
        parse_statement(
            "CREATE KEYSPACE ks WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        ),
        None,
    )
    generations = Generations([Generation.create(1_600_000_000_000, BUCKETS, 1)])
    return SystemView(generations, catalog, node, BUCKETS)


def _local(tmp_path: Path, node: NodeInfo) -> dict[str, Any]:
    result = select(CC._SELECT_LOCAL, view_rows(_view(tmp_path, node)))
    (row,) = driver_rows(result)
    return row


@pytest.mark.parametrize("query", PYTHON_DRIVER + OTHER_CLIENTS)
def test_every_clients_connect_query_is_answered(tmp_path: Path, query: str) -> None:
    rows = select(query, view_rows(_view(tmp_path, NodeInfo(host_id=HOST_ID)))).rows
    assert len(rows) == (1 if "system.local" in query else 0)


def test_the_cdc_library_counts_one_node(tmp_path: Path) -> None:
    rows_of = view_rows(_view(tmp_path, NodeInfo(host_id=HOST_ID)))
    assert select("SELECT COUNT(*) FROM system.peers", rows_of).rows == [(0,)]


@pytest.mark.parametrize(("address", "port"), [("10.1.2.3", 19042), ("::1", 9142)])
def test_the_driver_reads_the_address_and_port_the_server_listens_on(
    tmp_path: Path, address: str, port: int
) -> None:
    row = _local(tmp_path, NodeInfo(host_id=HOST_ID, address=address, port=port))
    assert _NodeInfo.get_broadcast_rpc_address(row) == address
    assert _NodeInfo.get_broadcast_rpc_port(row) == port
    assert _NodeInfo.get_broadcast_address(row) == address
    assert row["listen_address"] == address
    assert row["host_id"] == HOST_ID
    # the checks a peer row must pass would pass for this node
    assert ControlConnection._is_valid_peer(row)


def test_the_default_node_is_the_loopback(tmp_path: Path) -> None:
    row = _local(tmp_path, NodeInfo())
    assert row["rpc_address"] == "127.0.0.1" and row["rpc_port"] == 9042
    assert row["key"] == "local" and row["bootstrapped"] == "COMPLETED"


def test_tokens_build_the_drivers_token_map(tmp_path: Path) -> None:
    row = _local(tmp_path, NodeInfo(host_id=HOST_ID))
    assert row["partitioner"] == "org.apache.cassandra.dht.Murmur3Partitioner"
    tokens = sorted(int(t) for t in row["tokens"])
    assert len(tokens) == BUCKETS and tokens[-1] == 2**63 - 1
    # one token per bucket: the upper end of its token range
    assert all(b - a == 2**64 // BUCKETS for a, b in itertools.pairwise(tokens))
    metadata = Metadata()
    host = Host("127.0.0.1", SimpleConvictionPolicy, host_id=HOST_ID)
    metadata.rebuild_token_map(row["partitioner"], {host: row["tokens"]})
    assert metadata.token_map is not None
    assert metadata.token_map.token_class is Murmur3Token
    assert len(metadata.token_map.ring) == BUCKETS


def test_release_and_cql_version_pick_what_we_serve(tmp_path: Path) -> None:
    row = _local(tmp_path, NodeInfo(host_id=HOST_ID))
    conn = FakeConnection(view_rows(_view(tmp_path / "p", NodeInfo())))
    parser = get_schema_parser(conn, row["release_version"], row.get("dse_version"), 1.0)
    assert type(parser) is SchemaParserV4
    # cqlsh shows the CQL version of system.local; the server offers it in SUPPORTED
    assert row["cql_version"] == SERVED_CQL_VERSION
    assert full_cql_version(row["cql_version"])[1][:2] == (3, 4)
    assert row["native_protocol_version"] == "4"
    assert row["data_center"] == "datacenter1" and row["rack"] == "rack1"
    assert "CDC_GENERATIONS_V2" in row["supported_features"].split(",")


def test_schema_agreement_with_no_peers(tmp_path: Path) -> None:
    rows_of = view_rows(_view(tmp_path, NodeInfo(host_id=HOST_ID)))
    conn = FakeConnection(rows_of)
    _, local = conn.answer(CC._SELECT_SCHEMA_LOCAL)
    _, peers = conn.answer(CC._SELECT_SCHEMA_PEERS_V2)
    assert local.parsed_rows[0][0] is not None and peers.parsed_rows == []
    # None: every node (the one) reports the same schema version
    mismatches = ControlConnection._get_schema_mismatches(
        None,  # type: ignore[arg-type]
        peers,
        local,
        "127.0.0.1",
    )
    assert mismatches is None


def test_the_modules_examples_run() -> None:
    assert doctest.testmod(system_local).failed == 0
