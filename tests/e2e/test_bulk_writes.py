"""The bulk path through the engine: the same tables and logs as the row path.

``execute_many`` of prepared writes and ``execute_arrow`` go as bulk chunks; the same writes as
CQL text go one by one. Both land in tables of the same shape (delta-only: the column-wise log;
with images: the chunk expanded in the pipeline) and must read back alike.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa
import pytest

from cqlcdc.cql import parse_statement
from cqlcdc.errors import InvalidRequest
from cqlcdc.feed_reader import FeedReader
from cqlcdc.writes import literal_bulk

pytestmark = pytest.mark.spark

SHAPE = "(pk int, ck int, v int, w text, PRIMARY KEY (pk, ck))"
CDC = {
    "delta": "WITH cdc = {'enabled': true}",
    "images": "WITH cdc = {'enabled': true, 'preimage': 'full', 'postimage': true}",
}
LOG_COLUMNS = (
    '"cdc$batch_seq_no", "cdc$operation", "cdc$ttl", "cdc$end_of_batch", pk, ck, v, w, '
    '"cdc$deleted_v", "cdc$deleted_w"'
)


def _literal(v: Any) -> str:
    if v is None:
        return "null"
    return f"'{v}'" if isinstance(v, str) else str(v)


def _workload(n: int, seed: int) -> list[tuple[str, tuple[Any, ...]]]:
    """(kind, values) per write: updates, TTL'd inserts (some with nulls) and row deletes."""
    rng = random.Random(seed)
    out: list[tuple[str, tuple[Any, ...]]] = []
    for i in range(n):
        pk, ck = rng.randrange(12), rng.randrange(4)
        kind = rng.choice(["update", "update", "insert", "delete"])
        v = None if rng.random() < 0.2 else i
        w = None if rng.random() < 0.2 else f"w{i}"
        if kind == "delete":
            out.append((kind, (pk, ck)))
        elif kind == "insert":
            out.append((kind, (pk, ck, v, w)))
        else:
            out.append((kind, (v, w, pk, ck)))
    return out


PREPARED = {
    "update": "UPDATE ks.{t} SET v = ?, w = ? WHERE pk = ? AND ck = ?",
    "insert": "INSERT INTO ks.{t} (pk, ck, v, w) VALUES (?, ?, ?, ?) USING TTL 3600",
    "delete": "DELETE FROM ks.{t} WHERE pk = ? AND ck = ?",
}


def _text(statement: str, table: str, values: tuple[Any, ...]) -> str:
    """A prepared statement's text with its values in place: the row path's write."""
    text = statement.format(t=table)
    for v in values:
        text = text.replace("?", _literal(v), 1)
    return text


def _read(session: Any, table: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    rows = sorted(tuple(r) for r in session.execute(f"SELECT pk, ck, v, w FROM ks.{table}"))
    log = session.execute(f"SELECT {LOG_COLUMNS} FROM ks.{table}_scylla_cdc_log")
    # per partition the log is in write order; partitions sort by stream
    return rows, [tuple(r) for r in log]


FEED = (
    "ALTER TABLE ks.{t} ADD CHANGEFEED u WITH (MODE = 'NEW_AND_OLD_IMAGES', FORMAT = 'JSON', "
    "VIRTUAL_TIMESTAMPS = FALSE, TOPIC_MIN_ACTIVE_PARTITIONS = 2)"
)


@pytest.mark.parametrize("ttl", [True, False], ids=["ttl", "no-ttl"])
@pytest.mark.parametrize("cdc", sorted(CDC))
def test_bulk_and_row_paths_give_the_same_tables_and_logs(
    session: Any, cdc: str, ttl: bool
) -> None:
    """With TTLs, image buckets go the row path's way; without, they are made column-wise
    (``cdc/bulk_images.py``), on a base table loaded in two rounds (its state then comes
    from bulk fragments), and the changefeed's records match too."""
    statements = dict(PREPARED)
    if not ttl:
        statements["insert"] = statements["insert"].replace(" USING TTL 3600", "")
    for table in ("bulk", "rows", "literal"):
        session.execute(f"CREATE TABLE ks.{table} {SHAPE} {CDC[cdc]}")
        session.execute(FEED.format(t=table))
    prepared = {kind: session.prepare(text.format(t="bulk")) for kind, text in statements.items()}
    for seed in (7, 8):
        work = _workload(300, seed=seed)
        results = session.execute_many([prepared[k] for k, _ in work], [v for _, v in work])
        assert all(not isinstance(r, Exception) for r in results)
        for kind, values in work:
            session.execute(_text(statements[kind], "rows", values), wait=False)
        # the same writes as CQL text in one execute_many (a script): the literal bulk path
        texts = [_text(statements[kind], "literal", values) for kind, values in work]
        parsed = [parse_statement(t) for t in texts]
        assert literal_bulk(session.coordinator, parsed, None) is not None
        results = session.execute_many(texts, wait=False)
        assert all(not isinstance(r, Exception) for r in results)
        session.flush()
    bulk, rows, literal = (_read(session, t) for t in ("bulk", "rows", "literal"))
    assert bulk[0] == rows[0] == literal[0]
    assert sorted(bulk[1], key=repr) == sorted(rows[1], key=repr) == sorted(literal[1], key=repr)
    assert len(bulk[1]) >= 600
    # the feeds: per key the same records in the same order (keys interleave differently:
    # the two tables' writes got their seqs in different orders)
    for p in range(2):
        per_key: list[dict[str, list[Any]]] = []
        for table in ("bulk", "rows", "literal"):
            records: dict[str, list[Any]] = {}
            for m in FeedReader(session.data_dir, f"ks.{table}/u").read(p, 0):
                records.setdefault(repr(m.key), []).append(m.value)
            per_key.append(records)
        assert per_key[0] == per_key[1] == per_key[2] and per_key[0]


def test_a_bad_value_sends_the_group_the_row_path_way(session: Any) -> None:
    session.execute(f"CREATE TABLE ks.t {SHAPE} {CDC['delta']}")
    update = session.prepare("UPDATE ks.t SET v = ?, w = ? WHERE pk = ? AND ck = ?")
    params: list[tuple[Any, ...]] = [(i, f"w{i}", i, 0) for i in range(40)]
    params[5] = ("five", "w5", 5, 0)
    params[9] = (9, "w9", None, 0)
    results = session.execute_many([update] * 40, params)
    assert isinstance(results[5], InvalidRequest) and isinstance(results[9], InvalidRequest)
    assert sum(not isinstance(r, Exception) for r in results) == 38
    assert len(session.execute("SELECT * FROM ks.t").all()) == 38
    assert len(session.execute("SELECT * FROM ks.t_scylla_cdc_log").all()) == 38


def test_execute_arrow_binds_columns(session: Any) -> None:
    session.execute(f"CREATE TABLE ks.t {SHAPE} {CDC['delta']}")
    insert = session.prepare("INSERT INTO ks.t (pk, ck, v, w) VALUES (?, ?, ?, ?)")
    values = pa.table(
        {
            "pk": pa.array([1, 1, 2], pa.int64()),  # cast exactly to int
            "ck": [1, 2, 1],
            "v": [10, None, 30],
            "w": ["a", "b", None],
        }
    )
    assert all(not isinstance(r, Exception) for r in session.execute_arrow(insert, values))
    assert sorted(tuple(r) for r in session.execute("SELECT pk, ck, v, w FROM ks.t")) == [
        (1, 1, 10, "a"),
        (1, 2, None, "b"),
        (2, 1, 30, None),
    ]
    ops = [
        (r[0], r[1])
        for r in session.execute('SELECT "cdc$operation", "cdc$deleted_v" FROM ks.t_scylla_cdc_log')
    ]
    assert sorted(ops, key=repr) == sorted([(2, None), (2, True), (2, None)], key=repr)
    too_big = pa.table({"pk": [2**40], "ck": [1], "v": [1], "w": ["x"]})
    (result,) = session.execute_arrow(insert, too_big)
    assert isinstance(result, InvalidRequest)


def test_execute_arrow_takes_timestamps_of_any_unit(session: Any) -> None:
    session.execute("CREATE TABLE ks.t (pk int, ts timestamp, PRIMARY KEY (pk))")
    insert = session.prepare("INSERT INTO ks.t (pk, ts) VALUES (?, ?)")
    exact = pa.table(
        {
            "pk": pa.array([1], pa.int32()),
            "ts": pa.array([1_577_836_800_005_000], pa.timestamp("us")),
        }
    )
    finer = pa.table(  # microseconds a timestamp cannot hold: the row path truncates them
        {
            "pk": pa.array([2], pa.int32()),
            "ts": pa.array([1_577_836_800_123_456], pa.timestamp("us")),
        }
    )
    for values in (exact, finer):
        assert all(not isinstance(r, Exception) for r in session.execute_arrow(insert, values))
    rows = sorted(tuple(r) for r in session.execute("SELECT pk, ts FROM ks.t"))
    assert rows == [(1, 1_577_836_800_005), (2, 1_577_836_800_123)]


def test_execute_arrow_does_not_convert_across_types(session: Any) -> None:
    # Arrow would cast 5 to '5' and '7' to 7; a bound value of the wrong type is an error
    session.execute(f"CREATE TABLE ks.t {SHAPE} {CDC['delta']}")
    insert = session.prepare("INSERT INTO ks.t (pk, ck, v, w) VALUES (?, ?, ?, ?)")
    numbers_as_text = pa.table({"pk": [1], "ck": [1], "v": [1], "w": [5]})
    text_as_number = pa.table({"pk": [1], "ck": [2], "v": ["7"], "w": ["x"]})
    for values in (numbers_as_text, text_as_number):
        (result,) = session.execute_arrow(insert, values)
        assert isinstance(result, InvalidRequest), result
    assert session.execute("SELECT * FROM ks.t").all() == []
