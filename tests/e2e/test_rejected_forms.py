"""Regressions of the audit of accepted forms (docs/semantics.md): statements ScyllaDB refuses
that cqlcdc used to acknowledge and then apply as something else, through ``cqlcdc.connect``
and through ``cqlcdc run``. Each is refused now and leaves nothing behind."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import cqlcdc
from cqlcdc.cli import main
from cqlcdc.errors import ConfigurationError, InvalidRequest

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE {} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
NEGATIVE_TTL = (
    "CREATE TABLE ks.gone (pk int PRIMARY KEY, v int) "
    "WITH default_time_to_live = -5 AND cdc = {'enabled': true}"
)


@pytest.fixture(scope="module")
def session(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("forms"), master="local[2]")
    try:
        for ks in ("ks", "other"):
            s.execute(KS.format(ks))
            s.execute(
                f"CREATE TABLE {ks}.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
                "WITH cdc = {'enabled': true}"
            )
        s.execute("CREATE TABLE ks.c (pk int PRIMARY KEY, n counter)")
        yield s
    finally:
        s.close()


def _rows(session: Any, cql: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in session.execute(cql))


def test_a_negative_default_ttl_is_refused_instead_of_expiring_every_write(session: Any) -> None:
    # it used to be accepted: every INSERT was acknowledged and expired at once
    with pytest.raises(ConfigurationError, match="default_time_to_live cannot be smaller than 0"):
        session.execute(NEGATIVE_TTL)
    assert session.catalog.table("ks", "gone") is None
    with pytest.raises(ConfigurationError, match="default_time_to_live cannot be smaller than 0"):
        session.execute("ALTER TABLE ks.t WITH default_time_to_live = -1")
    session.execute("INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 1)")
    assert _rows(session, "SELECT pk, ck, v, TTL(v) FROM ks.t WHERE pk = 1") == [(1, 1, 1, None)]


def test_batches_scylla_refuses_store_nothing(session: Any) -> None:
    both = (
        "BEGIN BATCH USING TIMESTAMP 10 "
        "INSERT INTO ks.t (pk, ck, v) VALUES (2, 1, 1) USING TIMESTAMP 20; APPLY BATCH"
    )
    with pytest.raises(InvalidRequest, match="Timestamp must be set either on BATCH or"):
        session.execute(both)
    mixed = (
        "BEGIN COUNTER BATCH UPDATE ks.c SET n = n + 1 WHERE pk = 2; "
        "INSERT INTO ks.t (pk, ck, v) VALUES (2, 2, 2); APPLY BATCH"
    )
    with pytest.raises(InvalidRequest, match="Cannot include non-counter statement"):
        session.execute(mixed)
    assert _rows(session, "SELECT * FROM ks.t WHERE pk = 2") == []
    assert (
        _rows(
            session, 'SELECT "cdc$operation" FROM ks.t_scylla_cdc_log WHERE pk = 2 ALLOW FILTERING'
        )
        == []
    )
    assert _rows(session, "SELECT * FROM ks.c WHERE pk = 2") == []


def test_a_counter_takes_no_ttl_and_an_unlogged_counter_batch_applies(session: Any) -> None:
    # the TTL used to be dropped: the counter was kept forever
    with pytest.raises(InvalidRequest, match="Cannot provide custom TTL for counter updates"):
        session.execute("UPDATE ks.c USING TTL 5 SET n = n + 1 WHERE pk = 3")
    assert _rows(session, "SELECT * FROM ks.c WHERE pk = 3") == []
    # ScyllaDB accepts counters in an UNLOGGED batch (cqlcdc used to refuse it)
    session.execute("BEGIN UNLOGGED BATCH UPDATE ks.c SET n = n + 2 WHERE pk = 3; APPLY BATCH")
    assert _rows(session, "SELECT * FROM ks.c WHERE pk = 3") == [(3, 2)]


def test_a_prepared_write_keeps_the_keyspace_it_was_prepared_in(session: Any) -> None:
    # it used to run in whatever keyspace was current when executed: other.t got the row
    session.execute("USE ks")
    insert = session.prepare("INSERT INTO t (pk, ck, v) VALUES (?, ?, ?)")
    select = session.prepare("SELECT v FROM t WHERE pk = ?")
    session.execute("USE other")
    session.execute(insert, (4, 4, 4))
    session.execute_many([insert, insert], [(5, 5, 5), (6, 6, 6)])
    assert _rows(session, "SELECT pk FROM ks.t WHERE pk IN (4, 5, 6)") == [(4,), (5,), (6,)]
    assert _rows(session, "SELECT pk FROM other.t") == []
    assert _rows(session, "SELECT pk FROM t") == []  # USE other still holds for text
    assert [tuple(r) for r in session.execute(select, (4,))] == [(4,)]


def test_cli_refuses_a_negative_default_ttl(spark: Any, tmp_path: Path, capsys: Any) -> None:
    script = tmp_path / "ttl.cql"
    script.write_text(
        f"{KS.format('ks')};\n{NEGATIVE_TTL};\n"
        "INSERT INTO ks.gone (pk, v) VALUES (1, 1);\nSELECT * FROM ks.gone;\n"
    )
    code = main(["run", str(script), "--data-dir", str(tmp_path / "d"), "--format", "json"])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert code == 1
    assert [line["ok"] for line in lines] == [True, False, False, False]
    assert lines[1]["error"] == {
        "code": 0x2300,
        "class": "ConfigurationError",
        "message": "default_time_to_live cannot be smaller than 0, (default 0)",
    }
    assert lines[2]["error"]["message"] == "unconfigured table gone"


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        ('CREATE MATERIALIZED VIEW ks.mv AS SELECT * FROM ks.views_scylla_cdc_log '
         'WHERE "cdc$stream_id" IS NOT NULL PRIMARY KEY ("cdc$stream_id", "cdc$time")',
         "Materialized views cannot be created on CDC Log tables"),
        ("CREATE MATERIALIZED VIEW ks.mv AS SELECT pk, v FROM ks.views "
         "WHERE v IS NOT NULL AND pk IS NOT NULL PRIMARY KEY (v, pk)",
         "Materialized views are not supported by cqlcdc (a view would have to be maintained "
         "with its base table and log): query the base table, add a secondary index, or read "
         "the CDC log"),
        ("ALTER MATERIALIZED VIEW ks.mv WITH comment = 'x'",
         "Materialized view 'mv' not found in keyspace 'ks'"),
        ("DROP MATERIALIZED VIEW ks.mv", "Materialized view 'mv' not found in keyspace 'ks'"),
    ],
)  # fmt: skip
def test_materialized_views_are_refused(session: Any, statement: str, message: str) -> None:
    session.execute(
        "CREATE TABLE IF NOT EXISTS ks.views (pk int PRIMARY KEY, v int) "
        "WITH cdc = {'enabled': true}"
    )
    with pytest.raises(InvalidRequest) as caught:
        session.execute(statement)
    assert caught.value.message == message
    session.execute("DROP MATERIALIZED VIEW IF EXISTS ks.mv")  # none exists: nothing to do
    assert "mv" not in [t.name for t in session.catalog.tables("ks")]
