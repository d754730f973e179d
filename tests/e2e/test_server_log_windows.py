"""The window reads ScyllaDB's CDC libraries send, through the server and the real
cassandra-driver: ``"cdc$stream_id" = ?`` or ``IN ?`` (tens of streams) with a
``cdc$time`` range (``>``/``>=``/``<``/``<=``, timeuuids or ``minTimeuuid``/``maxTimeuuid``),
a LIMIT, and paging. Each answer must be the row path's (``evaluate`` over the same rows,
encoded value by value) and the in-process Session's: rows, order, pages, column types.
Pages after the first come from the cursor, never from another read."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

import cqlcdc
from cqlcdc import reads
from cqlcdc.server import CqlServer
from cqlcdc.session import Session
from tests.e2e.serving import serving

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
ROWS = 40_000  # 4 streams, each batch's file of a stream holds two row groups of 4,096
BUCKETS = 4
WINDOW = 'SELECT * FROM lw_scylla_cdc_log WHERE "cdc$stream_id" {streams} AND {time}'


@pytest.fixture(scope="module")
def served(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[CqlServer]:
    session = cqlcdc.connect(
        data_dir=tmp_path_factory.mktemp("windows"), master="local[2]", num_buckets=BUCKETS
    )
    session.execute(KS)
    session.execute(
        "CREATE TABLE ks.lw (pk int, ck int, v double, name text, b blob, flag boolean, "
        "id uuid, s set<int>, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}"
    )
    insert = session.prepare(
        "INSERT INTO ks.lw (pk, ck, v, name, b, flag, id) VALUES (?, ?, ?, ?, ?, ?, ?)"
    )
    ids = np.arange(ROWS, dtype=np.int32)
    for part in np.array_split(ids, 2):  # two batches: two files per stream
        session.execute_arrow(
            insert,
            pa.table(
                {
                    "pk": pa.array(part // 10),
                    "ck": pa.array(part),
                    "v": pa.array(part.astype(np.float64) / 7),
                    "name": pa.array([None if i % 5 == 0 else f"n{i}" for i in part.tolist()]),
                    "b": pa.array([bytes([i % 256]) * (i % 3) for i in part.tolist()]),
                    "flag": pa.array([i % 2 == 0 for i in part.tolist()]),
                    "id": pa.array([str(uuid.UUID(int=i)) for i in part.tolist()]),
                }
            ),
            wait=False,
        )
    # row writes: collections (a set's deleted elements) and deletes in the log too
    session.execute("UPDATE ks.lw SET s = s + {1, 2} WHERE pk = 1 AND ck = 10")
    session.execute("UPDATE ks.lw SET s = s - {2} WHERE pk = 1 AND ck = 10")
    session.execute("DELETE FROM ks.lw WHERE pk = 2 AND ck = 20")
    session.flush()
    with serving(session) as srv:
        yield srv


@pytest.fixture(scope="module")
def cql(served: CqlServer) -> Iterator[Any]:
    cluster = Cluster([served.host], port=served.port, load_balancing_policy=RoundRobinPolicy())
    session = cluster.connect("ks")
    yield session
    cluster.shutdown()


@pytest.fixture(scope="module")
def log_times(served: CqlServer) -> dict[bytes, list[uuid.UUID]]:
    """Each stream's cdc$time values, in order."""
    local = Session(served.coordinator, "ks")
    out: dict[bytes, list[uuid.UUID]] = {}
    for row in local.execute('SELECT "cdc$stream_id", "cdc$time" FROM lw_scylla_cdc_log'):
        out.setdefault(row[0], []).append(row[1])
    return out


def _row_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Answer log reads by ``evaluate`` over Python rows (the path before the columns)."""
    monkeypatch.setattr(reads, "_log_result", lambda *args, **kwargs: None)


def _plain(value: Any) -> Any:
    if isinstance(value, set | frozenset) or type(value).__name__ == "SortedSet":
        return sorted(value)
    return value


def _pages(cql: Any, query: Any, params: Any, fetch_size: int | None) -> list[list[tuple]]:
    """The result page by page, as the driver gets it."""
    prepared = cql.prepare(query)
    prepared.fetch_size = fetch_size
    result = cql.execute(prepared, params)
    pages = [[tuple(_plain(v) for v in r) for r in result.current_rows]]
    while result.has_more_pages:
        result.fetch_next_page()
        pages.append([tuple(_plain(v) for v in r) for r in result.current_rows])
    return pages


def _cases(times: dict[bytes, list[uuid.UUID]]) -> list[tuple[str, str, tuple[Any, ...]]]:
    """Windows as the libraries write them: one stream or many, every bound form."""
    streams = sorted(times)
    one = max(streams, key=lambda s: len(times[s]))
    ordered = times[one]
    low, high = ordered[len(ordered) // 3], ordered[len(ordered) // 3 + 1000]
    ms = [t.time // 10_000 - 12_219_292_800_000 for t in (low, high)]
    stamps = tuple(
        datetime.datetime.fromtimestamp(m / 1000, datetime.UTC).replace(tzinfo=None) for m in ms
    )
    many = [*streams, *[uuid.uuid4().bytes for _ in range(48)]]  # tens: most without rows
    return [
        ("= ?", '"cdc$time" >= ? AND "cdc$time" <= ?', (one, low, high)),
        ("= ?", '"cdc$time" > ? AND "cdc$time" < ?', (one, low, high)),
        ("= ?", '"cdc$time" > ? AND "cdc$time" <= ?', (one, low, high)),  # scylla-cdc-java
        ("IN ?", '"cdc$time" > ? AND "cdc$time" <= ?', (many, low, high)),
        ("IN ?", '"cdc$time" > minTimeuuid(?) AND "cdc$time" < maxTimeuuid(?)', (many, *stamps)),
        ("IN ?", '"cdc$time" >= minTimeuuid(?) AND "cdc$time" <= maxTimeuuid(?)', (many, *stamps)),
        ("IN (?, ?, ?)", '"cdc$time" > ? AND "cdc$time" < ?', (*streams[:3], low, high)),
        ("IN ?", '"cdc$time" > ?', (streams[:2], high)),
        ("IN ?", '"cdc$time" < ?', (streams[-2:], low)),
    ]


@pytest.mark.parametrize("fetch_size", [None, 5000, 97])
def test_windows_are_the_row_paths_page_for_page(
    cql: Any,
    log_times: dict[bytes, list[uuid.UUID]],
    monkeypatch: pytest.MonkeyPatch,
    fetch_size: int | None,
) -> None:
    cases = _cases(log_times)
    fast = [_pages(cql, WINDOW.format(streams=s, time=t), p, fetch_size) for s, t, p in cases]
    _row_path(monkeypatch)
    slow = [_pages(cql, WINDOW.format(streams=s, time=t), p, fetch_size) for s, t, p in cases]
    for (streams, time, _), got, expected in zip(cases, fast, slow, strict=True):
        assert got == expected, (streams, time)
    assert sum(len(r) for r in fast[0]) == 1001  # both bounds inclusive
    assert sum(len(r) for r in fast[1]) == 999  # both exclusive
    if fetch_size == 97:
        assert [len(p) for p in fast[0]] == [97] * 10 + [31]


def test_windows_equal_the_in_process_read(
    cql: Any, served: CqlServer, log_times: dict[bytes, list[uuid.UUID]]
) -> None:
    local = Session(served.coordinator, "ks")
    for streams, time, params in _cases(log_times):
        query = WINDOW.format(streams=streams, time=time)
        got = [tuple(_plain(v) for v in r) for r in cql.execute(cql.prepare(query), params)]
        rows = local.execute(query, params)
        assert rows.table is not None  # answered from the columns
        expected = [tuple(_plain(v) for v in r) for r in rows]
        assert got == expected, (streams, time)


def test_column_types_are_the_log_tables(cql: Any) -> None:
    query = 'SELECT * FROM lw_scylla_cdc_log WHERE "cdc$stream_id" IN ? AND "cdc$time" > ?'
    result = cql.execute(cql.prepare(query), ([uuid.uuid4().bytes], uuid.UUID(int=1 << 76)))
    names = [t.cql_parameterized_type() for t in result.column_types]
    by_column = dict(zip(result.column_names, names, strict=True))
    assert by_column["cdc$stream_id"] == "blob"
    assert by_column["cdc$time"] == "timeuuid"
    assert by_column["cdc$operation"] == "tinyint"
    assert by_column["v"] == "double"
    assert by_column["cdc$deleted_elements_s"] == "set<int>"


def test_empty_windows(cql: Any, log_times: dict[bytes, list[uuid.UUID]]) -> None:
    streams = sorted(log_times)
    last = max(t for ts in log_times.values() for t in ts)
    query = WINDOW.format(streams="IN ?", time='"cdc$time" > ? AND "cdc$time" < ?')
    for params in [
        (streams, last, last),  # past the last row
        ([uuid.uuid4().bytes], uuid.UUID(int=1 << 76), last),  # a stream without rows
        ([], uuid.UUID(int=1 << 76), last),  # IN ()
    ]:
        prepared = cql.prepare(query)
        prepared.fetch_size = 10
        result = cql.execute(prepared, params)
        assert result.current_rows == [] and not result.has_more_pages


def test_later_pages_do_not_read_again(
    cql: Any, log_times: dict[bytes, list[uuid.UUID]], monkeypatch: pytest.MonkeyPatch
) -> None:
    reads_made: list[int] = []
    original = reads.read_in_range

    def counted(*args: Any, **kwargs: Any) -> pa.Table:
        reads_made.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(reads, "read_in_range", counted)
    streams, time, params = _cases(log_times)[0]
    pages = _pages(cql, WINDOW.format(streams=streams, time=time), params, 50)
    assert len(pages) == 21 and len(reads_made) == 1


def test_limits_constant_and_bound(cql: Any, log_times: dict[bytes, list[uuid.UUID]]) -> None:
    streams, time, params = _cases(log_times)[3]
    query = WINDOW.format(streams=streams, time=time)
    everything = [r for page in _pages(cql, query, params, None) for r in page]
    assert _pages(cql, query + " LIMIT 150", params, 100) == [everything[:100], everything[100:150]]
    bound = _pages(cql, query + " LIMIT ?", (*params, 120), 60)
    assert bound == [everything[:60], everything[60:120]]
    from cassandra import InvalidRequest

    with pytest.raises(InvalidRequest, match="LIMIT must be strictly positive"):
        cql.execute(cql.prepare(query + " LIMIT ?"), (*params, 0))


def test_a_page_stops_at_1_mb(cql: Any, served: CqlServer) -> None:
    """ScyllaDB's pager ends a page at 1 MB whatever the page size; the rest follows."""
    local = Session(served.coordinator, "ks")
    local.execute("CREATE TABLE big (pk int PRIMARY KEY, t text) WITH cdc = {'enabled': true}")
    insert = local.prepare("INSERT INTO big (pk, t) VALUES (?, ?)")
    local.execute_arrow(
        insert, pa.table({"pk": pa.array(range(30), pa.int32()), "t": ["x" * 100_000] * 30})
    )
    query = 'SELECT pk, t FROM big_scylla_cdc_log WHERE "cdc$stream_id" IN ? AND "cdc$time" > ?'
    streams = list(local.execute('SELECT DISTINCT "cdc$stream_id" FROM big_scylla_cdc_log'))
    pages = _pages(cql, query, ([s[0] for s in streams], uuid.UUID(int=1 << 76)), 1000)
    assert len(pages[0]) == 11  # 11 x 100 kB is the first past 1 MB
    assert sorted(r[0] for p in pages for r in p) == list(range(30))
