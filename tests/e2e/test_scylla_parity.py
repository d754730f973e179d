"""Writes whose outcome ScyllaDB decides differently from a naive store (issue 26, sections 2
and 4), through ``cqlcdc serve`` with the real cassandra-driver and the real engine: list
prepends in one batch, a static-only INSERT IF NOT EXISTS, the key columns of an LWT batch's
result rows, null inside a bound ``IN ?`` of a condition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

import cqlcdc
from cqlcdc.server import CqlServer
from cqlcdc.storage.uuids import micros_of
from cqlcdc.types import native_type

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture(scope="module")
def engine(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session behind the server (its coordinator's sweeps are run by hand)."""
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("parity"), master="local[2]")
    session.coordinator.sweep_interval_s = 3600.0
    yield session
    session.close()


@pytest.fixture(scope="module")
def cql(engine: Any) -> Iterator[Any]:
    server = CqlServer(engine.coordinator, port=0)
    server.start_in_thread()
    cluster = Cluster([server.host], port=server.port, load_balancing_policy=RoundRobinPolicy())
    try:
        client = cluster.connect()
        client.default_timeout = 120  # a shared machine's first writes can be slow
        client.execute(KS)
        client.set_keyspace("ks")
        yield client
    finally:
        cluster.shutdown()
        server.stop_thread()


def test_prepends_in_one_batch_keep_every_element(cql: Any) -> None:
    cql.execute("CREATE TABLE lp (k int PRIMARY KEY, l list<int>) WITH cdc = {'enabled': true}")
    cql.execute(
        "BEGIN BATCH UPDATE lp SET l = [1] + l WHERE k = 1; UPDATE lp SET l = [2] + l WHERE k = 1; "
        "UPDATE lp SET l = [3] + l WHERE k = 1 APPLY BATCH"
    )
    assert cql.execute("SELECT l FROM lp WHERE k = 1").one().l == [3, 2, 1]
    cql.execute(
        "BEGIN BATCH UPDATE lp SET l = l + [4] WHERE k = 1; UPDATE lp SET l = [0] + l WHERE k = 1; "
        "UPDATE lp SET l = l + [5] WHERE k = 1 APPLY BATCH"
    )
    assert cql.execute("SELECT l FROM lp WHERE k = 1").one().l == [0, 3, 2, 1, 4, 5]
    rows = list(cql.execute('SELECT "cdc$time", "cdc$operation", l FROM lp_scylla_cdc_log'))
    assert len(rows) == 2  # one change of one row per batch
    order = native_type("timeuuid").sort_key
    first = rows[0].l
    assert [first[key] for key in sorted(first, key=order)] == [3, 2, 1]
    # appended keys carry the write's timestamp, as cdc$time does
    second = rows[1].l
    appended = [key for key in second if second[key] in (4, 5)]
    assert {micros_of(key) for key in appended} == {micros_of(rows[1][0])}


def test_a_static_only_insert_if_not_exists_beside_clustering_rows(cql: Any) -> None:
    cql.execute("CREATE TABLE st (id int, c int, version int static, v int, PRIMARY KEY (id, c))")
    cql.execute("INSERT INTO st (id, c, v) VALUES (1, 1, 1)")
    first = cql.execute("INSERT INTO st (id, version) VALUES (1, 1) IF NOT EXISTS")
    assert first.one()[0] is True
    again = cql.execute("INSERT INTO st (id, version) VALUES (1, 2) IF NOT EXISTS").one()
    assert (again[0], again.id, again.version) == (False, 1, 1)
    assert [tuple(r) for r in cql.execute("SELECT id, c, version, v FROM st")] == [(1, 1, 1, 1)]


def test_lwt_batch_rows_carry_the_key_columns(cql: Any) -> None:
    cql.execute("CREATE TABLE lb (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    cql.execute("INSERT INTO lb (pk, ck, v) VALUES (1, 1, 10)")
    result = cql.execute(
        "BEGIN BATCH UPDATE lb SET v = 11 WHERE pk = 1 AND ck = 1 IF v = 10; "
        "UPDATE lb SET v = 2 WHERE pk = 1 AND ck = 2 IF v = null APPLY BATCH"
    )
    assert result.column_names == ["[applied]", "pk", "ck", "v"]
    # the old rows: the first is there; the second has none, so all of it is null
    assert [tuple(r) for r in result] == [(True, 1, 1, 10), (True, None, None, None)]
    refused = cql.execute(
        "BEGIN BATCH UPDATE lb SET v = 12 WHERE pk = 1 AND ck = 1 IF v = 10; "
        "UPDATE lb SET v = 3 WHERE pk = 1 AND ck = 2 IF v = 2 APPLY BATCH"
    )
    assert [tuple(r) for r in refused] == [(False, 1, 1, 11), (False, 1, 2, 2)]


def test_a_null_inside_a_bound_in_list_of_a_condition(cql: Any) -> None:
    cql.execute("CREATE TABLE cin (k int PRIMARY KEY, v1 int, v2 text)")
    cql.execute("INSERT INTO cin (k, v1, v2) VALUES (0, 3, 'foo')")
    update = cql.prepare("UPDATE cin SET v2 = 'bar', v1 = 3 WHERE k = 0 IF v1 IN ?")
    assert tuple(cql.execute(update, [[1, None, 3]]).one()) == (True, 3)
    assert tuple(cql.execute(update, [[1, None]]).one()) == (False, 3)
    assert cql.execute("SELECT v2 FROM cin WHERE k = 0").one().v2 == "bar"


def test_compact_storage_ttl_log_and_a_clustering_prefix(cql: Any) -> None:
    cdc = "cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
    cql.execute(
        f"CREATE TABLE tb3 (pk int, ck int, PRIMARY KEY (pk, ck)) WITH COMPACT STORAGE AND {cdc}"
    )
    cql.execute("INSERT INTO tb3 (pk, ck) VALUES (2, 22) USING TTL 2222")
    log = cql.execute('SELECT "cdc$operation", "cdc$ttl", pk, ck FROM tb3_scylla_cdc_log')
    assert [tuple(r) for r in log] == [(1, 2222, 2, 22), (9, None, 2, 22)]
    cql.execute(
        "CREATE TABLE dense (pk int, c1 int, c2 int, v int, PRIMARY KEY (pk, c1, c2)) "
        f"WITH COMPACT STORAGE AND {cdc}"
    )
    cql.execute("INSERT INTO dense (pk, c1, v) VALUES (1, 1, 5)")
    cql.execute("INSERT INTO dense (pk, c1, c2, v) VALUES (1, 1, 0, 6)")
    cql.execute("INSERT INTO dense (pk, c1, v) VALUES (1, 1, 7)")  # the prefix row again
    rows = [tuple(r) for r in cql.execute("SELECT * FROM dense WHERE pk = 1")]
    assert rows == [(1, 1, None, 7), (1, 1, 0, 6)]
    log = cql.execute('SELECT "cdc$operation", c1, c2, v FROM dense_scylla_cdc_log')
    assert [tuple(r) for r in log][-3:] == [(0, 1, None, 5), (1, 1, None, 7), (9, 1, None, 7)]


def test_writetime_and_ttl_of_elements_and_fields_over_the_wire(cql: Any) -> None:
    cql.execute("CREATE TYPE inner_t (a int, b text)")
    cql.execute("CREATE TYPE outer_t (x frozen<inner_t>, y int)")
    cql.execute("CREATE TABLE wt (p int PRIMARY KEY, m map<int, int>, u inner_t, b outer_t)")
    cql.execute("INSERT INTO wt (p, m) VALUES (1, {1: 10, 2: 20}) USING TIMESTAMP 1000")
    cql.execute("UPDATE wt USING TIMESTAMP 2000 AND TTL 3600 SET m = m + {2: 30} WHERE p = 1")
    cql.execute("UPDATE wt USING TIMESTAMP 3000 SET u.a = 42, b = {x: {a: 5}, y: 7} WHERE p = 1")
    select = cql.prepare(
        "SELECT WRITETIME(m[1]), writetime(m[2]), ttl(m[2]), writetime(u.a), b.x.a "
        "FROM wt WHERE p = ?"
    )
    rows = cql.execute(select, [1])
    assert rows.column_names == [
        "writetime(m[1])", "writetime(m[2])", "ttl(m[2])", "writetime(u.a)", "b.x.a"
    ]  # fmt: skip
    wt1, wt2, ttl2, wta, nested = rows.one()
    assert (wt1, wt2, wta, nested) == (1000, 2000, 3000, 5)
    assert 3500 < ttl2 <= 3600


def test_a_per_row_ttl_column_over_the_wire(cql: Any) -> None:
    cql.execute("CREATE TABLE rt (p int PRIMARY KEY, x int, e bigint TTL)")
    described = cql.execute("DESCRIBE TABLE rt").one().create_statement
    assert "\n    e bigint TTL,\n" in described
    now_s = int(time.time())
    cql.execute(f"INSERT INTO rt (p, x, e) VALUES (1, 1, {now_s - 60})")
    cql.execute(f"INSERT INTO rt (p, x, e) VALUES (2, 2, {now_s + 3600})")
    cql.execute("INSERT INTO rt (p, x) VALUES (3, 3)")
    assert sorted(r.p for r in cql.execute("SELECT p FROM rt")) == [2, 3]
    cql.execute("ALTER TABLE rt TTL NULL")
    assert sorted(r.p for r in cql.execute("SELECT p FROM rt")) == [1, 2, 3]


@pytest.mark.parametrize("has_ck", [True, False])
def test_a_row_past_its_ttl_column_is_deleted_and_logged(
    cql: Any, engine: Any, has_ck: bool
) -> None:
    """test_row_ttl.py's test_row_ttl_expiration_cdc_event: insert, preimage, then -3/-4."""
    table = f"rx{int(has_ck)}"
    key = "PRIMARY KEY (p, c)" if has_ck else "PRIMARY KEY (p)"
    cql.execute(
        f"CREATE TABLE {table} (p int, c int, x int, e bigint TTL, {key}) "
        "WITH cdc = {'enabled': true, 'preimage': true}"
    )
    expiration = int(time.time()) - 60
    cql.execute(f"INSERT INTO {table} (p, c, x, e) VALUES (1, 2, 3, {expiration})")
    cql.execute(f"INSERT INTO {table} (p, c, x) VALUES (2, 2, 3)")
    engine.flush()  # the sweep schedule is the committed one
    assert engine.sweep_expired(int(time.time()) + 5) >= 1
    engine.flush()
    log = cql.execute(f'SELECT "cdc$operation", p, c, x, e FROM {table}_scylla_cdc_log')
    rows = sorted((tuple(r) for r in log if r.p == 1), key=lambda r: r[0] != 2)
    assert rows[:2] == [(2, 1, 2, 3, expiration), (0, 1, 2, 3, expiration)]
    assert rows[2][:3] == ((-3, 1, 2) if has_ck else (-4, 1, None))
    cql.execute(f"ALTER TABLE {table} TTL NULL")  # deleted for good, not hidden
    assert [r.p for r in cql.execute(f"SELECT p FROM {table}")] == [2]


def test_execute_many_list_writes_agree_with_single_statements(cql: Any, engine: Any) -> None:
    """execute_many of list prepends and appends (the row path: lists are not bulk
    columns) keeps every element, in timestamp order, as single statements do."""
    cql.execute("CREATE TABLE ks.lm (k int PRIMARY KEY, l list<int>, v int)")
    prepend = engine.prepare("UPDATE ks.lm SET l = ? + l WHERE k = ?")
    append = engine.prepare("UPDATE ks.lm SET l = l + ?, v = ? WHERE k = ?")
    results = engine.execute_many(
        [prepend, prepend, append, prepend],
        [([1], 1), ([2], 1), ([9], 0, 1), ([3], 1)],
    )
    assert not [r for r in results if isinstance(r, Exception)]
    engine.flush()
    assert cql.execute("SELECT l FROM ks.lm WHERE k = 1").one().l == [3, 2, 1, 9]


def test_rows_written_before_alter_table_ttl_expire_too(cql: Any, engine: Any) -> None:
    """test_row_ttl_expiration's row 1: a row already expired when TTL is turned on is
    deleted; one that expires later is swept when it does (the sweep schedules it)."""
    cql.execute(
        "CREATE TABLE rb (p int PRIMARY KEY, e bigint, x int) "
        "WITH cdc = {'enabled': true, 'preimage': true}"
    )
    now_s = int(time.time())
    cql.execute(f"INSERT INTO rb (p, e) VALUES (1, {now_s - 60})")
    cql.execute(f"INSERT INTO rb (p, e) VALUES (2, {now_s + 3600})")
    cql.execute("INSERT INTO rb (p, x) VALUES (3, 3)")
    cql.execute("ALTER TABLE rb TTL e")  # sweeps every partition
    engine.flush()
    deleted = [r.p for r in cql.execute('SELECT "cdc$operation", p FROM rb_scylla_cdc_log')
               if r[0] == -4]  # fmt: skip
    assert deleted == [1]
    assert engine.sweep_expired(now_s + 3605) >= 1  # partition 2's next expiration
    engine.flush()
    cql.execute("ALTER TABLE rb TTL NULL")  # gone for good, not hidden
    assert [r.p for r in cql.execute("SELECT p FROM rb")] == [3]
