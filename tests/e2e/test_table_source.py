"""``spark.read.format("cqlcdc")`` and ``spark.readStream.format("cqlcdc")``: a batch read of a
log or base table returns what ``SELECT *`` returns through the session, pushed-down filters
return what Spark's own filtering returns, and a stream with a checkpoint sees every log row
exactly once across a restart."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import cqlcdc
from cqlcdc.datadir.commit import Manifest
from cqlcdc.pipeline.table_scan import (
    log_files,
    open_scan,
    read_log_file,
    spark_arrow_schema,
    spark_schema,
)
from cqlcdc.pipeline.table_source import expiry_condition

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = (
    "CREATE TABLE ks.t (pk int, ck int, v text, n bigint, u uuid, tu timeuuid, d decimal, "
    "vi varint, ts timestamp, dt date, b blob, f double, s set<int>, "
    "m map<int, text>, l list<text>, tp frozen<tuple<int, text>>, st int static, "
    "PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
)
LOG = "ks.t_scylla_cdc_log"
KEY = ("cdc$stream_id", "cdc$time", "cdc$batch_seq_no")


@pytest.fixture(scope="module")
def session(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("tablesource") / "d", master="local[2]")
    s.execute(KS)
    s.execute(TABLE)
    insert = s.prepare(
        "INSERT INTO ks.t (pk, ck, v, n, u, tu, d, vi, ts, dt, b, f, s, m, l, tp) "
        "VALUES (?, ?, ?, ?, uuid(), now(), ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    rows = [
        (
            i % 40,
            i,
            f"v{i % 7}",
            i * 1_000_003,
            Decimal(f"{i}.{i % 10}"),
            10**30 + i,
            1_600_000_000_000 + i,
            18_000 + i,
            bytes([i % 256, 7]),
            i / 4,
            frozenset({i, i + 1}),
            {i: f"m{i}"},
            (f"a{i}", f"b{i}"),
            (i, f"t{i}"),
        )
        for i in range(200)
    ]
    s.execute_many([insert] * len(rows), rows)
    s.execute("UPDATE ks.t SET st = 5, v = 'changed', n = null WHERE pk = 1 AND ck = 1")
    s.execute("UPDATE ks.t SET m = m + {1000: 'x'}, s = s - {3} WHERE pk = 3 AND ck = 3")
    s.execute("DELETE FROM ks.t WHERE pk = 2 AND ck = 2")
    s.execute("DELETE FROM ks.t WHERE pk = 4")
    s.execute("INSERT INTO ks.t (pk, st) VALUES (1000, 9)")  # a static-only partition
    # time and duration: base tables only (a CDC log cannot hold a time column yet: Delta
    # Lake has no time type)
    s.execute("CREATE TABLE ks.plain (pk int PRIMARY KEY, tm time, du duration, ts timestamp)")
    s.execute(
        "INSERT INTO ks.plain (pk, tm, du, ts) VALUES (1, '08:12:54.123456789', 1mo2d3h, "
        "'2020-11-26 11:30:25.588+0000')"
    )
    s.execute("INSERT INTO ks.plain (pk, tm) VALUES (2, '00:00:00.000000001')")
    yield s
    s.close()


def _df(spark: Any, session: Any, table: str, **options: Any) -> Any:
    reader = spark.read.format("cqlcdc").option("path", str(session.data_dir))
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.option("table", table).load()


def _expected(session: Any, table: str, query: str, target: pa.Schema) -> pa.Table:
    """What the session's SELECT returns, as Arrow with Spark's types."""
    ks, _, name = table.partition(".")
    schema = session.catalog.table(ks, name)
    result = session.execute(query)
    arrays = []
    for column in schema.select_star_columns:
        values = [getattr(row, column.name) for row in result]
        arrays.append(pa.array([column.type.to_arrow(v) for v in values], column.type.arrow_type()))
    names = [c.name for c in schema.select_star_columns]
    return pa.Table.from_arrays(arrays, names=names).cast(target)


def _sorted(table: pa.Table, key: tuple[str, ...]) -> list[dict[str, Any]]:
    return table.sort_by([(k, "ascending") for k in key]).to_pylist()


def test_batch_log_read_equals_select(spark: Any, session: Any) -> None:
    df = _df(spark, session, LOG)
    target = spark_arrow_schema(df.schema)
    assert df.columns == [c.name for c in session.catalog.table("ks", LOG[3:]).select_star_columns]
    got = df.toArrow().cast(target)
    expected = _expected(session, LOG, f"SELECT * FROM {LOG}", target)
    assert got.num_rows == expected.num_rows > 200
    assert _sorted(got, KEY) == _sorted(expected, KEY)
    # the documented mapping: text forms where Arrow has no exact type
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types["tu"] == "string" and types["vi"] == "string" and types["d"] == "string"
    assert types["ts"] == "timestamp" and types["dt"] == "date" and types["b"] == "binary"
    assert types["m"] == "map<int,string>" and types["tp"] == "struct<0:int,1:string>"


@pytest.mark.parametrize(
    "where",
    [
        "`cdc$stream_id` IN ({streams})",
        "`cdc$stream_id` = {stream} AND `cdc$operation` = 2",
        "`cdc$operation` IN (1, 2) AND n >= 50000000 AND n < 120000000",
        "v LIKE 'v1%' OR v IS NULL",
        "NOT n IN (0, 1000003) AND NOT pk = 5",
        "f > 10.5 AND vi <> '1000000000000000000000000000007'",
        "u > '8' AND `cdc$deleted_v` IS NULL AND tu IS NOT NULL",
    ],
)
def test_pushed_down_filters_equal_spark_filtering(spark: Any, session: Any, where: str) -> None:
    df = _df(spark, session, LOG)
    everything = df.toArrow()
    streams = sorted(set(everything["cdc$stream_id"].to_pylist()))
    assert len(streams) > 3
    where = where.format(
        streams=", ".join(f"X'{s.hex()}'" for s in streams[:2]), stream=f"X'{streams[2].hex()}'"
    )
    pushed = df.where(where)
    by_spark = spark.createDataFrame(everything).where(where)
    key = [f"`{k}`" for k in KEY]
    got = pushed.orderBy(*key).collect()
    assert got, "the data must hold matching rows"
    assert got == by_spark.orderBy(*key).collect()
    if "stream_id" in where:
        # the stream ids pick their buckets' files: fewer tasks than the whole log
        assert pushed.rdd.getNumPartitions() < df.rdd.getNumPartitions()


def test_base_read_equals_select_with_ttl_and_deletes(spark: Any, session: Any) -> None:
    session.execute("INSERT INTO ks.t (pk, ck, v) VALUES (500, 1, 'short') USING TTL 1")
    session.execute("INSERT INTO ks.t (pk, ck, v) VALUES (500, 2, 'long') USING TTL 3600")
    expires = time.time() + 1
    while time.time() <= expires + 1:  # the TTL'd row's expiry is in the past
        time.sleep(0.2)
    df = _df(spark, session, "ks.t")
    target = spark_arrow_schema(df.schema)
    got = df.toArrow().cast(target)
    expected = _expected(session, "ks.t", "SELECT * FROM ks.t", target)
    key = ("pk", "ck")
    assert _sorted(got, key) == _sorted(expected, key)
    keys = {(r["pk"], r["ck"]) for r in got.to_pylist()}
    assert (500, 2) in keys and (500, 1) not in keys  # expired
    assert (2, 2) not in keys and (6, 6) in keys  # a deleted row
    assert not any(pk == 4 for pk, _ in keys)  # a deleted partition
    assert (1000, None) in keys  # the static row of a partition without rows
    assert {r["st"] for r in got.to_pylist() if r["pk"] == 1} == {5}

    # a partition key filter reads one bucket, and only that partition's fragments
    one = df.where("pk = 3")
    assert one.rdd.getNumPartitions() == 1
    expected_one = _expected(session, "ks.t", "SELECT * FROM ks.t WHERE pk = 3", target)
    assert _sorted(one.toArrow().cast(target), key) == _sorted(expected_one, key)
    assert (1000, "x") in one.toArrow()["m"].to_pylist()[0]


def test_time_duration_and_timestamp_columns(spark: Any, session: Any) -> None:
    df = _df(spark, session, "ks.plain")
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types == {
        "pk": "int",
        "du": "struct<months:int,days:int,nanoseconds:bigint>",
        "tm": "bigint",  # nanoseconds since midnight: Spark's times stop at microseconds
        "ts": "timestamp",
    }
    target = spark_arrow_schema(df.schema)
    got = _sorted(df.toArrow().cast(target), ("pk",))
    expected = _expected(session, "ks.plain", "SELECT * FROM ks.plain", target)
    assert got == _sorted(expected, ("pk",))
    assert got[0]["tm"] == 29_574_123_456_789 and got[1]["tm"] == 1
    assert got[0]["du"] == {"months": 1, "days": 2, "nanoseconds": 3 * 3600 * 10**9}


def test_snapshot_reads_an_earlier_batch(spark: Any, session: Any) -> None:
    session.flush()
    before = Manifest.load(session.data_dir).batch_id
    log_rows = _df(spark, session, LOG).count()
    base_rows = _df(spark, session, "ks.t").where("pk = 7").collect()
    session.execute("DELETE FROM ks.t WHERE pk = 7")
    session.execute("INSERT INTO ks.t (pk, ck, v) VALUES (600, 1, 'later')")
    session.flush()
    assert Manifest.load(session.data_dir).batch_id > before
    assert _df(spark, session, LOG).count() > log_rows
    assert _df(spark, session, LOG, snapshot=before).count() == log_rows
    assert base_rows and _df(spark, session, "ks.t").where("pk = 7").count() == 0
    assert _df(spark, session, "ks.t", snapshot=before).where("pk = 7").collect() == base_rows
    with pytest.raises(Exception, match="not a committed batch"):
        _df(spark, session, LOG, snapshot=before + 1000).count()


def test_expired_log_rows_are_not_read(session: Any) -> None:
    scan = open_scan(session.data_dir, LOG)
    target = spark_arrow_schema(spark_schema(scan))
    files = log_files(scan, None)

    def count(at: Any) -> int:
        condition = expiry_condition(at.now_s)
        return sum(b.num_rows for f in files for b in read_log_file(at, f, condition, target))

    assert count(scan) > 0
    # the log's rows live one day (cdc ttl 86400): two days on, none is left
    assert count(dataclasses.replace(scan, now_s=scan.now_s + 2 * 86400)) == 0


def test_stream_reads_every_log_row_exactly_once_across_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    s = cqlcdc.connect(data_dir=tmp_path / "streamed", master="local[2]")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    try:
        s.execute(KS)
        s.execute(
            "CREATE TABLE ks.e (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
            "WITH cdc = {'enabled': true}"
        )
        for i in range(12):  # batches of their own: small files to compact
            s.execute(f"INSERT INTO ks.e (pk, ck, v) VALUES ({i % 3}, {i}, {i})")

        def run() -> None:
            stream = (
                spark.readStream.format("cqlcdc")
                .option("path", str(s.data_dir))
                .option("table", "ks.e_scylla_cdc_log")
                .load()
            )
            query = (
                stream.writeStream.format("parquet")
                .option("path", str(out))
                .option("checkpointLocation", str(checkpoint))
                .start()
            )
            try:
                query.processAllAvailable()
                assert query.exception() is None
            finally:
                query.stop()

        run()
        first = spark.read.parquet(str(out)).count()
        assert first == 12
        s.execute_many([f"UPDATE ks.e SET v = {i} WHERE pk = {i} AND ck = 100" for i in range(30)])
        for i in range(12):
            s.execute(f"DELETE FROM ks.e WHERE pk = {i % 3} AND ck = {i}")
        s.flush()
        compactor = s.engine.maintenance.compactor
        assert compactor is not None and compactor.compactions > 0  # files were rewritten
        run()
        got = spark.read.parquet(str(out)).select(*[f"`{k}`" for k in KEY]).collect()
        log = s.execute("SELECT * FROM ks.e_scylla_cdc_log")
        expected = sorted((r[KEY[0]], str(r[KEY[1]]), r[KEY[2]]) for r in log)
        assert len(got) == len(expected) == 12 + 30 + 12
        assert sorted((bytes(a), b, c) for a, b, c in got) == expected
    finally:
        s.close()
