"""What other clients rely on beyond the statements themselves, through the real server and
the cassandra-driver: bind markers named as ScyllaDB names them (a client binding by name
gives a CDC window its two bounds), routing indexes, markers' types, PREPARE's refusals,
ScyllaDB's node tables (``scylla_local``, ``config``, ``IndexInfo``), Cassandra 4's
``system_virtual_schema``, the first CDC generation's time and the paging state of an
exactly full last page."""

from __future__ import annotations

import datetime
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster
from cassandra.protocol import OptionsMessage
from cassandra.query import SimpleStatement

import cqlcdc
from cqlcdc.server import CqlServer
from tests.e2e.serving import serving

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def served(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CqlServer]:
    made_ms = time.time_ns() // 1_000_000
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("cat"), master="local[2]")
    with serving(session) as srv:
        srv.made_ms = made_ms  # type: ignore[attr-defined]
        yield srv


def test_a_cdc_window_bound_by_marker_names(cql: Any) -> None:
    """minTimeuuid(?) and maxTimeuuid(?) are two receivers, so binding by name gives the
    window its two bounds (the names ScyllaDB gives them: functions::make_arg_spec)."""
    cql.execute("CREATE TABLE win (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    before = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=5)
    for pk in range(4):
        cql.execute("INSERT INTO win (pk, v) VALUES (%s, %s)", (pk, pk))
    after = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=5)
    window = cql.prepare(
        'SELECT pk FROM win_scylla_cdc_log WHERE "cdc$stream_id" IN ? '
        'AND "cdc$time" > minTimeuuid(?) AND "cdc$time" <= maxTimeuuid(?)'
    )
    names = [c.name for c in window.column_metadata]
    assert names == ["IN(cdc$stream_id)", "arg0(system.mintimeuuid)", "arg0(system.maxtimeuuid)"]
    assert [c.type.typename for c in window.column_metadata[1:]] == ["timestamp"] * 2
    streams = [
        r.cdc_stream_id for r in cql.execute('SELECT "cdc$stream_id" FROM win_scylla_cdc_log')
    ]
    by_name = {
        "IN(cdc$stream_id)": streams,
        "arg0(system.mintimeuuid)": before,
        "arg0(system.maxtimeuuid)": after,
    }
    assert sorted(r.pk for r in cql.execute(window, by_name)) == [0, 1, 2, 3]
    by_name["arg0(system.mintimeuuid)"] = after
    assert cql.execute(window, by_name).all() == []


def test_marker_names_of_limits_using_and_elements(cql: Any) -> None:
    cql.execute(
        "CREATE TABLE named (p int, c int, l list<int>, m map<int, text>, PRIMARY KEY (p, c))"
    )
    update = cql.prepare(
        "UPDATE named USING TTL ? AND TIMESTAMP ? SET l[?] = ?, m[?] = ? WHERE p = ? AND c IN ?"
    )
    assert [c.name for c in update.column_metadata] == [
        "[ttl]",
        "[timestamp]",
        "idx(l)",
        "value(l)",
        "key(m)",
        "value(m)",
        "p",
        "IN(c)",
    ]
    select = cql.prepare(
        "SELECT * FROM named WHERE token(p) > ? AND l CONTAINS ? PER PARTITION LIMIT ? "
        "LIMIT ? ALLOW FILTERING"
    )
    assert [c.name for c in select.column_metadata] == [
        "partition key token",
        "value(l)",
        "[per_partition_limit]",
        "[limit]",
    ]


def test_routing_follows_the_receiver_not_the_marker_name(cql: Any) -> None:
    cql.execute("CREATE TABLE routed (a int, b text, c int, v int, PRIMARY KEY ((a, b), c))")
    named = cql.prepare("SELECT * FROM routed WHERE b = :x AND a = :y AND c = :z")
    assert [c.name for c in named.column_metadata] == ["x", "y", "z"]
    assert named.routing_key_indexes == [1, 0]
    insert = cql.prepare("INSERT INTO routed (c, b, a, v) VALUES (?, ?, ?, ?)")
    assert insert.routing_key_indexes == [2, 1]
    # a marker inside a function binds the function's argument, not the key column
    converted = cql.prepare("SELECT * FROM routed WHERE a = blobAsInt(?) AND b = ?")
    assert [c.name for c in converted.column_metadata] == ["arg0(system.blobasint)", "b"]
    assert converted.routing_key_indexes is None
    listed = cql.prepare("SELECT * FROM routed WHERE a IN ? AND b = ?")
    assert listed.routing_key_indexes is None
    # the driver routes by what it computes from the key: the write lands and reads back
    cql.execute(named, {"x": "k", "y": 1, "z": 2})
    cql.execute(insert, (2, "k", 1, 7))
    assert [tuple(r) for r in cql.execute(named, {"x": "k", "y": 1, "z": 2})] == [(1, "k", 2, 7)]
    # a name used twice is one variable (ScyllaDB's dialect), which routes as both receivers
    twice = cql.prepare("SELECT v FROM routed WHERE a = :n AND b = :s AND c = :n")
    assert [c.name for c in twice.column_metadata] == ["n", "s"]
    assert twice.routing_key_indexes == [0, 1]
    cql.execute(insert, (1, "j", 1, 8))
    assert [r.v for r in cql.execute(twice, {"n": 1, "s": "j"})] == [8]
    with pytest.raises(ValueError, match="Too many arguments"):
        cql.execute(twice, (1, "j", 1))


def test_a_marker_in_a_vector_literal_is_an_element(cql: Any) -> None:
    cql.execute("CREATE TABLE vec (pk int PRIMARY KEY, v vector<float, 2>)")
    insert = cql.prepare("INSERT INTO vec (pk, v) VALUES (?, [?, ?])")
    assert [(c.name, c.type.typename) for c in insert.column_metadata] == [
        ("pk", "int"),
        ("value(v)", "float"),
        ("value(v)", "float"),
    ]
    cql.execute(insert, (1, 0.5, 2.0))
    assert cql.execute("SELECT v FROM vec WHERE pk = 1").one().v == [0.5, 2.0]


def test_prepare_refuses_contains_key_of_a_list_and_not_equal(cql: Any) -> None:
    cql.execute("CREATE TYPE IF NOT EXISTS pt (x int, y int)")
    cql.execute("CREATE TABLE refused (k int PRIMARY KEY, l list<int>, u pt)")
    with pytest.raises(InvalidRequest, match="Cannot use CONTAINS KEY on non-map column l"):
        cql.prepare("SELECT * FROM refused WHERE l CONTAINS KEY ? ALLOW FILTERING")
    with pytest.raises(InvalidRequest, match='Unsupported "!=" relation: u != \\?'):
        cql.prepare("SELECT * FROM refused WHERE u != ? ALLOW FILTERING")


def test_the_server_identifies_as_scylladb_in_its_system_tables(
    cql: Any, cluster: Cluster, served: CqlServer
) -> None:
    """ScyllaDB's test suite's is_scylla(): a system table whose name holds 'scylla'."""
    names = [
        r.table_name
        for r in cql.execute("SELECT * FROM system_schema.tables WHERE keyspace_name = 'system'")
    ]
    assert "scylla_local" in names and "config" in names and "IndexInfo" in names
    features = cql.execute(
        "SELECT value FROM system.scylla_local WHERE key = 'enabled_features'"
    ).one()
    assert "CDC" in features.value.split(",")
    config = {r.name: r for r in cql.execute("SELECT * FROM system.config")}
    data_dir = str(served.coordinator.data_dir)
    assert json.loads(config["data_file_directories"].value) == [data_dir]
    assert config["data_file_directories"].type == "string list"
    assert json.loads(config["native_transport_port"].value) == served.port
    assert config["native_transport_port"].type == "integer"
    assert json.loads(config["authenticator"].value).endswith("AllowAllAuthenticator")
    assert config["authenticator"].source == "default"
    one = cql.execute("SELECT value FROM system.config WHERE name = 'cluster_name'").one()
    assert json.loads(one.value) == "cqlcdc"
    with pytest.raises(InvalidRequest, match=r"Cannot modify table system\.config"):
        cql.execute("UPDATE system.config SET value = '1' WHERE name = 'num_tokens'")
    # ... while the protocol offers no ScyllaDB extension (SUPPORTED has no SCYLLA_*)
    supported = cluster.control_connection._connection.wait_for_response(OptionsMessage())
    assert not [k for k in supported.options if k.startswith("SCYLLA")]


def test_index_info_lists_the_built_indexes(cql: Any) -> None:
    cql.execute("CREATE TABLE indexed (k int PRIMARY KEY, v int)")
    cql.execute("CREATE INDEX indexed_v ON indexed (v)")
    rows = cql.execute("SELECT * FROM system.\"IndexInfo\" WHERE table_name = 'ks'")
    assert [(r.table_name, r.index_name) for r in rows] == [("ks", "indexed_v")]


def test_system_virtual_schema_as_cassandra_4_defines_it(cql: Any, cluster: Cluster) -> None:
    assert [
        r.keyspace_name for r in cql.execute("SELECT * FROM system_virtual_schema.keyspaces")
    ] == ["system_virtual_schema"]
    tables = {
        r.table_name: r.comment for r in cql.execute("SELECT * FROM system_virtual_schema.tables")
    }
    assert sorted(tables) == ["columns", "keyspaces", "tables"]
    columns = cql.execute(
        "SELECT column_name, kind, position, type FROM system_virtual_schema.columns "
        "WHERE keyspace_name = 'system_virtual_schema' AND table_name = 'tables'"
    )
    assert [tuple(r) for r in columns] == [
        ("comment", "regular", -1, "text"),
        ("keyspace_name", "partition_key", 0, "text"),
        ("table_name", "clustering", 0, "text"),
    ]
    # the driver reads it into its metadata as a virtual keyspace; system_schema does not
    # list it (as in Cassandra 4)
    cluster.refresh_schema_metadata()
    virtual = cluster.metadata.keyspaces["system_virtual_schema"]
    assert virtual.virtual and sorted(virtual.tables) == ["columns", "keyspaces", "tables"]
    listed = [r.keyspace_name for r in cql.execute("SELECT * FROM system_schema.keyspaces")]
    assert "system_virtual_schema" not in listed


def test_the_first_cdc_generation_is_when_the_data_directory_was_made(
    cql: Any, served: CqlServer
) -> None:
    (row,) = cql.execute(
        "SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'"
    )
    made_ms = served.made_ms  # type: ignore[attr-defined]
    ms = int(row.time.replace(tzinfo=datetime.UTC).timestamp() * 1000)
    assert made_ms <= ms <= time.time_ns() // 1_000_000
    described = cql.execute("SELECT time FROM system_distributed.cdc_streams_descriptions_v2").all()
    assert {r.time for r in described} == {row.time}


def _pages(cql: Any, query: str, fetch_size: int) -> list[tuple[int, bool]]:
    """(rows, has a paging state) of every page."""
    result = cql.execute(SimpleStatement(query, fetch_size=fetch_size))
    pages = [(len(result.current_rows), result.paging_state is not None)]
    while result.has_more_pages:
        result.fetch_next_page()
        pages.append((len(result.current_rows), result.paging_state is not None))
    return pages


def test_an_exactly_full_last_page_carries_a_paging_state(cql: Any) -> None:
    """ScyllaDB's pager ends a result only on a short page or a met LIMIT
    (query_pagers.cc), so a full last page is followed by an empty one without a state."""
    cql.execute("CREATE TABLE paged (p int, c int, PRIMARY KEY (p, c))")
    for c in range(10):
        cql.execute("INSERT INTO paged (p, c) VALUES (0, %s)", (c,))
    assert _pages(cql, "SELECT * FROM paged", 5) == [(5, True), (5, True), (0, False)]
    assert _pages(cql, "SELECT * FROM paged", 4) == [(4, True), (4, True), (2, False)]
    # a LIMIT met on the page ends it; one not met does not
    assert _pages(cql, "SELECT * FROM paged LIMIT 10", 5) == [(5, True), (5, False)]
    assert _pages(cql, "SELECT * FROM paged LIMIT 20", 5) == [(5, True), (5, True), (0, False)]
    limited = cql.prepare("SELECT * FROM paged LIMIT ?")
    limited.fetch_size = 5
    result = cql.execute(limited, (5,))
    assert len(result.current_rows) == 5 and result.paging_state is None
    # an aggregate is one row, computed whole
    assert _pages(cql, "SELECT count(*) FROM paged", 1) == [(1, False)]
