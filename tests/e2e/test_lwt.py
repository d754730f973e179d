"""Lightweight transactions through the real engine (issue 13, item 1): ScyllaDB's result
sets (``[applied]`` and the old row, applied or not), its CDC behaviour (an unapplied write
logs nothing; an INSERT of a new key has no preimage), conditional batches, its errors,
the real cassandra-driver through ``cqlcdc serve``, and concurrent clients checked against
a sequential model in commit order."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cqlcdc
from cqlcdc.errors import InvalidRequest
from cqlcdc.session import Session
from tests.e2e.serving import WORKERS, workers_id

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
IMAGES = "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"


@pytest.fixture(scope="module")
def session(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("lwt"), master="local[2]")
    s.execute(KS)
    yield s
    s.close()


def _result(session: Any, query: str, params: Any = None) -> list[tuple[Any, ...]]:
    rows = session.execute(query, params)
    return [tuple(r) for r in rows]


def _log(session: Any, table: str) -> list[tuple[Any, ...]]:
    rows = session.execute(f'SELECT "cdc$operation", pk, ck, v FROM {table}_scylla_cdc_log')
    return [tuple(r) for r in rows]


def test_insert_if_not_exists(session: Any) -> None:
    session.execute(f"CREATE TABLE ks.ins (pk int, ck int, v int, PRIMARY KEY (pk, ck)) {IMAGES}")
    first = session.execute("INSERT INTO ks.ins (pk, ck, v) VALUES (1, 1, 10) IF NOT EXISTS")
    assert first.column_names == ["[applied]", "pk", "ck", "v"]
    assert [tuple(r) for r in first] == [(True, None, None, None)]
    again = _result(session, "INSERT INTO ks.ins (pk, ck, v) VALUES (1, 1, 11) IF NOT EXISTS")
    assert again == [(False, 1, 1, 10)]  # the row that is there
    assert _result(session, "SELECT pk, ck, v FROM ks.ins") == [(1, 1, 10)]
    # the new key has no preimage (the write does not observe itself); the refused one
    # logs nothing at all
    assert _log(session, "ks.ins") == [(2, 1, 1, 10), (9, 1, 1, 10)]


def test_update_and_delete_conditions(session: Any) -> None:
    session.execute(
        f"CREATE TABLE ks.upd (pk int, ck int, v int, w text, PRIMARY KEY (pk, ck)) {IMAGES}"
    )
    session.execute("INSERT INTO ks.upd (pk, ck, v, w) VALUES (1, 1, 10, 'a')")
    applied = session.execute("UPDATE ks.upd SET v = 12 WHERE pk = 1 AND ck = 1 IF v = 10")
    assert applied.column_names == ["[applied]", "v"]
    assert [tuple(r) for r in applied] == [(True, 10)]  # ScyllaDB: the old row, even applied
    refused = "UPDATE ks.upd SET v = 13 WHERE pk = 1 AND ck = 1 IF v = 10 AND w = 'a'"
    assert _result(session, refused) == [(False, 12, "a")]
    assert _result(session, "UPDATE ks.upd SET v = 1 WHERE pk = 1 AND ck = 2 IF EXISTS") == [
        (False, None, None, None, None)
    ]
    assert _result(session, "UPDATE ks.upd SET w = 'b' WHERE pk = 1 AND ck = 1 IF v IN (1, 12)")[0][
        0
    ]
    assert _result(session, "UPDATE ks.upd SET v = 14 WHERE pk = 1 AND ck = 1 IF w != 'b'") == [
        (False, "b")
    ]
    assert _result(session, "UPDATE ks.upd SET v = 15 WHERE pk = 1 AND ck = 1 IF v > 11")[0][0]
    deleted = _result(session, "DELETE FROM ks.upd WHERE pk = 1 AND ck = 1 IF EXISTS")
    assert deleted == [(True, 1, 1, 15, "b")]
    assert _result(session, "DELETE FROM ks.upd WHERE pk = 1 AND ck = 1 IF EXISTS") == [
        (False, None, None, None, None)
    ]
    assert _result(session, "SELECT * FROM ks.upd") == []
    ops = [(op, v) for op, _, _, v in _log(session, "ks.upd")]
    # insert (+post), update v (pre, delta, post), update w, update v, delete (pre, delta)
    assert ops == [
        (2, 10), (9, 10),
        (0, 10), (1, 12), (9, 12),
        (0, None), (1, None), (9, 12),
        (0, 12), (1, 15), (9, 15),
        (0, 15), (3, None),
    ]  # fmt: skip


def test_conditions_on_null_collections_and_statics(session: Any) -> None:
    session.execute(
        "CREATE TABLE ks.col (pk int, ck int, s int static, v int, m map<text, int>, "
        "l list<int>, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    # no row yet: v is null
    assert _result(session, "UPDATE ks.col SET v = 1 WHERE pk = 1 AND ck = 1 IF v = null") == [
        (True, None)
    ]
    session.execute("UPDATE ks.col SET m = {'a': 1}, l = [5, 6] WHERE pk = 1 AND ck = 1")
    assert _result(session, "UPDATE ks.col SET v = 2 WHERE pk = 1 AND ck = 1 IF m['a'] = 1")[0][0]
    assert not _result(session, "UPDATE ks.col SET v = 3 WHERE pk = 1 AND ck = 1 IF l[1] = 5")[0][0]
    assert _result(session, "UPDATE ks.col SET v = 3 WHERE pk = 1 AND ck = 1 IF l CONTAINS 6")[0][0]
    assert _result(
        session, "UPDATE ks.col SET v = 4 WHERE pk = 1 AND ck = 1 IF m CONTAINS KEY 'a'"
    )[0][0]
    # ScyllaDB's example: the row does not exist, the static row decides
    session.execute("INSERT INTO ks.col (pk, s) VALUES (2, 1)")
    assert _result(session, "UPDATE ks.col SET v = 1 WHERE pk = 2 AND ck = 1 IF s = 1") == [
        (True, 1)
    ]
    assert _result(session, "SELECT pk, ck, s, v FROM ks.col WHERE pk = 2") == [(2, 1, 1, 1)]


def test_conditional_batch(session: Any) -> None:
    session.execute(f"CREATE TABLE ks.b (pk int, ck int, v int, PRIMARY KEY (pk, ck)) {IMAGES}")
    batch = (
        "BEGIN BATCH INSERT INTO ks.b (pk, ck, v) VALUES (1, 1, 1) IF NOT EXISTS; "
        "INSERT INTO ks.b (pk, ck, v) VALUES (1, 2, 2); "
        "UPDATE ks.b SET v = 3 WHERE pk = 1 AND ck = 3 IF v = null APPLY BATCH"
    )
    rows = session.execute(batch)
    assert rows.column_names == ["[applied]", "pk", "ck", "v"]
    assert [tuple(r) for r in rows] == [(True, None, None, None)] * 3  # a row per statement
    again = [tuple(r) for r in session.execute(batch)]
    assert [r[0] for r in again] == [False] * 3  # one condition fails: nothing applies
    assert again[0] == (False, 1, 1, 1)
    assert _result(session, "SELECT pk, ck, v FROM ks.b") == [(1, 1, 1), (1, 2, 2), (1, 3, 3)]
    assert len([op for op, *_ in _log(session, "ks.b") if op != 9]) == 3  # logged once


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ("UPDATE ks.e SET v = 1 WHERE pk IN (1, 2) AND ck = 1 IF v = 1",
         "IN on the partition key is not supported with conditional updates"),
        ("UPDATE ks.e SET v = 1 WHERE pk = 1 AND ck IN (1, 2) IF v = 1",
         "IN on the clustering key columns is not supported with conditional updates"),
        ("UPDATE ks.e USING TIMESTAMP 1 SET v = 1 WHERE pk = 1 AND ck = 1 IF v = 1",
         "Cannot provide custom timestamp for conditional updates"),
        ("UPDATE ks.e SET v = 1 WHERE pk = 1 AND ck = 1 IF ck = 1",
         "PRIMARY KEY column 'ck' cannot have IF conditions"),
        ("UPDATE ks.e SET v = 1 WHERE pk = 1 AND ck = 1 IF nope = 1", "Unknown identifier nope"),
        ("UPDATE ks.e SET v = 1 WHERE pk = 1 AND ck = 1 IF v < null",
         'Invalid comparison with null for operator "<"'),
        ("DELETE FROM ks.e WHERE pk = 1 IF EXISTS",
         "DELETE statements must restrict all PRIMARY KEY columns with equality relations in "
         "order to delete non static columns"),
        ("UPDATE ks.c SET n = n + 1 WHERE pk = 1 IF EXISTS",
         "Conditional updates are not supported on counter tables"),
        ("BEGIN BATCH INSERT INTO ks.e (pk, ck, v) VALUES (1, 1, 1) IF NOT EXISTS; "
         "INSERT INTO ks.e (pk, ck, v) VALUES (2, 1, 1) APPLY BATCH",
         "Batch with conditions cannot span multiple partitions"),
        ("BEGIN BATCH USING TIMESTAMP 1 INSERT INTO ks.e (pk, ck, v) VALUES (1, 1, 1) "
         "IF NOT EXISTS APPLY BATCH", "Cannot provide custom timestamp for conditional BATCH"),
    ],
)  # fmt: skip
def test_errors(session: Any, statement: str, message: str) -> None:
    session.execute("CREATE TABLE IF NOT EXISTS ks.e (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    session.execute("CREATE TABLE IF NOT EXISTS ks.c (pk int PRIMARY KEY, n counter)")
    with pytest.raises(InvalidRequest) as caught:
        session.execute(statement)
    assert caught.value.message == message
    assert _result(session, "SELECT * FROM ks.e") == []


def test_the_driver_through_cqlcdc_serve(session: Any) -> None:
    from cassandra.cluster import Cluster
    from cassandra.policies import RoundRobinPolicy
    from cassandra.query import BatchStatement

    from cqlcdc.server import CqlServer

    session.execute("CREATE TABLE ks.drv (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    server = CqlServer(session.coordinator, port=0)
    host, port = server.start_in_thread()
    cluster = Cluster([host], port=port, load_balancing_policy=RoundRobinPolicy())
    try:
        cql = cluster.connect("ks")  # sends client timestamps: an LWT ignores them
        insert = cql.prepare("INSERT INTO drv (pk, ck, v) VALUES (?, ?, ?) IF NOT EXISTS")
        assert cql.execute(insert, (1, 1, 1)).was_applied
        refused = cql.execute(insert, (1, 1, 2))
        assert not refused.was_applied
        assert refused.one().v == 1
        update = cql.prepare("UPDATE drv SET v = ? WHERE pk = ? AND ck = ? IF v = ?")
        assert cql.execute(update, (5, 1, 1, 1)).was_applied
        assert not cql.execute(update, (6, 1, 1, 1)).was_applied
        batch = BatchStatement()
        batch.add(insert, (1, 2, 7))
        batch.add("UPDATE drv SET v = 8 WHERE pk = 1 AND ck = 1 IF v = 5")
        assert cql.execute(batch).was_applied
        rows = sorted(tuple(r) for r in cql.execute("SELECT pk, ck, v FROM drv"))
        assert rows == [(1, 1, 8), (1, 2, 7)]
    finally:
        cluster.shutdown()
        server.stop_thread()


def test_arithmetic_in_a_conditional_update(session: Any) -> None:
    """ScyllaDB's extension (issue 10568, cqlpy's test_lwt_counter_syntax*): ``r = r + v`` on
    a numeric column of a conditional UPDATE adds to the value the condition saw; a null
    stays null; an integer overflow is refused; without a condition it is refused at PREPARE;
    the CDC log records the value written."""
    from cassandra import InvalidRequest as DriverInvalidRequest
    from cassandra.cluster import Cluster
    from cassandra.policies import RoundRobinPolicy

    from cqlcdc.server import CqlServer

    session.execute(
        "CREATE TABLE ks.arith (p int, c int, r int, d decimal, t tinyint, PRIMARY KEY (p, c)) "
        "WITH cdc = {'enabled': true, 'preimage': true}"
    )
    server = CqlServer(session.coordinator, port=0)
    host, port = server.start_in_thread()
    cluster = Cluster([host], port=port, load_balancing_policy=RoundRobinPolicy())
    try:
        cql = cluster.connect("ks")
        cql.execute("INSERT INTO arith (p, c, r, d, t) VALUES (1, 1, 10, 1.5, 127)")
        inc = cql.prepare("UPDATE arith SET r = r + ? WHERE p = ? AND c = ? IF EXISTS")
        assert cql.execute(inc, (5, 1, 1)).was_applied
        assert not cql.execute("UPDATE arith SET r = r - 20 WHERE p = 1 AND c = 1 IF r >= 20")[
            0
        ].applied
        assert cql.execute(
            "UPDATE arith SET r = r - 2, d = d + 0.25 WHERE p = 1 AND c = 1 IF r = 15"
        )[0].applied
        assert tuple(cql.execute("SELECT r, d FROM arith WHERE p = 1 AND c = 1").one()) == (
            13,
            Decimal("1.75"),
        )
        with pytest.raises(DriverInvalidRequest, match="Arithmetic ADD overflow"):
            cql.execute("UPDATE arith SET t = t + 1 WHERE p = 1 AND c = 1 IF EXISTS")
        cql.execute("INSERT INTO arith (p, c) VALUES (2, 1)")
        assert cql.execute("UPDATE arith SET r = r + 1 WHERE p = 2 AND c = 1 IF EXISTS")[0].applied
        assert cql.execute("SELECT r FROM arith WHERE p = 2 AND c = 1").one().r is None
        with pytest.raises(DriverInvalidRequest, match="for non counter column r"):
            cql.prepare("UPDATE arith SET r = r + 1 WHERE p = ? AND c = ?")
        with pytest.raises(DriverInvalidRequest, match="of type int"):
            cql.prepare("UPDATE arith SET r = r + 3.5 WHERE p = ? AND c = ? IF EXISTS")
        logged = [
            (row.operation, row.r)
            for row in cql.execute(
                'SELECT "cdc$operation" AS operation, r FROM arith_scylla_cdc_log'
            )
            if row.r is not None
        ]
        assert (1, 15) in logged and (1, 13) in logged  # the deltas carry the computed values
    finally:
        cluster.shutdown()
        server.stop_thread()


# -- concurrent clients against a sequential model -------------------------------------------

# one operation: (kind, key, expected old value for "cas"); each writes a unique new value
_OPS = st.tuples(
    st.sampled_from(["insert_ine", "cas", "update_ie", "delete_ie", "plain"]),
    st.integers(0, 2),
    st.integers(0, 6),
)


@pytest.fixture(scope="module", params=WORKERS, ids=workers_id)
def served(session: Any, request: pytest.FixtureRequest) -> Iterator[tuple[str, int]]:
    """The server alone, or behind two protocol workers: conditional writes from clients
    on different workers serialize as from one process."""
    from cqlcdc.server import CqlServer

    server = CqlServer(session.coordinator, port=0, protocol_workers=request.param)
    yield server.start_in_thread()
    server.stop_thread()


def _driver_client(address: tuple[str, int]) -> tuple[Any, Any]:
    """A connection of its own (one Cluster per client); the server's clock stamps every
    write, as it stamps the conditional ones, so plain and conditional writes order alike."""
    from cassandra.cluster import Cluster
    from cassandra.policies import RoundRobinPolicy

    cluster = Cluster([address[0]], port=address[1], load_balancing_policy=RoundRobinPolicy())
    client = cluster.connect()
    client.use_client_timestamp = False
    return cluster, client


@pytest.mark.parametrize("via", ["threads", "cqlcdc serve"])
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(clients=st.lists(st.lists(_OPS, min_size=1, max_size=5), min_size=2, max_size=3))
def test_concurrent_lwts_serialize_in_commit_order(
    session: Any, served: tuple[str, int], via: str, clients: list[Any]
) -> None:
    table = f"ks.conc{abs(hash((via, served, repr(clients)))) % 10**9}"
    session.execute(
        f"CREATE TABLE IF NOT EXISTS {table} (pk int PRIMARY KEY, v int) "
        "WITH cdc = {'enabled': true}"
    )
    session.execute(f"TRUNCATE {table}")
    outcomes: dict[int, bool] = {}  # new value -> applied
    ops_by_value: dict[int, tuple[str, int, int]] = {}
    lock = threading.Lock()

    def run(n: int, ops: list[tuple[str, int, int]]) -> None:
        cluster = None
        if via == "threads":
            mine = Session(session.coordinator)
        else:
            cluster, mine = _driver_client(served)
        for i, (kind, key, expected) in enumerate(ops):
            value = 100 * (n + 1) + i  # unique per write
            query = {
                "insert_ine": f"INSERT INTO {table} (pk, v) VALUES ({key}, {value}) IF NOT EXISTS",
                "cas": f"UPDATE {table} SET v = {value} WHERE pk = {key} IF v = {expected}",
                "update_ie": f"UPDATE {table} SET v = {value} WHERE pk = {key} IF EXISTS",
                "delete_ie": f"DELETE FROM {table} WHERE pk = {key} IF EXISTS",
                "plain": f"UPDATE {table} SET v = {value} WHERE pk = {key}",
            }[kind]
            rows = mine.execute(query)
            with lock:
                ops_by_value[value] = (kind, key, expected)
                outcomes[value] = True if kind == "plain" else bool(rows.one()[0])
        if cluster is not None:
            cluster.shutdown()

    threads = [threading.Thread(target=run, args=(n, ops)) for n, ops in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # the log, in commit order (cdc$time), is the sequence of applied writes
    log = session.execute(f'SELECT "cdc$time", "cdc$operation", pk, v FROM {table}_scylla_cdc_log')
    applied_seq = sorted(log, key=lambda r: (r[0].time, r[0].bytes))
    model: dict[int, int | None] = {}
    logged_values: list[int] = []
    for _, op, key, v in applied_seq:
        if op == 3 or op == 4:  # a (row or partition) deletion
            model[key] = None
        else:
            model[key] = v
            logged_values.append(v)
    # every applied write that sets a value appears once; an unapplied one not at all
    setting = {v for v, (kind, _, _) in ops_by_value.items() if kind != "delete_ie"}
    assert sorted(logged_values) == sorted(v for v in setting if outcomes[v])
    deletes = [v for v, (kind, _, _) in ops_by_value.items() if kind == "delete_ie"]
    assert sum(1 for r in applied_seq if r[1] in (3, 4)) == sum(outcomes[v] for v in deletes)
    # replaying the applied writes in commit order, each outcome is what the model decides
    state: dict[int, int | None] = {}
    for _, op, key, v in applied_seq:
        if op in (3, 4):
            assert state.get(key) is not None  # a DELETE IF EXISTS found its row
            state[key] = None
            continue
        kind, _, expected = ops_by_value[v]
        old = state.get(key)
        assert {
            "insert_ine": old is None,
            "cas": old == expected,
            "update_ie": old is not None,
            "plain": True,
        }[kind], (kind, key, old, expected)
        state[key] = v
    final = {r.pk: r.v for r in session.execute(f"SELECT pk, v FROM {table}")}
    assert final == {k: v for k, v in state.items() if v is not None}
