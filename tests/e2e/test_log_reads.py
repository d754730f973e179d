"""Reads of a CDC log table that run column-wise (stream ids, filters on atomic columns,
cdc$time windows, COUNT(*)) return exactly what the row path returns: each query is
checked against the whole log filtered in Python."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

import cqlcdc

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
OP = "cdc$operation"


@pytest.fixture(scope="module")
def session(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("logreads") / "d", master="local[2]")
    s.execute(KS)
    s.execute(
        "CREATE TABLE ks.t (pk int, ck int, v int, f double, name text, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true, 'ttl': 0}"
    )
    insert = s.prepare("INSERT INTO ks.t (pk, ck, v, f, name) VALUES (?, ?, ?, ?, ?)")
    rows = [(i % 20, i, i % 7, i / 3, f"n{i % 5}") for i in range(300)]
    s.execute_many([insert] * len(rows), rows)
    update = s.prepare("UPDATE ks.t SET v = ? WHERE pk = ? AND ck = ?")
    delete = s.prepare("DELETE FROM ks.t WHERE pk = ? AND ck = ?")
    ups = [(i % 11, i % 20, i) for i in range(0, 300, 3)]
    dels = [(i % 20, i) for i in range(0, 300, 10)]
    s.execute_many([update] * len(ups) + [delete] * len(dels), ups + dels)
    s.execute("UPDATE ks.t SET f = NaN WHERE pk = 1 AND ck = 1")
    yield s
    s.close()


def _all(session: Any) -> list[dict[str, Any]]:
    return [r._asdict() for r in session.execute("SELECT * FROM ks.t_scylla_cdc_log")]


@pytest.mark.parametrize(
    ("where", "keep"),
    [
        (f'"{OP}" = 2', lambda r: r[OP] == 2),
        (f'"{OP}" IN (1, 3)', lambda r: r[OP] in (1, 3)),
        ("v > 3", lambda r: r["v"] is not None and r["v"] > 3),
        (
            "v <= 2 AND name = 'n1'",
            lambda r: r["v"] is not None and r["v"] <= 2 and r["name"] == "n1",
        ),
        # floats take the row path; CQL orders NaN above every number, as Java's compare
        ("f > 50", lambda r: r["f"] is not None and (r["f"] != r["f"] or r["f"] > 50)),
        ("pk = 3", lambda r: r["pk"] == 3),
    ],
)
def test_filtered_reads_and_counts(session: Any, where: str, keep: Any) -> None:
    expected = [r for r in _all(session) if keep(r)]
    assert expected, "the data must hold matching rows"
    rows = session.execute(f"SELECT * FROM ks.t_scylla_cdc_log WHERE {where} ALLOW FILTERING")
    key = ("cdc$stream_id", "cdc$time", "cdc$batch_seq_no")
    assert sorted(tuple(r[k] for k in key) for r in rows) == sorted(
        tuple(r[k] for k in key) for r in expected
    )
    count = session.execute(
        f"SELECT COUNT(*) FROM ks.t_scylla_cdc_log WHERE {where} ALLOW FILTERING"
    )
    assert count.one()[0] == len(expected)
    assert count.column_types[0].cql_name == "bigint"


def test_counts_of_the_whole_log_and_of_streams(session: Any) -> None:
    everything = _all(session)
    assert session.execute("SELECT COUNT(*) FROM ks.t_scylla_cdc_log").one()[0] == len(everything)
    streams = sorted({r["cdc$stream_id"] for r in everything})[:3]
    got = session.execute(
        'SELECT COUNT(*) AS n FROM ks.t_scylla_cdc_log WHERE "cdc$stream_id" IN ?', (streams,)
    )
    assert got.column_names == ["n"]
    assert got.one().n == sum(1 for r in everything if r["cdc$stream_id"] in streams)


def test_stream_window_reads(session: Any) -> None:
    everything = _all(session)
    streams = sorted({r["cdc$stream_id"] for r in everything})[:4]
    times = sorted(r["cdc$time"].time for r in everything)
    middle = times[len(times) // 3]  # a window that cuts the log
    window = session.prepare(
        'SELECT * FROM ks.t_scylla_cdc_log WHERE "cdc$stream_id" IN ? '
        'AND "cdc$time" > minTimeuuid(?) AND "cdc$time" < maxTimeuuid(?)'
    )
    unix_ms = (middle - 0x01B21DD213814000) // 10_000
    now_ms = int(time.time() * 1000) + 60_000
    rows = session.execute(window, (streams, unix_ms, now_ms)).all()
    expected = [
        r
        for r in everything
        if r["cdc$stream_id"] in streams
        and (r["cdc$time"].time - 0x01B21DD213814000) // 10_000 > unix_ms
    ]
    # minTimeuuid(ms) < every timeuuid of a later millisecond, and of the same one after it
    assert {(r["cdc$stream_id"], r["cdc$time"]) for r in rows} >= {
        (r["cdc$stream_id"], r["cdc$time"]) for r in expected
    }
    assert all(r["cdc$stream_id"] in streams for r in rows)
    assert all((r["cdc$time"].time - 0x01B21DD213814000) // 10_000 >= unix_ms for r in rows)
    # within a stream the rows come in cdc$time order
    for stream in streams:
        mine = [r["cdc$time"].time for r in rows if r["cdc$stream_id"] == stream]
        assert mine == sorted(mine)
