"""What ScyllaDB refuses or takes, through ``cqlcdc serve`` with the cassandra-driver: slice
conditions on durations, element assignments on frozen collections, NetworkTopologyStrategy
data-centre names, DESC listings with the system keyspaces, a set index's description, the
grammar's empty column entry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy
from cassandra.protocol import ConfigurationException

import cqlcdc
from cqlcdc.server import CqlServer

pytestmark = pytest.mark.spark

SERVED: dict[str, Any] = {}  # the module's server's coordinator, for embedded sessions
KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture(scope="module")
def cql(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("valid"), master="local[2]")
    srv = CqlServer(session.coordinator, port=0)
    srv.start_in_thread()
    SERVED["coordinator"] = session.coordinator
    cluster = Cluster([srv.host], port=srv.port, load_balancing_policy=RoundRobinPolicy())
    try:
        driver = cluster.connect()
        driver.default_timeout = 60  # DDL waits for the pipeline; the test machine is shared
        driver.execute(KS)
        driver.set_keyspace("ks")
        yield driver
    finally:
        cluster.shutdown()
        srv.stop_thread()
        session.close()


def test_slice_conditions_on_durations(cql: Any) -> None:
    cql.execute("CREATE TABLE dur (k int PRIMARY KEY, v int, d duration)")
    for op in (">", ">=", "<", "<="):
        with pytest.raises(InvalidRequest, match="Slice conditions are not supported on durations"):
            cql.execute(f"UPDATE dur SET v = 3 WHERE k = 0 IF d {op} 1s")
    assert cql.execute("UPDATE dur SET v = 3 WHERE k = 0 IF d = 1s").one()[0] is False
    # refused when prepared too, as ScyllaDB validates conditions at PREPARE
    with pytest.raises(InvalidRequest, match="Slice conditions are not supported on durations"):
        cql.prepare("UPDATE dur SET v = 3 WHERE k = 0 IF d > ?")


def test_element_assignment_on_a_frozen_map(cql: Any) -> None:
    cql.execute("CREATE TABLE fz (k int PRIMARY KEY, e frozen<map<int, int>>)")
    with pytest.raises(
        InvalidRequest, match=r"Invalid operation \(e\[1\] = 6\) for frozen collection column e"
    ):
        cql.execute("UPDATE fz SET e[1] = 6 WHERE k = 1")
    with pytest.raises(
        InvalidRequest, match=r"Invalid operation \(e\[\?\] = \?\) for frozen collection column e"
    ):
        cql.prepare("UPDATE fz SET e[?] = ? WHERE k = 1")
    assert cql.execute("SELECT * FROM fz").all() == []


def test_network_topology_strategy_knows_one_data_centre(cql: Any) -> None:
    (dc,) = cql.execute("SELECT data_center FROM system.local").one()
    assert dc == "datacenter1"
    with pytest.raises(
        ConfigurationException,
        match=r"Unrecognized strategy option \{nosuchdc\} passed to NetworkTopologyStrategy",
    ):
        cql.execute(
            "CREATE KEYSPACE bad WITH replication = "
            "{'class': 'NetworkTopologyStrategy', 'nosuchdc': 3}"
        )
    cql.execute(
        "CREATE KEYSPACE nts WITH replication = {'class': 'NetworkTopologyStrategy', '"
        + dc
        + "': 1}"
    )
    with pytest.raises(ConfigurationException, match=r"\{INVALID_DC\}"):
        cql.execute(
            "ALTER KEYSPACE nts WITH replication = {'class': 'NetworkTopologyStrategy', "
            f"'{dc}': 1, 'INVALID_DC': 1}}"
        )


def test_desc_listings_show_the_system_keyspaces_and_tables(cql: Any) -> None:
    keyspaces = [r.name for r in cql.execute("DESC KEYSPACES")]
    assert keyspaces == sorted(keyspaces)
    assert {"ks", "system", "system_schema", "system_distributed"} <= set(keyspaces)
    tables = [(r.keyspace_name, r.name) for r in cql.execute("DESC TABLES")]  # USEd: ks only
    assert tables and {k for k, _ in tables} == {"ks"}
    other = cqlcdc_driver_session(cql)
    listed = {(r.keyspace_name, r.name) for r in other.execute("DESC TABLES")}
    assert {("system", "local"), ("system_schema", "tables")} <= listed


def test_desc_rows_quote_names_as_scylla_and_the_printers_agree(cql: Any) -> None:
    """description::serialize quotes keyspace_name and name where needed (cqlsh prints them
    as they come); ``cqlcdc shell --connect`` prints what the embedded engine prints."""
    from cqlcdc.remote.session import RemoteSession
    from cqlcdc.session import Session

    cql.execute('CREATE TABLE "Odd" (k int PRIMARY KEY)')
    cql.execute('CREATE TABLE "select" (k int PRIMARY KEY)')
    rows = {(r.keyspace_name, r.name) for r in cql.execute("DESC TABLES")}
    assert {("ks", '"Odd"'), ("ks", '"select"')} <= rows
    (row,) = cql.execute('DESC TABLE ks."Odd"')
    assert (row.keyspace_name, row.type, row.name) == ("ks", "table", '"Odd"')
    host, port = cql.cluster.contact_points[0], cql.cluster.port
    remote = RemoteSession(host, port)
    local = Session(SERVED["coordinator"])
    try:
        for text in ("DESC TABLES", "DESC KEYSPACES", 'DESC TABLE ks."Odd"'):
            for s in (remote, local):
                s.execute("USE ks")
            assert remote.execute(text).one()[0] == local.execute(text).one()[0]
        for s in (remote, local):
            s.execute("USE system")
        listed = local.execute("DESC TABLES").one()[0]
        assert remote.execute("DESC TABLES").one()[0] == listed
        assert "local  peers" in listed
        assert local.execute("SELECT data_center FROM local").one()[0] == "datacenter1"
    finally:
        remote.close()
        local.close()


def cqlcdc_driver_session(cql: Any) -> Any:
    """A second driver session without a USEd keyspace."""
    return cql.cluster.connect()


def test_a_set_index_is_described_as_values(cql: Any) -> None:
    cql.execute("CREATE TABLE st (k int PRIMARY KEY, s set<int>)")
    cql.execute("CREATE INDEX st_s ON st (values(s))")
    (row,) = cql.execute("DESC INDEX ks.st_s")
    assert row.create_statement == "CREATE INDEX st_s ON ks.st(values(s));"
    cql.execute("INSERT INTO st (k, s) VALUES (1, {7})")
    assert [r.k for r in cql.execute("SELECT k FROM st WHERE s CONTAINS 7")] == [1]


def test_an_empty_column_entry_is_taken(cql: Any) -> None:
    cql.execute("CREATE TABLE em (a int, , b int, PRIMARY KEY (a),)")
    cql.execute("INSERT INTO em (a, b) VALUES (1, 2)")
    assert list(cql.execute("SELECT a, b FROM em").one()) == [1, 2]
