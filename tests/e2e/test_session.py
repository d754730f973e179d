"""The Python API end to end through Spark: writes, reads, restart, truncate, errors."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.cql import parse_statement
from cqlcdc.errors import InvalidRequest
from cqlcdc.writes import row_records

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


def _rows(result: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in result]


def test_a_new_session_reads_writes_made_durable_before_it(spark: Any, tmp_path: Path) -> None:
    # a crash between a write's durable append and its commit: the next session's engine
    # applies it, and the first read waits for that as for the session's own writes
    data = tmp_path / "data"
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    s.execute(KS)
    s.execute("CREATE TABLE ks.t (pk int, v int, PRIMARY KEY (pk)) WITH cdc = {'enabled': true}")
    # the process "dies" right after a durable append: no sweeper, no engine, no flush
    c = s.coordinator
    with c.lock:
        records, _ = row_records(
            c, parse_statement("INSERT INTO ks.t (pk, v) VALUES (1, 10)"), None, None
        )
        c.append(records)
    c.make_durable(records[-1].seq)
    c.kill()
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        assert _rows(s.execute("SELECT pk, v FROM ks.t")) == [(1, 10)]
        assert len(s.execute("SELECT pk FROM ks.t_scylla_cdc_log").all()) == 1
    finally:
        s.close()


def test_a_data_directory_copied_with_cp_a_opens_at_its_new_path(
    spark: Any, tmp_path: Path
) -> None:
    # Spark's checkpoint kept absolute paths: a copy failed every read ("Wrong basePath").
    # Now the checkpoint is scratch and the manifest the only anchor, so a copy (or a move)
    # is a data directory like any other, and the original goes on independently.
    data = tmp_path / "data"
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    s.execute(KS)
    s.execute("CREATE TABLE ks.t (pk int, v int, PRIMARY KEY (pk)) WITH cdc = {'enabled': true}")
    s.execute("INSERT INTO ks.t (pk, v) VALUES (1, 10)")
    s.close()
    copy = tmp_path / "elsewhere" / "copy"
    copy.parent.mkdir()
    subprocess.run(["cp", "-a", str(data), str(copy)], check=True)
    s = cqlcdc.connect(data_dir=copy, master="local[2]")
    try:
        assert _rows(s.execute("SELECT pk, v FROM ks.t")) == [(1, 10)]
        s.execute("INSERT INTO ks.t (pk, v) VALUES (2, 20)")
        assert _rows(s.execute("SELECT pk, v FROM ks.t")) == [(1, 10), (2, 20)]
        assert len(s.execute("SELECT pk FROM ks.t_scylla_cdc_log").all()) == 2
    finally:
        s.close()
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        assert _rows(s.execute("SELECT pk, v FROM ks.t")) == [(1, 10)]
    finally:
        s.close()


def test_write_read_and_restart(spark: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    s.execute(KS)
    s.execute(
        "CREATE TABLE ks.t (pk int, ck int, v text, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
    )
    for i in range(5):
        s.execute(f"INSERT INTO ks.t (pk, ck, v) VALUES ({i % 2}, {i}, 'v{i}')")
    s.execute("UPDATE ks.t SET v = 'changed' WHERE pk = 0 AND ck = 0")
    before = _rows(s.execute("SELECT pk, ck, v FROM ks.t"))
    log_before = _rows(s.execute('SELECT "cdc$operation", pk, ck, v FROM ks.t_scylla_cdc_log'))
    s.close()

    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        assert _rows(s.execute("SELECT pk, ck, v FROM ks.t")) == before
        log_after = _rows(s.execute('SELECT "cdc$operation", pk, ck, v FROM ks.t_scylla_cdc_log'))
        assert log_after == log_before
        # 5 inserts (delta + postimage each) + 1 update (preimage, delta, postimage)
        assert len(log_after) == 13
        row = s.execute("SELECT v FROM ks.t WHERE pk = 0 AND ck = 0").one()
        assert row is not None and row.v == "changed"
        # the engine keeps working after the restart
        s.execute("DELETE FROM ks.t WHERE pk = 1")
        assert _rows(s.execute("SELECT pk, ck FROM ks.t WHERE pk = 1")) == []
    finally:
        s.close()


def test_truncate_empties_base_not_log(session: Any) -> None:
    s = session
    s.execute("USE ks")
    s.execute("CREATE TABLE t (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    s.execute("INSERT INTO t (pk, v) VALUES (1, 1)")
    s.execute("TRUNCATE t")
    assert _rows(s.execute("SELECT * FROM t")) == []
    assert len(_rows(s.execute("SELECT pk FROM t_scylla_cdc_log"))) == 1
    s.execute("UPDATE t SET v = 2 WHERE pk = 2")
    assert _rows(s.execute("SELECT pk, v FROM t")) == [(2, 2)]


def test_errors_are_cql_errors(session: Any) -> None:
    s = session
    s.execute("CREATE TABLE ks.t (pk int, ck int, l list<int>, PRIMARY KEY (pk, ck))")
    with pytest.raises(InvalidRequest, match="unconfigured table nope"):
        s.execute("SELECT * FROM ks.nope")
    with pytest.raises(InvalidRequest, match="Missing mandatory PRIMARY KEY part ck"):
        s.execute("UPDATE ks.t SET l = [1] WHERE pk = 0")
    # a positional list write is checked against the list in the pipeline
    s.execute("UPDATE ks.t SET l = [1, 2] WHERE pk = 0 AND ck = 0")
    with pytest.raises(InvalidRequest, match="List index 5 out of bound, list has size 2"):
        s.execute("UPDATE ks.t SET l[5] = 9 WHERE pk = 0 AND ck = 0")
    s.execute("UPDATE ks.t SET l[1] = 9 WHERE pk = 0 AND ck = 0")
    s.execute("UPDATE ks.t SET l = l - [1] WHERE pk = 0 AND ck = 0")
    assert _rows(s.execute("SELECT l FROM ks.t")) == [((9,),)]


def test_alter_table_and_cdc_lifecycle(session: Any) -> None:
    """ADD/DROP columns reach the log schema; disabling detaches the log (kept, not written);
    re-enabling reattaches it (reference 1)."""
    s = session
    s.execute(
        "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    s.execute("UPDATE ks.t SET v = 1 WHERE pk = 0 AND ck = 0")
    s.execute("ALTER TABLE ks.t ADD w text")
    s.execute("UPDATE ks.t SET w = 'x' WHERE pk = 0 AND ck = 0")
    assert _rows(s.execute("SELECT v, w FROM ks.t_scylla_cdc_log")) == [(1, None), (None, "x")]
    s.execute("ALTER TABLE ks.t DROP v")
    assert "v" not in s.execute("SELECT * FROM ks.t_scylla_cdc_log").column_names
    s.execute("ALTER TABLE ks.t WITH cdc = {'enabled': false}")
    s.execute("UPDATE ks.t SET w = 'z' WHERE pk = 0 AND ck = 0")
    assert len(_rows(s.execute("SELECT w FROM ks.t_scylla_cdc_log"))) == 2
    s.execute("ALTER TABLE ks.t WITH cdc = {'enabled': true, 'preimage': true}")
    s.execute("UPDATE ks.t SET w = 'q' WHERE pk = 0 AND ck = 0")
    log = _rows(s.execute('SELECT "cdc$operation", w FROM ks.t_scylla_cdc_log'))
    assert log[-2:] == [(0, "z"), (1, "q")]


def test_log_ttl_rows_expire_and_are_purged(session: Any) -> None:
    import time

    s = session
    s.execute(
        "CREATE TABLE ks.short (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'ttl': 60}"
    )
    s.execute(
        "CREATE TABLE ks.forever (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'ttl': 0}"
    )
    s.execute("INSERT INTO ks.short (pk, v) VALUES (1, 1)")
    s.execute("INSERT INTO ks.forever (pk, v) VALUES (1, 1)")
    assert len(_rows(s.execute("SELECT pk FROM ks.short_scylla_cdc_log"))) == 1
    s.engine.maintenance.clock = lambda: time.time() + 120  # two minutes later
    assert s.engine.purge_expired() == 1
    assert _rows(s.execute("SELECT pk FROM ks.short_scylla_cdc_log")) == []
    assert len(_rows(s.execute("SELECT pk FROM ks.forever_scylla_cdc_log"))) == 1
    assert _rows(s.execute("SELECT pk, v FROM ks.short")) == [(1, 1)]  # base untouched


def test_prepared_statements_bind_values(session: Any) -> None:
    import datetime
    import uuid

    s = session
    s.execute(
        "CREATE TABLE ks.t (pk int, ck timeuuid, v text, tags set<text>, at timestamp, "
        "PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    insert = s.prepare("INSERT INTO ks.t (pk, ck, v, tags, at) VALUES (?, ?, ?, ?, ?) USING TTL ?")
    ck = uuid.uuid1()
    when = datetime.datetime(2024, 5, 6, 7, 8, 9, tzinfo=datetime.UTC)
    s.execute(insert, (1, ck, "one", {"a", "b"}, when, 3600))
    results = s.execute_many(
        [insert] * 3, [(2, uuid.uuid1(), f"v{i}", None, None, 0) for i in range(3)]
    )
    assert all(not isinstance(r, Exception) for r in results)
    select = s.prepare("SELECT v, tags, ttl(v) FROM ks.t WHERE pk = :pk AND ck = :ck")
    row = s.execute(select, {"pk": 1, "ck": ck}).one()
    assert row is not None and row.v == "one" and row.tags == frozenset({"a", "b"})
    assert 3500 < row[2] <= 3600
    assert len(list(s.execute("SELECT * FROM ks.t WHERE pk = ?", [2]))) == 3
    with pytest.raises(InvalidRequest, match="Not enough values bound"):
        s.execute(insert, (1, ck))
    bad = s.execute_many([insert], [(3, ck, 42, None, None, 0)])
    assert isinstance(bad[0], InvalidRequest)


def test_reads_that_name_no_partition_read_nothing(session: Any) -> None:
    """``p = null`` and ``p IN ()`` on the engine's read path (base and log): no file is
    read, aggregates still give their row."""
    s = session
    s.execute(
        "CREATE TABLE ks.n (p int, c int, v int, PRIMARY KEY (p, c)) WITH cdc = {'enabled': true}"
    )
    s.execute("INSERT INTO ks.n (p, c, v) VALUES (1, 1, 1)")
    assert _rows(s.execute("SELECT count(*) FROM ks.n WHERE p = null")) == [(0,)]
    assert _rows(s.execute("SELECT count(*) FROM ks.n WHERE p IN ()")) == [(0,)]
    assert _rows(s.execute('SELECT * FROM ks.n_scylla_cdc_log WHERE "cdc$stream_id" IN ()')) == []
    assert _rows(s.execute("SELECT count(*) FROM ks.n")) == [(1,)]
