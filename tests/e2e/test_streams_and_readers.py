"""Stream discovery through the system tables, per-stream reads, and the log read outside
the engine (deltalake + pyarrow, DuckDB) with the documented types."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import cqlcdc

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture(scope="module")
def session(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("streams") / "data", master="local[2]")
    s.execute(KS)
    s.execute(
        "CREATE TABLE ks.t (pk int, ck int, v text, d decimal, m map<int, text>, "
        "PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    s.execute_many(
        [
            f"INSERT INTO ks.t (pk, ck, v, d, m) VALUES ({i}, {i}, 'v{i}', 1.5, {{1: 'a'}})"
            for i in range(20)
        ]
    )
    yield s
    s.close()


def test_discovery_queries_find_every_log_row(session: Any) -> None:
    gens = list(
        session.execute(
            "SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'"
        )
    )
    assert len(gens) == 1
    gen_time = gens[0].time
    descs = list(
        session.execute(
            f"SELECT range_end, streams FROM system_distributed.cdc_streams_descriptions_v2 "
            f"WHERE time = {gen_time}"
        )
    )
    streams = [s for d in descs for s in d.streams]
    assert len(streams) == len(descs) > 1
    ends = [d.range_end for d in descs]
    assert ends == sorted(ends) and ends[-1] == 2**63 - 1
    total = 0
    for sid in streams:
        rows = list(
            session.execute(
                f'SELECT "cdc$stream_id", "cdc$time", pk FROM ks.t_scylla_cdc_log '
                f'WHERE "cdc$stream_id" = 0x{sid.hex()}'
            )
        )
        assert all(r[0] == sid for r in rows)
        times = [r[1] for r in rows]
        assert times == sorted(times, key=lambda u: (u.time, u.bytes))
        total += len(rows)
    assert total == 20
    # stream id layout: version 1 in the low 4 bits, the vnode index above it
    for i, sid in enumerate(streams):
        low = int.from_bytes(sid[8:], "big")
        assert low & 0xF == 1 and (low >> 4) & ((1 << 22) - 1) == i
    tablets = list(
        session.execute(
            "SELECT stream_id, stream_state FROM system.cdc_streams "
            "WHERE keyspace_name = 'ks' AND table_name = 't'"
        )
    )
    assert sorted(r.stream_id for r in tablets) == sorted(streams)


def test_log_reads_outside_spark(session: Any) -> None:
    import duckdb
    from deltalake import DeltaTable

    path = session.table_location("ks.t_scylla_cdc_log")
    version = session.committed_version("ks.t_scylla_cdc_log")
    table = DeltaTable(str(path), version=version).to_pyarrow_table()
    assert table.num_rows == 20
    schema = table.schema
    assert str(schema.field("cdc$time").type) == "string"
    assert str(schema.field("cdc$operation").type) == "int8"
    assert str(schema.field("m").type).startswith("map<int32, string")
    row = table.sort_by("pk").slice(0, 1).to_pylist()[0]
    assert row["v"] == "v0" and row["d"] == "1.5"
    # cdc$time: a version-1 timeuuid whose 64 low bits are random (variant bits included)
    assert uuid.UUID(row["cdc$time"]).time_hi_version >> 12 == 1
    con = duckdb.connect()
    con.register("log", table)
    n, ops = con.execute(
        'SELECT count(*), min("cdc$operation") FROM log WHERE "cdc$end_of_batch"'
    ).fetchone()
    assert (n, ops) == (20, 2)


def test_new_generation_moves_later_writes_to_new_streams(session: Any) -> None:
    old_streams = {r[0] for r in session.execute('SELECT "cdc$stream_id" FROM ks.t_scylla_cdc_log')}
    ts = session.new_cdc_generation()
    gens = [
        r.time
        for r in session.execute(
            "SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'"
        )
    ]
    assert gens[0] == ts and len(gens) == 2  # newest first (clustering order DESC)
    new_streams = {
        s
        for d in session.execute(
            f"SELECT streams FROM system_distributed.cdc_streams_descriptions_v2 WHERE time = {ts}"
        )
        for s in d.streams
    }
    assert not new_streams & old_streams
    session.execute("UPDATE ks.t SET v = 'after' WHERE pk = 1 AND ck = 1")
    rows = list(
        session.execute(
            'SELECT "cdc$stream_id" FROM ks.t_scylla_cdc_log WHERE pk = 1 ALLOW FILTERING'
        )
    )
    streams = sorted(r[0] in new_streams for r in rows)
    assert streams == [False, True]  # the first write in an old stream, the new one in a new
