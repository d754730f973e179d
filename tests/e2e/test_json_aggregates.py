"""JSON, aggregates and GROUP BY through the real engine (issue 13, items 3, 4 and 7):
GROUP BY on a base table, a CDC log table and a system table; INSERT JSON logged exactly as
the equivalent INSERT; SELECT JSON of every type written back by INSERT JSON; USING TIMEOUT
and BYPASS CACHE accepted, bad timeouts refused before anything is written."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import cqlcdc
from cqlcdc.errors import FunctionFailure, InvalidRequest
from cqlcdc.types import Duration

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
LOG = "ks.t_scylla_cdc_log"
EVERY_COLUMNS = (
    "k int PRIMARY KEY, a ascii, b bigint, bl blob, bo boolean, d date, de decimal, dbl double, "
    "du duration, f float, i inet, it int, s smallint, t text, ti time, ts timestamp, "
    "tu timeuuid, tt tinyint, u uuid, vi varint, l list<int>, fl frozen<list<text>>, "
    "se set<timestamp>, fs frozen<set<int>>, m map<text, int>, fm frozen<map<int, boolean>>, "
    "tup tuple<int, text, blob>, ad addr, fad frozen<addr>, vec vector<float, 3>, "
    "mk map<frozen<tuple<int, text>>, int>"
)
EVERY_INSERT = (
    "INSERT INTO ks.every (k, a, b, bl, bo, d, de, dbl, du, f, i, it, s, t, ti, ts, tu, tt, u, "
    "vi, l, fl, se, fs, m, fm, tup, ad, fad, vec, mk) VALUES (1, 'asc', -123123123123, 0x00ff, "
    "true, '1987-03-23', 123123.123123, 123.456, 1y1mo2d10h5m, 1.5, '::1', 7, -32768, "
    "'q\"\\', '07:35:07.000111222', '2014-01-01 12:15:45.123+0000', "
    "6bddc89a-5644-11e4-97fc-56847afe9799, 127, 123e4567-e89b-12d3-a456-426614174000, "
    "123123123123123123123, [3, 1, 2], ['x', 'y'], {'2014-01-01', '2013-01-01'}, {3, 1}, "
    "{'b': 2, 'a': 1}, {2: false, 1: true}, (1, 'two', 0x03), {street: 'Main', \"Zip\": 12345}, "
    "{street: null, \"Zip\": 1}, [1.5, -2, 0.25], {(1, 'a'): 9})"
)
# each column's JSON, byte for byte (types/json_utils.cc to_json_string)
EVERY_JSON = {
    "k": "1",
    "a": '"asc"',
    "ad": '{"street": "Main", "\\"Zip\\"": 12345}',
    "b": "-123123123123",
    "bl": '"0x00ff"',
    "bo": "true",
    "d": '"1987-03-23"',
    "dbl": "123.456",
    "de": "123123.123123",
    "du": '"1y1mo2d10h5m"',
    "f": "1.5",
    "fad": '{"street": null, "\\"Zip\\"": 1}',
    "fl": '["x", "y"]',
    "fm": '{"1": true, "2": false}',
    "fs": "[1, 3]",
    "i": '"::1"',
    "it": "7",
    "l": "[3, 1, 2]",
    "m": '{"a": 1, "b": 2}',
    "mk": '{"[1, \\"a\\"]": 9}',
    "s": "-32768",
    "se": '["2013-01-01 00:00:00.000Z", "2014-01-01 00:00:00.000Z"]',
    "t": '"q\\"\\\\"',
    "ti": '"07:35:07.000111222"',
    "ts": '"2014-01-01 12:15:45.123Z"',
    "tt": "127",
    "tu": '"6bddc89a-5644-11e4-97fc-56847afe9799"',
    "tup": '[1, "two", "0x03"]',
    "u": '"123e4567-e89b-12d3-a456-426614174000"',
    "vec": "[1.5, -2, 0.25]",
    "vi": "123123123123123123123",
}
PAIR = (
    "(k int, c int, s int static, v int, t text, l list<int>, m map<text, int>, ad addr, "
    "PRIMARY KEY (k, c)) WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
)


@pytest.fixture(scope="module")
def session(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("jsonagg") / "d", master="local[2]")
    s.execute(KS)
    s.execute('CREATE TYPE ks.addr (street text, "Zip" int)')
    s.execute(
        "CREATE TABLE ks.t (p int, c int, v int, d double, PRIMARY KEY (p, c)) "
        "WITH cdc = {'enabled': true}"
    )
    insert = s.prepare("INSERT INTO ks.t (p, c, v, d) VALUES (?, ?, ?, ?)")
    rows = [(p, c, p * 10 + c if c != 3 else None, c / 4) for p in range(6) for c in range(4)]
    s.execute_many([insert] * len(rows), rows)
    s.execute("DELETE FROM ks.t WHERE p = 5 AND c = 0")
    s.execute(f"CREATE TABLE ks.every ({EVERY_COLUMNS})")
    s.execute(f"CREATE TABLE ks.every2 ({EVERY_COLUMNS})")
    s.execute(f"CREATE TABLE ks.lj {PAIR}")
    s.execute(f"CREATE TABLE ks.lp {PAIR}")
    yield s
    s.close()


def _rows(result: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in result]


def test_group_by_on_a_base_table(session: Any) -> None:
    everything = _rows(session.execute("SELECT p, c, v FROM ks.t"))
    expected = {}
    for p in sorted({r[0] for r in everything}):
        vs = [r[2] for r in everything if r[0] == p and r[2] is not None]
        expected[p] = (p, len([r for r in everything if r[0] == p]), len(vs), min(vs), sum(vs))
    got = session.execute("SELECT p, count(*), count(v), min(v), sum(v) FROM ks.t GROUP BY p")
    assert got.column_names == ["p", "count", "system.count(v)", "system.min(v)", "system.sum(v)"]
    assert sorted(_rows(got)) == sorted(expected.values())
    # the same groups, in the token order of a full scan, cut by LIMIT
    tokens = [r[0] for r in _rows(session.execute("SELECT p FROM ks.t GROUP BY p"))]
    assert [r[0] for r in session.execute("SELECT p FROM ks.t GROUP BY p LIMIT 2")] == tokens[:2]
    # a partition and clustering prefix, with PER PARTITION LIMIT on the groups
    got = session.execute(
        "SELECT p, c, max(d) FROM ks.t WHERE p IN (1, 2) GROUP BY p, c PER PARTITION LIMIT 2"
    )
    assert sorted(_rows(got)) == [(1, 0, 0.0), (1, 1, 0.25), (2, 0, 0.0), (2, 1, 0.25)]
    # aggregates with filtering, and the empty group of no rows
    got = session.execute("SELECT count(*), avg(v) FROM ks.t WHERE v > 40 ALLOW FILTERING")
    vs = [r[2] for r in everything if r[2] is not None and r[2] > 40]
    assert _rows(got) == [(len(vs), sum(vs) // len(vs))]
    assert _rows(session.execute("SELECT count(*), max(v) FROM ks.t WHERE p = 99")) == [(0, None)]
    assert _rows(session.execute("SELECT p, count(*) FROM ks.t WHERE p = 99 GROUP BY p")) == []


def test_group_by_on_a_log_table(session: Any) -> None:
    log = [r._asdict() for r in session.execute(f"SELECT * FROM {LOG}")]
    per_stream = Counter(r["cdc$stream_id"] for r in log)
    got = session.execute(f'SELECT "cdc$stream_id", count(*) FROM {LOG} GROUP BY "cdc$stream_id"')
    assert dict(_rows(got)) == dict(per_stream)
    ops = Counter(r["cdc$operation"] for r in log if r["p"] == 5)
    got = session.execute(
        f'SELECT count(*), min("cdc$operation"), max("cdc$operation") FROM {LOG} '
        "WHERE p = 5 ALLOW FILTERING"
    )
    assert _rows(got) == [(sum(ops.values()), min(ops), max(ops))]
    stream = next(iter(per_stream))
    got = session.execute(
        f'SELECT "cdc$time", count(*) FROM {LOG} WHERE "cdc$stream_id" = ? '
        'GROUP BY "cdc$stream_id", "cdc$time"',
        (stream,),
    )
    times = Counter(r["cdc$time"] for r in log if r["cdc$stream_id"] == stream)
    assert dict(_rows(got)) == dict(times)
    with pytest.raises(InvalidRequest, match=r"^Group by column cdc\$time is out of order$"):
        session.execute(f'SELECT count(*) FROM {LOG} GROUP BY "cdc$time"')


def test_group_by_on_a_system_table(session: Any) -> None:
    tables = _rows(session.execute("SELECT keyspace_name, table_name FROM system_schema.tables"))
    got = session.execute(
        "SELECT keyspace_name, count(*), min(table_name) FROM system_schema.tables "
        "GROUP BY keyspace_name"
    )
    expected = {}
    for ks in {k for k, _ in tables}:
        names = [t for k, t in tables if k == ks]
        expected[ks] = (ks, len(names), min(names))
    assert sorted(_rows(got)) == sorted(expected.values())


def test_select_json_of_every_type_and_back(session: Any) -> None:
    session.execute(EVERY_INSERT)
    names = session.execute("SELECT * FROM ks.every").column_names
    assert names == ["k", *sorted(n for n in EVERY_JSON if n != "k")]
    expected = "{" + ", ".join(f'"{n}": {EVERY_JSON[n]}' for n in names) + "}"
    got = session.execute("SELECT JSON * FROM ks.every")
    assert got.column_names == ["[json]"]
    assert _rows(got) == [(expected,)]
    # written back by INSERT JSON (a literal, then a bound value) it reads the same
    session.execute("INSERT INTO ks.every2 JSON '" + expected.replace("'", "''") + "'")
    assert _rows(session.execute("SELECT JSON * FROM ks.every2")) == [(expected,)]
    assert _rows(session.execute("SELECT * FROM ks.every2")) == _rows(
        session.execute("SELECT * FROM ks.every")
    )
    session.execute("TRUNCATE ks.every2")
    session.execute(session.prepare("INSERT INTO ks.every2 JSON ?"), (expected,))
    assert _rows(session.execute("SELECT JSON * FROM ks.every2")) == [(expected,)]
    # toJson of each column is its part of the object
    for name in names:
        got = session.execute(f"SELECT toJson({name}) FROM ks.every")
        assert got.column_names == [f"system.tojson({name})"]
        assert _rows(got) == [(EVERY_JSON[name],)]


def test_counters_as_json(session: Any) -> None:
    session.execute("CREATE TABLE ks.n (k int PRIMARY KEY, n counter)")
    session.execute("UPDATE ks.n SET n = n + 5 WHERE k = 1")
    assert _rows(session.execute("SELECT JSON * FROM ks.n")) == [('{"k": 1, "n": 5}',)]
    assert _rows(session.execute("SELECT sum(n), avg(n) FROM ks.n")) == [(5, 5)]
    with pytest.raises(InvalidRequest, match=r"^Cannot set the value of counter column n in JSON$"):
        session.execute("""INSERT INTO ks.n JSON '{"k": 2, "n": 1}'""")


def _log(session: Any, table: str) -> list[tuple[Any, ...]]:
    """A table's log rows in order, without what differs between two tables written one
    after the other: ``cdc$time`` and the timeuuid keys of list cells (their values and
    order are kept)."""
    rows = [r._asdict() for r in session.execute(f"SELECT * FROM ks.{table}_scylla_cdc_log")]
    rows.sort(key=lambda r: (r["cdc$time"].time, r["cdc$batch_seq_no"]))
    return [tuple((k, _no_list_keys(v)) for k, v in r.items() if k != "cdc$time") for r in rows]


def _no_list_keys(value: Any) -> Any:
    if isinstance(value, Mapping) and value and all(isinstance(k, uuid.UUID) for k in value):
        return tuple(value[k] for k in value)
    if isinstance(value, frozenset) and value and all(isinstance(k, uuid.UUID) for k in value):
        return len(value)
    return value


JSON_PAIRS = [
    (
        """INSERT INTO ks.lj JSON '{"k": 1, "c": 1, "v": 1, "t": "a", "l": [1, 2]}'""",
        "INSERT INTO ks.lp (k, c, v, t, l, m, ad) VALUES (1, 1, 1, 'a', [1, 2], null, null)",
    ),
    (
        """INSERT INTO ks.lj JSON '{"k": 1, "c": 1, "m": {"x": 1}, "ad": {"street": "s"}}' """
        "USING TTL 1000 AND TIMEOUT 10s",
        "INSERT INTO ks.lp (k, c, v, t, l, m, ad) VALUES (1, 1, null, null, null, {'x': 1}, "
        "{street: 's'}) USING TTL 1000 AND TIMEOUT 10s",
    ),
    (
        """INSERT INTO ks.lj JSON '{"k": 1, "c": 1, "v": 7, "t": null}' DEFAULT UNSET""",
        "INSERT INTO ks.lp (k, c, v, t) VALUES (1, 1, 7, null)",
    ),
    (
        """INSERT INTO ks.lj JSON '{"k": 2, "c": 3}'""",
        "INSERT INTO ks.lp (k, c, v, t, l, m, ad) VALUES (2, 3, null, null, null, null, null)",
    ),
    (
        "INSERT INTO ks.lj (k, c, v, l) VALUES (3, 1, fromJson('\"4\"'), fromJson('[5]'))",
        "INSERT INTO ks.lp (k, c, v, l) VALUES (3, 1, 4, [5])",
    ),
    (
        "UPDATE ks.lj SET m = fromJson('{\"y\": 2}'), s = fromJson('3') WHERE k = 3 AND c = 1",
        "UPDATE ks.lp SET m = {'y': 2}, s = 3 WHERE k = 3 AND c = 1",
    ),
]


def test_insert_json_logs_like_the_equivalent_insert(session: Any) -> None:
    for json_cql, plain_cql in JSON_PAIRS:
        session.execute(json_cql)
        session.execute(plain_cql)
    json_log = _log(session, "lj")
    assert json_log == _log(session, "lp")
    operations = [dict(r)["cdc$operation"] for r in json_log]
    assert operations.count(2) == 5  # each INSERT (JSON or with fromJson) logs an insert, op 2
    assert _rows(session.execute("SELECT * FROM ks.lj")) == _rows(
        session.execute("SELECT * FROM ks.lp")
    )


def test_refused_json_writes_leave_nothing(session: Any) -> None:
    before = _log(session, "lj")
    with pytest.raises(InvalidRequest, match=r"^JSON values map contains unrecognized column: z$"):
        session.execute("""INSERT INTO ks.lj JSON '{"k": 9, "c": 9, "z": 1}'""")
    with pytest.raises(InvalidRequest, match=r"^INSERT \.\.\. JSON cannot set static column s"):
        session.execute("""INSERT INTO ks.lj JSON '{"k": 9, "c": 9, "s": 1}'""")
    with pytest.raises(FunctionFailure, match=r"^Failed parsing fromJson parameter"):
        session.execute("INSERT INTO ks.lj (k, c, v) VALUES (9, 9, fromJson('x'))")
    with pytest.raises(InvalidRequest, match=r"^Timeout values must be non-negative$"):
        session.execute("INSERT INTO ks.lj (k, c, v) VALUES (9, 9, 1) USING TIMEOUT -5ms")
    with pytest.raises(
        InvalidRequest, match=r"^Timeout values cannot be expressed in days/months$"
    ):
        session.execute(
            "BEGIN BATCH USING TIMEOUT 1d INSERT INTO ks.lj (k, c, v) VALUES (9, 9, 1); APPLY BATCH"
        )
    assert _rows(session.execute("SELECT * FROM ks.lj WHERE k = 9")) == []
    assert _log(session, "lj") == before


def test_timeouts_and_bypass_cache_change_nothing(session: Any) -> None:
    session.execute("UPDATE ks.t USING TIMEOUT 48h AND TTL 1000 SET v = 1 WHERE p = 0 AND c = 0")
    session.execute("DELETE FROM ks.t USING TIMEOUT 1m WHERE p = 0 AND c = 1")
    session.execute(
        "BEGIN BATCH USING TIMEOUT 10s INSERT INTO ks.t (p, c, v) VALUES (0, 9, 9); APPLY BATCH"
    )
    prepared = session.prepare("INSERT INTO ks.t (p, c, v) VALUES (?, ?, ?) USING TIMEOUT ?")
    session.execute(prepared, (0, 8, 8, Duration(0, 0, 5 * 10**9)))
    plain = _rows(session.execute("SELECT * FROM ks.t WHERE p = 0"))
    assert [r[1] for r in plain] == [0, 2, 3, 8, 9]
    assert (
        _rows(session.execute("SELECT * FROM ks.t WHERE p = 0 BYPASS CACHE USING TIMEOUT 5s"))
        == plain
    )
    with pytest.raises(InvalidRequest, match="granularity finer than milliseconds"):
        session.execute("SELECT * FROM ks.t USING TIMEOUT 1s5ns")
