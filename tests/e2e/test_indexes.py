"""Secondary indexes through the real engine (issue 13, item 5): CREATE/DROP INDEX with
ScyllaDB's checks and messages, queries an index serves without ALLOW FILTERING (global,
local, collection targets) right after updates and deletes, DESCRIBE, system_schema.indexes
as the driver reads it, and writes to an indexed table logged as without the index."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.errors import InvalidRequest

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = (
    "CREATE TABLE ks.t (pk int, ck int, v int, w text, m map<text, int>, s set<int>, "
    "l list<int>, fl frozen<list<int>>, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
)


@pytest.fixture(scope="module")
def session(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("indexes"), master="local[2]")
    s.execute(KS)
    s.execute(TABLE)
    for index in (
        "CREATE INDEX ON ks.t (v)",
        "CREATE INDEX mk ON ks.t (keys(m))",
        "CREATE INDEX ON ks.t (values(m))",
        "CREATE INDEX ON ks.t (s)",
        "CREATE INDEX ON ks.t (l)",
        "CREATE INDEX ON ks.t (full(fl))",
        "CREATE INDEX local_w ON ks.t ((pk), w)",
    ):
        s.execute(index)
    yield s
    s.close()


def _rows(session: Any, query: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in session.execute(query))


def test_queries_an_index_serves_follow_updates_and_deletes(session: Any) -> None:
    for i in range(6):
        session.execute(
            f"INSERT INTO ks.t (pk, ck, v, w, m, s, l, fl) VALUES ({i % 3}, {i}, {i % 2}, "
            f"'w{i % 2}', {{'k{i}': {i}}}, {{{i}}}, [{i}, 10], [{i}])"
        )
    assert _rows(session, "SELECT pk, ck FROM ks.t WHERE v = 1") == [(0, 3), (1, 1), (2, 5)]
    assert _rows(session, "SELECT ck FROM ks.t WHERE m CONTAINS KEY 'k4'") == [(4,)]
    assert _rows(session, "SELECT ck FROM ks.t WHERE m CONTAINS 5") == [(5,)]
    assert _rows(session, "SELECT ck FROM ks.t WHERE s CONTAINS 2") == [(2,)]
    assert len(_rows(session, "SELECT ck FROM ks.t WHERE l CONTAINS 10")) == 6
    assert _rows(session, "SELECT ck FROM ks.t WHERE fl = [3]") == [(3,)]
    assert _rows(session, "SELECT ck FROM ks.t WHERE pk = 1 AND w = 'w0'") == [(4,)]  # local
    # an index is never behind its table: updates and deletes show at once
    session.execute("UPDATE ks.t SET v = 1 WHERE pk = 0 AND ck = 0")
    session.execute("DELETE FROM ks.t WHERE pk = 1 AND ck = 1")
    session.execute("UPDATE ks.t SET v = null WHERE pk = 2 AND ck = 5")
    session.execute("UPDATE ks.t SET m = m - {'k4'} WHERE pk = 1 AND ck = 4")
    session.execute("UPDATE ks.t USING TTL 3600 SET v = 7 WHERE pk = 2 AND ck = 2")
    assert _rows(session, "SELECT pk, ck FROM ks.t WHERE v = 1") == [(0, 0), (0, 3)]
    assert _rows(session, "SELECT ck FROM ks.t WHERE m CONTAINS KEY 'k4'") == []
    assert _rows(session, "SELECT ck FROM ks.t WHERE v = 7") == [(2,)]
    # rows come in the order a table scan gives (token, then clustering), as ScyllaDB's
    # global index view orders them
    scan = [
        tuple(r) for r in session.execute("SELECT pk, ck FROM ks.t WHERE v = 1 ALLOW FILTERING")
    ]
    assert [tuple(r) for r in session.execute("SELECT pk, ck FROM ks.t WHERE v = 1")] == scan


def test_what_still_needs_allow_filtering(session: Any) -> None:
    for query in (
        "SELECT * FROM ks.t WHERE v = 1 AND w = 'w1'",  # a second restriction
        "SELECT * FROM ks.t WHERE w = 'w1'",  # a local index needs the partition key
        "SELECT * FROM ks.t WHERE v > 0",  # an index serves equality only
    ):
        with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
            session.execute(query)


def test_an_index_beside_the_key_and_on_a_clustering_column(session: Any) -> None:
    """ScyllaDB's need_filtering: an indexed restriction beside the whole partition key and a
    clustering prefix needs no ALLOW FILTERING (select_test's testSetContainsWithIndex); an
    index on a clustering column answers it restricted alone (testIndexOnClusteringColumns);
    clustering restrictions over a token range filter (test_allow_filtering.py)."""
    session.execute("CREATE TABLE ks.ci (p int, c0 int, c1 int, v int, PRIMARY KEY (p, c0, c1))")
    session.execute("CREATE INDEX ON ks.ci (c1)")
    for i in range(4):
        session.execute(f"INSERT INTO ks.ci (p, c0, c1, v) VALUES ({i % 2}, {i}, {i * 10}, {i})")
    session.execute("INSERT INTO ks.t (pk, ck, s) VALUES (7, 1, {70})")
    assert _rows(session, "SELECT ck FROM ks.t WHERE pk = 7 AND ck = 1 AND s CONTAINS 70") == [(1,)]
    assert _rows(session, "SELECT c0 FROM ks.ci WHERE c1 = 20") == [(2,)]
    assert _rows(session, "SELECT c0 FROM ks.ci WHERE p = 1 AND c1 = 30") == [(3,)]
    session.execute("CREATE TABLE ks.pki (k1 int, k2 int, v int, PRIMARY KEY ((k1, k2)))")
    session.execute("CREATE INDEX ON ks.pki (k2)")
    session.execute("INSERT INTO ks.pki (k1, k2, v) VALUES (0, 1, 2)")
    assert _rows(session, "SELECT k1 FROM ks.pki WHERE k2 = 1") == [(0,)]  # a key part's index
    for query in (
        "SELECT * FROM ks.pki WHERE k2 = 1 AND v = 2",
        "SELECT * FROM ks.t WHERE pk = 7 AND s CONTAINS 70 AND s CONTAINS 71",
        "SELECT * FROM ks.ci WHERE c0 = 1 AND c1 = 10 AND v = 1",
        "SELECT * FROM ks.t WHERE ck = 1 AND s CONTAINS 70",
        "SELECT * FROM ks.ci WHERE c0 = 2 AND token(p) > 0",
    ):
        with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
            session.execute(query)


def test_writes_log_as_without_the_index(session: Any) -> None:
    session.execute(
        "CREATE TABLE ks.plain (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
    )
    session.execute("CREATE TABLE ks.idx (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    session.execute("CREATE INDEX ON ks.idx (v)")
    for table in ("plain", "idx"):
        session.execute(f"INSERT INTO ks.{table} (pk, v) VALUES (1, 1) USING TIMESTAMP 10")
        session.execute(f"UPDATE ks.{table} USING TIMESTAMP 20 SET v = 2 WHERE pk = 1")
        session.execute(f"DELETE FROM ks.{table} USING TIMESTAMP 30 WHERE pk = 1")
    logs = [
        [
            tuple(r)
            for r in session.execute(f'SELECT "cdc$operation", pk, v FROM ks.{t}_scylla_cdc_log')
        ]
        for t in ("plain", "idx")
    ]
    assert logs[0] == logs[1] == [(2, 1, 1), (1, 1, 2), (4, 1, None)]


def test_describe_and_system_schema(session: Any) -> None:
    text = session.execute("DESCRIBE TABLE ks.t").one()[0]
    assert "CREATE INDEX t_v_idx ON ks.t(v);" in text
    assert "CREATE INDEX mk ON ks.t(keys(m));" in text
    assert "CREATE INDEX local_w ON ks.t((pk), w);" in text
    assert session.execute("DESCRIBE INDEX ks.mk").one()[0].strip() == (
        "CREATE INDEX mk ON ks.t(keys(m));"
    )
    with pytest.raises(InvalidRequest, match="Index 'nope' not found in keyspace 'ks'"):
        session.execute("DESCRIBE INDEX ks.nope")
    rows = {
        r.index_name: (r.kind, dict(r.options))
        for r in session.execute(
            "SELECT index_name, kind, options FROM system_schema.indexes "
            "WHERE keyspace_name = 'ks' AND table_name = 't'"
        )
    }
    assert rows["t_v_idx"] == ("COMPOSITES", {"target": "v"})
    assert rows["t_s_idx"] == ("COMPOSITES", {"target": "keys(s)"})  # a set's elements
    assert rows["t_m_idx"] == ("COMPOSITES", {"target": "values(m)"})
    assert rows["t_fl_idx"][1] == {"target": "full(fl)"}
    assert rows["local_w"][1] == {"target": '{"pk":["pk"],"ck":["w"]}'}


def test_the_driver_sees_the_indexes(session: Any) -> None:
    from cassandra.cluster import Cluster
    from cassandra.policies import RoundRobinPolicy

    from cqlcdc.server import CqlServer

    server = CqlServer(session.coordinator, port=0)
    host, port = server.start_in_thread()
    cluster = Cluster([host], port=port, load_balancing_policy=RoundRobinPolicy())
    try:
        cql = cluster.connect()
        indexes = cluster.metadata.keyspaces["ks"].tables["t"].indexes
        assert indexes["t_v_idx"].index_options == {"target": "v"}
        assert "CREATE INDEX t_v_idx ON ks.t (v)" in indexes["t_v_idx"].as_cql_query()
        cql.execute("INSERT INTO ks.t (pk, ck, v) VALUES (9, 9, 99)")
        assert [tuple(r) for r in cql.execute("SELECT pk, ck FROM ks.t WHERE v = 99")] == [(9, 9)]
        cqlsh = Path(sys.executable).with_name("cqlsh")
        done = subprocess.run(
            [str(cqlsh), host, str(port), "-e", "DESCRIBE INDEX ks.mk; DESCRIBE FUNCTIONS;"],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "CREATE INDEX mk ON ks.t(keys(m));" in done.stdout
    finally:
        cluster.shutdown()
        server.stop_thread()


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("CREATE INDEX ON ks.e (pk)", "Cannot create secondary index on partition key column pk"),
        ("CREATE INDEX ON ks.e (nope)", "No column definition found for column nope"),
        ("CREATE INDEX ON ks.e (d)", "Secondary indexes are not supported on duration columns"),
        ("CREATE INDEX ON ks.e (keys(v))",
         "Cannot create index on keys() of column v; only non-frozen collections support "
         "keys() indexes"),
        ("CREATE INDEX ON ks.e (keys(s))",
         "Cannot create secondary index on keys() of column s with non-map type"),
        ("CREATE INDEX ON ks.e (fl)",
         "Cannot create index on value of frozen collection column fl"),
        ("CREATE INDEX ON ks.e (full(s))",
         "full() indexes can only be created on frozen collections"),
        ("CREATE INDEX ON ks.e ((pk), s)",
         "Local secondary index on collection column s is not implemented yet."),
        ("CREATE INDEX ON ks.e ((ck), v)",
         "Local index definition must contain full partition key only. Redundant column: ck"),
        ("CREATE INDEX ON ks.e (v, ck)", "Only CUSTOM indexes support multiple columns"),
        ("CREATE INDEX ON ks.c (n)", "Secondary indexes are not supported on counter tables"),
        ("CREATE INDEX e_v ON ks.e (v)", "Index already exists"),
        ("CREATE INDEX ON ks.e (v)", "Index e_v_idx is a duplicate of existing index e_v"),
        ("CREATE INDEX ON ks.e_scylla_cdc_log (v)",
         "Secondary indexes are not supported on CDC log tables"),
        ("CREATE CUSTOM INDEX ON ks.e (w) USING 'vector_index'",
         "Custom indexes (USING 'vector_index') are not supported; create a regular "
         "secondary index"),
        ("DROP INDEX ks.nope",
         "Index 'nope' could not be found in any of the tables of keyspace 'ks'"),
        ("ALTER TABLE ks.e DROP v",
         "Cannot drop column v because it has dependent secondary indexes (e_v)"),
    ],
)  # fmt: skip
def test_errors(session: Any, statement: str, message: str) -> None:
    session.execute(
        "CREATE TABLE IF NOT EXISTS ks.e (pk int, ck int, v int, w text, d duration, s set<int>, "
        "fl frozen<list<int>>, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    session.execute("CREATE TABLE IF NOT EXISTS ks.c (pk int PRIMARY KEY, n counter)")
    session.execute("CREATE INDEX IF NOT EXISTS e_v ON ks.e (v)")
    with pytest.raises(InvalidRequest) as caught:
        session.execute(statement)
    assert caught.value.message == message
