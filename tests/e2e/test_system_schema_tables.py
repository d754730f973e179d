"""``system.local`` and ``system_schema`` through the public API: the node's identity is the
data directory's across restarts, the schema tables show what DDL made, and the schema
version moves with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import cqlcdc

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


def test_system_local_and_schema_tables_through_the_session(spark: Any, tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    session = cqlcdc.connect(data_dir=data_dir, master="local[2]")
    try:
        (before,) = list(session.execute("SELECT * FROM system.local"))
        session.execute(KS)
        session.execute(
            "CREATE TABLE ks.t (pk int, ck text, s int static, v list<int>, "
            "PRIMARY KEY (pk, ck)) WITH CLUSTERING ORDER BY (ck DESC) "
            "AND cdc = {'enabled': true}"
        )
        (local,) = list(session.execute("SELECT * FROM system.local"))
        tables = list(
            session.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = 'ks'")
        )
        columns = list(
            session.execute(
                "SELECT column_name, kind, position, clustering_order, type "
                "FROM system_schema.columns WHERE keyspace_name = 'ks' AND table_name = 't'"
            )
        )
    finally:
        session.close()
    assert local.key == "local" and local.cluster_name == "cqlcdc"
    assert local.release_version == before.release_version
    assert local.schema_version != before.schema_version  # the DDL changed the schema
    assert [t.table_name for t in tables] == ["t", "t_scylla_cdc_log"]
    assert all("compound" in t.flags for t in tables)
    assert tables[0].id != tables[1].id and tables[1].comment == "CDC log for ks.t"
    assert [tuple(c) for c in columns] == [
        ("ck", "clustering", 0, "desc", "text"),
        ("pk", "partition_key", 0, "none", "int"),
        ("s", "static", -1, "none", "int"),
        ("v", "regular", -1, "none", "list<int>"),
    ]
    # a restart of the same data directory: the same node, the same schema
    again = cqlcdc.connect(data_dir=data_dir, master="local[2]")
    try:
        (restarted,) = list(again.execute("SELECT host_id, schema_version FROM system.local"))
    finally:
        again.close()
    assert restarted.host_id == local.host_id
    assert restarted.schema_version == local.schema_version
