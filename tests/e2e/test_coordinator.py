"""One coordinator per data directory, many sessions over it: each session has its own
keyspace and prepared statements, all share the engine, and DDL swaps the catalog whole."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.cql import parse_statement
from cqlcdc.errors import DataDirLocked, InvalidRequest, ServerError
from cqlcdc.session import Session
from cqlcdc.writes import row_records

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE {} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"


@pytest.fixture
def session(spark: Any, tmp_path: Path) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=tmp_path / "data", master="local[2]")
    try:
        s.execute(KS.format("a"))
        s.execute(KS.format("b"))
        s.execute("CREATE TABLE a.t (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
        s.execute("CREATE TABLE b.t (pk int PRIMARY KEY, v int)")
        yield s
    finally:
        s.close()


def test_sessions_have_their_own_keyspace_and_share_the_engine(session: Any) -> None:
    one = Session(session.coordinator, "a")
    two = Session(session.coordinator)
    two.execute("USE b")
    one.execute("INSERT INTO t (pk, v) VALUES (1, 1)")
    two.execute("INSERT INTO t (pk, v) VALUES (2, 2)")
    assert [tuple(r) for r in one.execute("SELECT pk, v FROM t")] == [(1, 1)]
    assert [tuple(r) for r in two.execute("SELECT pk, v FROM t")] == [(2, 2)]
    assert one.keyspace == "a" and two.keyspace == "b" and session.keyspace is None
    one.close()  # a session the coordinator made does not close the engine
    with pytest.raises(ServerError, match="Session is closed"):
        one.execute("SELECT * FROM a.t")
    assert len(two.execute("SELECT pk FROM a.t_scylla_cdc_log").all()) == 1


def test_prepared_ids_are_stable_per_query_and_keyspace(session: Any) -> None:
    one = Session(session.coordinator, "a")
    q = "INSERT INTO t (pk, v) VALUES (?, ?)"
    assert one.prepare(q).query_id == one.prepare(q).query_id
    assert one.prepare(q).query_id != Session(session.coordinator, "b").prepare(q).query_id
    assert len(one.prepare(q).query_id) == 16


def test_a_session_has_no_engine_knobs_to_set_by_mistake(session: Any) -> None:
    with pytest.raises(AttributeError):
        session.sweep_interval_s = 10.0


def test_ddl_swaps_the_catalog_whole(session: Any) -> None:
    before = session.catalog
    session.execute("CREATE TABLE a.u (pk int PRIMARY KEY)")
    assert before.table("a", "u") is None  # a reader's snapshot never changes under it
    assert session.catalog.table("a", "u") is not None
    with pytest.raises(InvalidRequest):
        session.execute("CREATE TABLE a.w (pk int PRIMARY KEY, pk int)")
    assert session.catalog.table("a", "w") is None


def test_concurrent_sessions_write_and_run_ddl(session: Any) -> None:
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        s = Session(session.coordinator, "a")
        try:
            for i in range(20):
                s.execute(f"INSERT INTO t (pk, v) VALUES ({n * 100 + i}, {i})", wait=False)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for i in range(3):
        session.execute(f"CREATE TABLE b.x{i} (pk int PRIMARY KEY)")
    for t in threads:
        t.join()
    assert errors == []
    assert len(session.execute("SELECT pk FROM a.t").all()) == 80
    assert len(session.execute("SELECT pk FROM a.t_scylla_cdc_log").all()) == 80


def test_a_second_coordinator_on_the_directory_is_refused(session: Any) -> None:
    with pytest.raises(DataDirLocked, match="pid"):
        cqlcdc.connect(data_dir=session.data_dir, master="local[2]")


def test_writes_queued_together_become_durable_in_one_append(session: Any) -> None:
    c = session.coordinator
    appends: list[int] = []
    original = c.ingest.append

    def counting(records: Any) -> None:
        appends.append(len(records))
        original(records)

    c.ingest.append = counting
    try:
        writer = Session(c, "a")
        with c.lock:  # three writers queue before any of them asks for durability
            for pk in range(3):
                stmt = parse_statement(f"INSERT INTO t (pk, v) VALUES ({pk}, 0)")
                records, _ = row_records(c, stmt, None, "a")
                c.append(records)
        c.make_durable(c.next_seq - 1)
        c.make_durable(c.next_seq - 1)  # nothing left: no second append
        assert appends == [3]
        assert len(writer.execute("SELECT pk FROM t").all()) == 3
    finally:
        c.ingest.append = original


def test_writes_acknowledged_at_durability_wait_when_the_pipeline_is_far_behind(
    session: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Backpressure: a write acknowledged once durable (``wait=False``, as the server
    acknowledges) waits while the pipeline is more than the bound behind, so the backlog,
    and the reads waiting behind it, stay bounded; the system tables answer at once."""
    import cqlcdc.coordinator.group_commit as coordinator_module

    monkeypatch.setattr(coordinator_module, "MAX_UNAPPLIED_FILES", 6)
    monkeypatch.setattr(coordinator_module, "MAX_UNAPPLIED_WRITES", 10)
    c = session.coordinator
    insert = session.prepare("INSERT INTO a.t (pk, v) VALUES (?, ?)")
    worst = 0
    for i in range(40):
        session.execute(insert, (i, i), wait=False)  # one ingest file each
        worst = max(worst, c.next_seq - 1 - c.engine.committed_seq())
        assert session.execute("SELECT key FROM system.local").one() is not None
    assert worst <= 10
    assert len(session.execute("SELECT pk FROM a.t").all()) == 40
