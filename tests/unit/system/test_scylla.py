"""ScyllaDB's node tables (``system.scylla_local``, ``config``, ``IndexInfo``) and
Cassandra 4's ``system_virtual_schema``, as the system-table reader serves them."""

from __future__ import annotations

import doctest
import json
import uuid
from pathlib import Path

from cqlcdc.cdc.streams import Generation, Generations
from cqlcdc.cql import parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.system import scylla as system_scylla
from cqlcdc.system import virtual_schema as system_virtual_schema
from cqlcdc.system.local import NodeInfo
from cqlcdc.system.tables import SYSTEM_TABLES, SystemView, system_rows, system_table


def _catalog(tmp_path: Path) -> Catalog:
    catalog = Catalog(DocumentDirectory.of(tmp_path))
    for cql in (
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
        "'replication_factor': 1}",
        "CREATE TABLE ks.t (k int PRIMARY KEY, v int, w int)",
        "CREATE INDEX t_w ON ks.t (w)",
        "CREATE INDEX t_v ON ks.t (v)",
    ):
        catalog.execute(parse_statement(cql), None)
    return catalog


def _rows(keyspace: str, name: str, view: SystemView) -> list[dict[str, object]]:
    schema = system_table(keyspace, name)
    assert schema is not None
    return [r for p in system_rows(schema, view) for r in p.rows]


def _view(tmp_path: Path, node: NodeInfo) -> SystemView:
    gens = Generations([Generation.create(1_600_000_000_000, 4, 1)])
    return SystemView(gens, _catalog(tmp_path), node, 4)


def test_config_says_what_the_server_was_started_with(tmp_path: Path) -> None:
    plain = NodeInfo(uuid.UUID(int=1), "127.0.0.1", 9042, data_dir="/data")
    rows = {r["name"]: r for r in _rows("system", "config", _view(tmp_path, plain))}
    assert rows["authenticator"] == {
        "name": "authenticator",
        "source": "default",
        "type": "string",
        "value": '"org.apache.cassandra.auth.AllowAllAuthenticator"',
    }
    assert rows["native_transport_port"]["source"] == "default"
    assert json.loads(str(rows["data_file_directories"]["value"])) == ["/data"]
    assert json.loads(str(rows["num_tokens"]["value"])) == 4
    assert rows["num_tokens"]["source"] == "internal"
    secured = NodeInfo(uuid.UUID(int=1), "10.1.2.3", 19042, "/data", auth=True, tls=True)
    rows = {r["name"]: r for r in _rows("system", "config", _view(tmp_path / "b", secured))}
    assert json.loads(str(rows["authenticator"]["value"])).endswith("PasswordAuthenticator")
    assert json.loads(str(rows["authorizer"]["value"])).endswith("CassandraAuthorizer")
    assert json.loads(str(rows["client_encryption_options"]["value"])) == {"enabled": "true"}
    assert (rows["rpc_address"]["value"], rows["rpc_address"]["source"]) == ('"10.1.2.3"', "cli")
    assert json.loads(str(rows["native_transport_port"]["value"])) == 19042


def test_scylla_local_index_info_and_their_listing(tmp_path: Path) -> None:
    view = _view(tmp_path, NodeInfo())
    assert _rows("system", "scylla_local", view) == [
        {"key": "enabled_features", "value": "CDC,CDC_GENERATIONS_V2"}
    ]
    assert _rows("system", "IndexInfo", view) == [
        {"table_name": "ks", "index_name": "t_v"},
        {"table_name": "ks", "index_name": "t_w"},
    ]
    listed = {(t.keyspace, t.name) for t in SYSTEM_TABLES}
    assert {("system", "scylla_local"), ("system", "config"), ("system", "IndexInfo")} <= listed
    # the virtual schema describes itself and is not in system_schema
    assert not {k for k, _ in listed} & {system_virtual_schema.KS}


def test_system_virtual_schema_describes_its_own_tables(tmp_path: Path) -> None:
    view = _view(tmp_path, NodeInfo())
    ks = system_virtual_schema.KS
    assert _rows(ks, "keyspaces", view) == [{"keyspace_name": ks}]
    assert [r["table_name"] for r in _rows(ks, "tables", view)] == [
        "columns",
        "keyspaces",
        "tables",
    ]
    columns = [(r["table_name"], r["column_name"], r["kind"]) for r in _rows(ks, "columns", view)]
    assert ("columns", "column_name_bytes", "regular") in columns
    assert ("keyspaces", "keyspace_name", "partition_key") in columns
    assert len(columns) == 8 + 3 + 1


def test_the_modules_examples_run() -> None:
    assert doctest.testmod(system_scylla).failed == 0
    assert doctest.testmod(system_virtual_schema).failed == 0
