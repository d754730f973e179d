"""Every CQL type and every kind of quoted name, through every write path into every output.

One table holds a column of each type (native, frozen and non-frozen collections, tuples,
nested UDTs, vectors) beside columns whose names differ only in case, hold spaces, ``$``,
non-ASCII letters, or equal the layout's internal columns. Each write path (CQL text,
prepared, BATCH, ``execute_many``, the cassandra-driver's prepared EXECUTE through
``cqlcdc serve``, ``load`` of CSV, Parquet and JSON lines) writes the same row; every output
must give back what was written: the base table, the log's delta, preimage and postimage
rows, the log's Delta files read by DuckDB, the Spark table source, every feed mode and
format, their Kafka publish, and ``replay`` into a copy.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deltalake
import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

import cqlcdc
from cqlcdc.cdc.replay import replay
from cqlcdc.feed_reader import FeedReader
from cqlcdc.loader import load
from cqlcdc.publish import PublishConfig, publish
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.schema.physical import physical_name, python_values
from cqlcdc.server import CqlServer
from tests.e2e.kafka_broker import tansu
from tests.e2e.test_kafka_publish import consume, feed_records

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"

# name, CQL type, literal
COLUMNS: list[tuple[str, str, str]] = [
    ("c_ascii", "ascii", "'abc'"),
    ("c_bigint", "bigint", "-9223372036854775808"),
    ("c_blob", "blob", "0x00ff"),
    ("c_empty_blob", "blob", "0x"),
    ("c_boolean", "boolean", "true"),
    ("c_date", "date", "'-5877641-06-23'"),
    ("c_decimal", "decimal", "-1234567890123456789012345678901234567890.0987654321"),
    ("c_double", "double", "-1.5e300"),
    ("c_duration", "duration", "1y2mo3w4d5h6m7s8ms9us10ns"),
    ("c_float", "float", "3.25"),
    ("c_inet", "inet", "'2001:db8::1'"),
    ("c_int", "int", "-2147483648"),
    ("c_smallint", "smallint", "-32768"),
    ("c_text", "text", "'żółć \U0001f600'"),
    ("c_empty_text", "text", "''"),
    ("c_time", "time", "'23:59:59.999999999'"),
    ("c_timestamp", "timestamp", "-9223372036854775807"),
    ("c_timestamp_max", "timestamp", "9223372036854775807"),
    ("c_timeuuid", "timeuuid", "50554d6e-29bb-11e5-b345-feff819cdc9f"),
    ("c_tinyint", "tinyint", "-128"),
    ("c_uuid", "uuid", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"),
    ("c_varint", "varint", "-123456789012345678901234567890123456789"),
    ("c_vector", "vector<float, 3>", "[1.5, -2, 3]"),
    ("c_list", "list<time>", "['00:00:00.000000001', '12:00:00']"),
    ("c_set", "set<timestamp>", "{-9223372036854775807, 0}"),
    ("c_map", "map<date, frozen<list<time>>>", "{'2024-02-29': ['01:02:03']}"),
    ("c_frozen_set", "frozen<set<varint>>", "{-1, 123456789012345678901234567890}"),
    ("c_tuple", "frozen<tuple<time, timestamp, text>>", "('01:02:03', 5, 'x')"),
    ("c_udt", "inner_udt", "{a: '01:02:03', \"A\": 2, \"_bucket\": 'b'}"),
    ("c_nested", "frozen<outer_udt>", "{i: {a: '00:00:01', \"A\": 1, \"_bucket\": ''}, l: [1]}"),
    ("somecolumn", "int", "1"),
    ('"SomeColumn"', "int", "2"),
    ('"SOMECOLUMN"', "time", "'00:00:00.5'"),
    ('"a b"', "text", "'space'"),
    ('"$"', "int", "3"),
    ('"k$x"', "int", "4"),
    ('"v$x$int"', "int", "5"),
    ('"é"', "text", "'accent'"),
    ('"_bucket"', "int", "6"),
    ('"_ticks"', "int", "7"),
    ('"marker"', "int", "8"),
    ('"token"', "int", "9"),
    ('"fragment"', "int", "10"),
]
NAMES = [n for n, _, _ in COLUMNS]
FEEDS = [
    *(
        (f"j_{mode.lower()}", mode, "JSON")
        for mode in ("KEYS_ONLY", "UPDATES", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES")
    ),
    ("debezium", "NEW_AND_OLD_IMAGES", "DEBEZIUM_JSON"),
    ("dynamodb", "NEW_AND_OLD_IMAGES", "DYNAMODB_STREAMS_JSON"),
]
# the columns whose JSON text is the value itself, by name (a sample of the hard names)
JSON_PLAIN = {"SomeColumn": 2, "somecolumn": 1, "_bucket": 6, "a b": "space", "é": "accent"}
PLAIN = [n.strip('"') for n in NAMES]


@pytest.fixture(scope="module")
def session(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("matrix") / "data", master="local[2]")
    try:
        s.execute(KS)
        s.execute('CREATE TYPE ks.inner_udt (a time, "A" int, "_bucket" text)')
        s.execute("CREATE TYPE ks.outer_udt (i frozen<inner_udt>, l list<int>)")
        columns = ", ".join(f"{n} {t}" for n, t, _ in COLUMNS)
        for table in ("m", "copy"):
            cdc = "{'enabled': true, 'preimage': 'full', 'postimage': true}"
            s.execute(
                f"CREATE TABLE ks.{table} (pk int, ck int, {columns}, PRIMARY KEY (pk, ck)) "
                f"WITH cdc = {cdc}"
            )
        for name, mode, fmt in FEEDS:
            s.execute(
                f"ALTER TABLE ks.m ADD CHANGEFEED {name} WITH (MODE = '{mode}', FORMAT = '{fmt}')"
            )
        yield s
    finally:
        s.close()


def _insert(ck: int) -> str:
    literals = ", ".join(lit for _, _, lit in COLUMNS)
    return f"INSERT INTO ks.m (pk, ck, {', '.join(NAMES)}) VALUES (1, {ck}, {literals})"


def _row(session: Any, table: str, ck: int) -> dict[str, Any]:
    rows = list(session.execute(f"SELECT * FROM ks.{table} WHERE pk = 1 AND ck = {ck}"))
    assert len(rows) == 1
    return {n: getattr(rows[0], n) if n.isidentifier() else rows[0][n] for n in PLAIN}


def _values(row: Any, names: list[str]) -> dict[str, Any]:
    return {n: row[n] for n in names}


@pytest.fixture(scope="module")
def written(session: Any) -> dict[str, Any]:
    """The row as the CQL text write stored it, after every write path wrote it too."""
    s = session
    s.execute(_insert(0))
    first = _row(s, "m", 0)
    marks = ", ".join("?" for _ in NAMES)
    prepared = s.prepare(f"INSERT INTO ks.m (pk, ck, {', '.join(NAMES)}) VALUES (?, ?, {marks})")
    values = [first[n] for n in PLAIN]
    s.execute(prepared, (1, 1, *values))
    s.execute_many([prepared] * 2, [(1, 2, *values), (1, 3, *values)])
    s.execute(f"BEGIN BATCH {_insert(4)}; {_insert(5)} APPLY BATCH")
    s.execute(_insert(0))  # again: a preimage of every column
    return first


def test_exact_values_of_the_types_without_an_arrow_twin(written: dict[str, Any]) -> None:
    assert written["c_time"] == 86_399_999_999_999
    assert written["c_timestamp"] == -9223372036854775807
    assert written["c_timestamp_max"] == 9223372036854775807
    assert written["c_varint"] == -123456789012345678901234567890123456789
    assert written["c_empty_blob"] == b"" and written["c_empty_text"] == ""
    assert written["SomeColumn"] == 2 and written["somecolumn"] == 1
    assert written["SOMECOLUMN"] == 500_000_000
    assert written["_bucket"] == 6 and written["a b"] == "space"


def test_every_write_path_stores_the_same_row(session: Any, written: dict[str, Any]) -> None:
    for ck in range(6):
        assert _row(session, "m", ck) == written, ck


def test_the_log_gives_back_every_cell(session: Any, written: dict[str, Any]) -> None:
    rows = list(session.execute("SELECT * FROM ks.m_scylla_cdc_log"))
    by_op: dict[int, list[Any]] = {}
    for r in rows:
        by_op.setdefault(r["cdc$operation"], []).append(r)
    assert len(by_op[2]) == 7  # one insert per write (one with a preimage: the last)
    assert len(by_op[9]) == 7 and len(by_op[0]) == 1
    atomic = [n for n, t, _ in COLUMNS if not t.startswith(("list", "set", "map", "inner"))]
    atomic_names = [n.strip('"') for n in atomic]
    for r in by_op[2]:
        assert _values(r, atomic_names) == _values(written, atomic_names)
    for r in by_op[9] + by_op[0]:
        logged = _values(r, PLAIN)
        # a non-frozen list is logged as the map of its timeuuids (advanced column types)
        logged["c_list"] = tuple(dict(logged["c_list"]).values())
        assert logged == written


def test_delta_files_hold_every_column_for_duckdb(session: Any, written: dict[str, Any]) -> None:
    log = session.table_location("ks.m_scylla_cdc_log")
    version = session.committed_version("ks.m_scylla_cdc_log")
    table = deltalake.DeltaTable(str(log), version=version).to_pyarrow_table()
    names = table.column_names
    assert len({n.lower() for n in names}) == len(names)
    schema = log_table_schema(session.catalog.table("ks", "m"))
    post = duckdb.sql('SELECT * FROM "table" WHERE "cdc$operation" = 9').to_arrow_table()
    for name in PLAIN:
        column = schema.column(name)
        assert column is not None
        stored = python_values(column.type, post.column(physical_name(name)))
        if name == "c_list":
            stored = [tuple(dict(v).values()) for v in stored]
        assert stored == [written[name]] * post.num_rows, name
    files = [str(Path(log) / p) for p in deltalake.DeltaTable(str(log)).file_uris()]
    seen = duckdb.sql(f"SELECT * FROM read_parquet({files!r})").columns
    assert physical_name("SomeColumn") in seen and "somecolumn" in seen


def test_the_spark_source_reads_every_column(
    spark: Any, session: Any, written: dict[str, Any]
) -> None:
    # Spark's timestamps are microseconds: CQL's extreme milliseconds have no Spark value
    # (docs/semantics.md); a read says so, and a table without them reads whole
    # (and c_date's year -5877641 has no Python date for collect())
    beyond = {"c_timestamp", "c_timestamp_max", "c_set", "c_date"}
    spark.conf.set("spark.sql.caseSensitive", "true")
    df = spark.read.format("cqlcdc").option("path", str(session.data_dir))
    with pytest.raises(Exception, match="has no Spark value"):
        df.option("table", "ks.m").load().collect()
    kept = [(n, t, lit) for n, t, lit in COLUMNS if n not in beyond]
    names = ", ".join(n for n, _, _ in kept)
    session.execute(
        f"CREATE TABLE ks.s (pk int PRIMARY KEY, {', '.join(f'{n} {t}' for n, t, _ in kept)}) "
        "WITH cdc = {'enabled': true, 'postimage': true}"
    )
    literals = ", ".join(lit for _, _, lit in kept)
    session.execute(f"INSERT INTO ks.s (pk, {names}) VALUES (1, {literals})")
    row = df.option("table", "ks.s").load().collect()[0].asDict()
    assert row["SomeColumn"] == 2 and row["somecolumn"] == 1 and row["_bucket"] == 6
    assert row["SOMECOLUMN"] == 500_000_000 and row["a b"] == "space"
    assert row["c_time"] == written["c_time"] and row["c_varint"] == str(written["c_varint"])
    log = df.option("table", "ks.s_scylla_cdc_log").load()
    post = log.where("`cdc$operation` = 9").collect()[0].asDict()
    assert post["SomeColumn"] == 2 and post["c_time"] == written["c_time"]
    assert post["_bucket"] == 6 and post["é"] == "accent"


def test_every_feed_mode_and_format_records_every_write(
    session: Any, written: dict[str, Any]
) -> None:
    session.flush()
    for name, mode, fmt in FEEDS:
        records = [m.value for m in FeedReader(session.data_dir, f"ks.m/{name}").read()]
        assert len(records) == 7, name  # the six rows, then ck 0 again
        last = records[-1]
        if fmt == "JSON":
            assert last["key"] == [1, 0], name
            keys = {
                "KEYS_ONLY": [],
                "UPDATES": ["update"],
                "NEW_IMAGE": ["newImage"],
                "OLD_IMAGE": ["oldImage"],
                "NEW_AND_OLD_IMAGES": ["newImage", "oldImage"],
            }[mode]
            for image in (last[k] for k in keys):
                assert {k: image[k] for k in JSON_PLAIN} == JSON_PLAIN, (name, image)
        elif fmt == "DEBEZIUM_JSON":
            for image in (last["payload"]["before"], last["payload"]["after"]):
                assert {k: image[k] for k in JSON_PLAIN} == JSON_PLAIN, name
        else:
            new = last["dynamodb"]["NewImage"]
            assert new["SomeColumn"] == {"N": "2"} and new["somecolumn"] == {"N": "1"}
            assert new["a b"] == {"S": "space"} and new["_bucket"] == {"N": "6"}


def test_kafka_publish_carries_every_feed_record(
    session: Any, written: dict[str, Any], tmp_path: Path
) -> None:
    session.flush()
    with tansu(tmp_path / "tansu.log") as broker:
        for name, _, _ in FEEDS:
            feed = f"ks.m/{name}"
            expected = feed_records(session.data_dir, feed)
            topic = f"matrix-{name.replace('_', '-')}"
            result = publish(PublishConfig(session.data_dir, feed, broker.bootstrap, topic))
            assert result.records == sum(len(rows) for rows in expected.values())
            assert consume(broker.bootstrap, topic, len(expected)) == expected, name


def test_replay_rebuilds_every_cell(session: Any, written: dict[str, Any]) -> None:
    replay(session, "ks.m_scylla_cdc_log", "ks.copy")
    for ck in range(6):
        assert _row(session, "copy", ck) == written, ck
    assert len(list(session.execute("SELECT ck FROM ks.copy"))) == len(
        list(session.execute("SELECT ck FROM ks.m"))
    )


def _literal_text(cql_type: str, literal: str) -> str:
    """A CSV field: textual types (``loader._TEXTUAL``) as their text, others as literals."""
    textual = cql_type in ("ascii", "text", "inet", "date", "time", "timestamp")
    if textual and literal.startswith("'"):
        return literal[1:-1]
    return literal


@pytest.mark.parametrize("kind", ["csv", "parquet", "jsonl"])
def test_load_stores_every_cell(
    session: Any, written: dict[str, Any], tmp_path: Path, kind: str
) -> None:
    ck = {"csv": 10, "parquet": 11, "jsonl": 12}[kind]
    header = ["pk", "ck", *PLAIN]
    if kind == "csv":
        path = tmp_path / "rows.csv"
        with open(path, "w", newline="") as sink:
            out = csv.writer(sink)
            out.writerow(header)
            out.writerow(["1", str(ck), *(_literal_text(t, lit) for _, t, lit in COLUMNS)])
    elif kind == "jsonl":  # each value as its CSV text, read as a CQL literal of its type
        path = tmp_path / "rows.jsonl"
        texts = [_literal_text(t, lit) for _, t, lit in COLUMNS]
        path.write_text(json.dumps(dict(zip(header, [1, ck, *texts], strict=True))) + "\n")
    else:
        path = tmp_path / "rows.parquet"
        schema = session.catalog.table("ks", "m")
        arrays = [pa.array([1], pa.int32()), pa.array([ck], pa.int32())]
        for name in PLAIN:
            t = schema.column(name).type
            arrays.append(pa.array([t.to_arrow(written[name])], t.arrow_type()))
        pq.write_table(pa.Table.from_arrays(arrays, names=header), path)
    result = load(session, "ks.m", [path])
    assert not result.failed, result.failed
    got = _row(session, "m", ck)
    if kind == "csv":  # an empty CSV field is null (docs: load)
        assert got.pop("c_empty_text") is None
        assert got == {n: v for n, v in written.items() if n != "c_empty_text"}
    else:
        assert got == written


def test_prepared_execute_over_the_wire_stores_every_cell(
    session: Any, written: dict[str, Any]
) -> None:
    """The cassandra-driver binds the values it read back to a prepared INSERT."""
    server = CqlServer(session.coordinator, port=0)
    server.start_in_thread()
    cluster = Cluster([server.host], port=server.port, load_balancing_policy=RoundRobinPolicy())
    try:
        cql = cluster.connect("ks")
        # the driver's own types stop at year 9999 and at int32 days: columns beyond them
        # are compared through cqlcdc's reads only
        beyond = {"c_timestamp", "c_timestamp_max", "c_set", "c_date"}
        names = [n for n in NAMES if n.strip('"') not in beyond]
        select = f"SELECT {', '.join(names)} FROM ks.m WHERE pk = 1 AND ck = %s"
        first = cql.execute(select % 0).one()
        marks = ", ".join("?" for _ in names)
        insert = cql.prepare(
            f"INSERT INTO ks.m (pk, ck, {', '.join(names)}) VALUES (1, ?, {marks})"
        )
        cql.execute(insert, (20, *first))
        assert tuple(cql.execute(select % 20).one()) == tuple(first)
        got = _row(session, "m", 20)
        assert {n: got[n] for n in got if n not in beyond} == {
            n: written[n] for n in written if n not in beyond
        }
    finally:
        cluster.shutdown()
        server.stop_thread()
