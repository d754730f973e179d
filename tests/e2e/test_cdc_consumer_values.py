"""What ScyllaDB's CDC consumer libraries (scylla-cdc-go on gocql) send and read, through the
server and the real cassandra-driver: empty values of fixed-width types (gocql sends
``time.Time{}`` as 0 bytes), ``writetime()``/``ttl()`` of CDC log cells, the bind marker of
``SCYLLA_TIMEUUID_LIST_INDEX(?)`` and the library's ``TableBackedProgressManager``
statements, verbatim."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from cassandra import InvalidRequest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy
from cassandra.query import BoundStatement, PreparedStatement
from cassandra.util import Duration, min_uuid_from_time, uuid_from_time

import cqlcdc
from cqlcdc.server import CqlServer
from tests.e2e.serving import WORKERS, serving, workers_id

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"

# the fixed-width (and varint/decimal) types ScyllaDB lets be empty, and their xAsBlob names
EMPTIABLE = (
    "bigint",
    "boolean",
    "date",
    "decimal",
    "double",
    "float",
    "inet",
    "int",
    "smallint",
    "time",
    "timestamp",
    "timeuuid",
    "tinyint",
    "uuid",
    "varint",
)


@pytest.fixture(scope="module", params=WORKERS, ids=workers_id)
def served(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[CqlServer]:
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("consumer"), master="local[2]")
    with serving(session, protocol_workers=request.param) as srv:
        yield srv


@pytest.fixture(scope="module")
def cql(served: CqlServer) -> Iterator[Any]:
    cluster = Cluster([served.host], port=served.port, load_balancing_policy=RoundRobinPolicy())
    session = cluster.connect()
    session.default_timeout = 120  # the first read waits for the pipeline's first batch
    session.execute(KS)
    session.set_keyspace("ks")
    yield session
    cluster.shutdown()


def bind_empty(prepared: PreparedStatement, values: Sequence[Any], empty: Sequence[int]) -> Any:
    """``prepared`` bound to ``values``, the markers at positions ``empty`` sent as 0 bytes,
    as gocql sends ``time.Time{}`` (the python driver has no value that serializes so)."""
    bound = BoundStatement(prepared).bind([None if i in empty else v for i, v in enumerate(values)])
    for i in empty:
        bound.values[i] = b""
    return bound


# -- 4. empty values -------------------------------------------------------------------


def test_empty_values_of_every_fixed_width_type_are_stored_and_returned(cql: Any) -> None:
    columns = ", ".join(f"v_{t} {t}" for t in EMPTIABLE)
    cql.execute(f"CREATE TABLE empties (p int PRIMARY KEY, {columns}, n int)")
    names = [f"v_{t}" for t in EMPTIABLE]
    insert = cql.prepare(
        f"INSERT INTO empties (p, {', '.join(names)}, n) "
        f"VALUES (?, {', '.join('?' * len(names))}, ?)"
    )
    # every typed column empty, n null: distinct on the wire
    cql.execute(bind_empty(insert, [1, *([0] * len(names)), None], range(1, len(names) + 1)))
    blobs = ", ".join(f"{t}AsBlob(v_{t})" for t in EMPTIABLE)
    row = cql.execute(f"SELECT {blobs}, intAsBlob(n) FROM empties WHERE p = 1").one()
    assert list(row) == [b""] * len(EMPTIABLE) + [None]
    # the python driver reads an empty fixed-width value as None, as from ScyllaDB
    plain = cql.execute(f"SELECT {', '.join(names)} FROM empties WHERE p = 1").one()
    assert list(plain) == [None] * len(EMPTIABLE)
    # the cells exist: they have a write time, the null one has none
    times = cql.execute(
        "SELECT writetime(v_timestamp), writetime(n) FROM empties WHERE p = 1"
    ).one()
    assert times[0] is not None and times[1] is None
    # ScyllaDB's own way to write one (cqlpy test_empty_int): blobAsInt(0x)
    cql.execute("INSERT INTO empties (p, v_int) VALUES (2, blobAsInt(0x))")
    assert cql.execute("SELECT v_int, intAsBlob(v_int) FROM empties WHERE p = 2").one() == (
        None,
        b"",
    )
    # functions and aggregates: an empty value counts as a cell, has no number or time, and
    # is the least value (ScyllaDB's comparator)
    cql.execute("INSERT INTO empties (p, v_int) VALUES (3, 5)")
    agg = cql.execute(
        "SELECT count(v_int), sum(v_int), avg(v_int), intAsBlob(min(v_int)), max(v_int) "
        "FROM empties WHERE p IN (1, 2, 3)"
    ).one()
    assert tuple(agg) == (3, 5, 5, b"", 5)
    assert cql.execute("SELECT toUnixTimestamp(v_timestamp) FROM empties WHERE p = 1").one() == (
        None,
    )


def test_an_empty_clustering_value_is_a_row_of_its_own_and_sorts_first(cql: Any) -> None:
    cql.execute("CREATE TABLE empty_ck (p int, c timestamp, v text, PRIMARY KEY (p, c))")
    insert = cql.prepare("INSERT INTO empty_ck (p, c, v) VALUES (?, ?, ?)")
    early = datetime.datetime(1900, 1, 1)
    cql.execute(insert, (1, datetime.datetime(2024, 5, 1), "later"))
    cql.execute(insert, (1, early, "early"))
    cql.execute(bind_empty(insert, (1, early, "empty"), [1]))
    rows = cql.execute("SELECT timestampAsBlob(c), v FROM empty_ck WHERE p = 1")
    assert [r[1] for r in rows] == ["empty", "early", "later"]  # empty first (ScyllaDB's order)
    select = cql.prepare("SELECT v FROM empty_ck WHERE p = ? AND c = ?")
    assert [r.v for r in cql.execute(bind_empty(select, (1, early), [1]))] == ["empty"]
    assert [r.v for r in cql.execute(select, (1, early))] == ["early"]
    # overwritten and deleted like any row
    cql.execute(bind_empty(insert, (1, early, "empty again"), [1]))
    assert [r.v for r in cql.execute(bind_empty(select, (1, early), [1]))] == ["empty again"]
    delete = cql.prepare("DELETE FROM empty_ck WHERE p = ? AND c = ?")
    cql.execute(bind_empty(delete, (1, early), [1]))
    assert [r.v for r in cql.execute("SELECT v FROM empty_ck WHERE p = 1")] == ["early", "later"]


def test_an_empty_partition_key_is_refused_unless_composite(cql: Any) -> None:
    cql.execute("CREATE TABLE empty_pk (p int PRIMARY KEY, v int)")
    insert = cql.prepare("INSERT INTO empty_pk (p, v) VALUES (?, ?)")
    with pytest.raises(InvalidRequest, match="Key may not be empty"):
        cql.execute(bind_empty(insert, (0, 1), [0]))
    cql.execute("CREATE TABLE empty_pk2 (a int, b int, v int, PRIMARY KEY ((a, b)))")
    insert2 = cql.prepare("INSERT INTO empty_pk2 (a, b, v) VALUES (?, ?, ?)")
    cql.execute(bind_empty(insert2, (0, 0, 7), [0, 1]))
    select = cql.prepare(
        "SELECT intAsBlob(a), intAsBlob(b), v FROM empty_pk2 WHERE a = ? AND b = ?"
    )
    assert cql.execute(bind_empty(select, (0, 0), [0, 1])).one() == (b"", b"", 7)
    assert cql.execute(select, (0, 0)).one() is None  # 0 is not empty


def test_empty_values_cqlcdc_cannot_keep_are_refused_clearly(cql: Any) -> None:
    cql.execute("CREATE TABLE empty_cdc (p int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    insert = cql.prepare("INSERT INTO empty_cdc (p, v) VALUES (?, ?)")
    with pytest.raises(InvalidRequest, match="Empty value for v of type int"):
        cql.execute(bind_empty(insert, (1, 0), [1]))
    cql.execute("CREATE TABLE empty_coll (p int PRIMARY KEY, l list<int>, d duration)")
    append = cql.prepare("UPDATE empty_coll SET l = l + ? WHERE p = 1")
    bound = BoundStatement(append).bind(([0],))
    bound.values[0] = b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00"  # [<an empty int>]
    with pytest.raises(InvalidRequest, match="Empty value of type int inside a collection"):
        cql.execute(bound)
    set_index = cql.prepare("UPDATE empty_coll SET l[0] = ? WHERE p = 1")
    with pytest.raises(InvalidRequest, match="Empty value for l of type list<int>"):
        cql.execute(bind_empty(set_index, (0,), [0]))
    duration = cql.prepare("INSERT INTO empty_coll (p, d) VALUES (1, ?)")
    with pytest.raises(InvalidRequest, match="duration"):  # ScyllaDB: at least 3 bytes
        cql.execute(bind_empty(duration, (Duration(0, 0, 1),), [0]))
    assert list(cql.execute("SELECT * FROM empty_coll")) == []
    # nothing was stored in their place
    assert list(cql.execute("SELECT * FROM empty_cdc")) == []


# -- 5. writetime() and ttl() of CDC log cells -----------------------------------------


def test_log_cells_have_the_writes_time_and_the_log_ttl(cql: Any) -> None:
    cql.execute(
        "CREATE TABLE wt (p int PRIMARY KEY, t frozen<tuple<int, text>>, v int) "
        "WITH cdc = {'enabled': true, 'ttl': 3600}"
    )
    now_us = time.time_ns() // 1000
    cql.execute(f"INSERT INTO wt (p, t, v) VALUES (1, (1, 'a'), 5) USING TIMESTAMP {now_us}")
    cql.execute(f"INSERT INTO wt (p, t) VALUES (2, (null, null)) USING TIMESTAMP {now_us + 1}")
    cql.execute(f"UPDATE wt USING TIMESTAMP {now_us + 2} SET v = 6 WHERE p = 3")
    rows = {
        r.p: r
        for r in cql.execute(
            "SELECT p, writetime(t) AS wt_t, ttl(t) AS ttl_t, writetime(v) AS wt_v, "
            'ttl(v) AS ttl_v, writetime("cdc$operation") AS wt_op FROM wt_scylla_cdc_log'
        )
    }
    assert rows[1].wt_t == rows[1].wt_v == rows[1].wt_op == now_us
    assert 3590 <= rows[1].ttl_t <= 3600 and 3590 <= rows[1].ttl_v <= 3600
    # a tuple of nulls is a tuple (it has a write time); a column not written is null
    assert rows[2].wt_t == now_us + 1 and rows[2].wt_v is None
    assert rows[3].wt_t is None and rows[3].wt_v == now_us + 2
    # base tables as before
    assert cql.execute("SELECT writetime(v) FROM wt WHERE p = 1").one()[0] == now_us


def test_a_log_without_ttl_has_cells_without_ttl(cql: Any) -> None:
    cql.execute(
        "CREATE TABLE wt0 (p int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'ttl': 0}"
    )
    cql.execute("INSERT INTO wt0 (p, v) VALUES (1, 2) USING TIMESTAMP 1234567")
    row = cql.execute("SELECT writetime(v), ttl(v) FROM wt0_scylla_cdc_log").one()
    assert tuple(row) == (1234567, None)


# -- 6. SCYLLA_TIMEUUID_LIST_INDEX(?) -----------------------------------------------------


def test_the_timeuuid_list_index_marker_is_typed_as_scylladb_types_it(cql: Any) -> None:
    cql.execute("CREATE TABLE li (p int PRIMARY KEY, l list<text>)")
    # the replicator's statements (examples/replicator/main.go), verbatim but for names
    append = cql.prepare(
        "UPDATE li USING TTL ? SET l[SCYLLA_TIMEUUID_LIST_INDEX(?)] = ? WHERE p = ?"
    )
    names = [(c.name, c.type.typename) for c in append.column_metadata]
    # cql3/lists.cc uuid_index_spec_of: "uuid_idx(l)" of uuid_type
    assert names == [
        ("[ttl]", "int"),
        ("uuid_idx(l)", "uuid"),
        ("value(l)", "varchar"),
        ("p", "int"),
    ]
    remove = cql.prepare("UPDATE li SET l[SCYLLA_TIMEUUID_LIST_INDEX(?)] = null WHERE p = ?")
    base = time.time()
    first, second, third = (uuid_from_time(base + i) for i in range(3))
    cql.execute(append, (0, second, "b", 1))
    cql.execute(append, (0, first, "a", 1))  # keyed by its timeuuid: it goes first
    cql.execute(append, (0, third, "c", 1))
    assert cql.execute("SELECT l FROM li WHERE p = 1").one().l == ["a", "b", "c"]
    cql.execute(remove, (second, 1))
    assert cql.execute("SELECT l FROM li WHERE p = 1").one().l == ["a", "c"]
    cql.execute(append, (0, first, "A", 1))  # the same key: that element is replaced
    assert cql.execute("SELECT l FROM li WHERE p = 1").one().l == ["A", "c"]
    with pytest.raises(InvalidRequest, match="Unsupported UUID version"):
        cql.execute(append, (0, uuid.uuid4(), "x", 1))


# -- 7. scylla-cdc-go's TableBackedProgressManager ---------------------------------------

# progress.go, verbatim but for the table's name
PROGRESS_CREATE = (
    "CREATE TABLE IF NOT EXISTS progress "
    "(generation timestamp, application_name text, table_name text, stream_id blob, "
    "last_timestamp timeuuid, current_generation timestamp, "
    "PRIMARY KEY ((generation, application_name, table_name, stream_id)))"
)
WHERE = "WHERE generation = ? AND application_name = ? AND table_name = ? AND stream_id = ?"
GET_CURRENT_GENERATION = f"SELECT current_generation FROM progress {WHERE}"
START_GENERATION = (
    "INSERT INTO progress (generation, application_name, table_name, stream_id, "
    "current_generation) VALUES (?, ?, ?, ?, ?)"
)
GET_PROGRESS = f"SELECT last_timestamp FROM progress {WHERE}"
SAVE_PROGRESS = (
    "INSERT INTO progress (generation, application_name, table_name, stream_id, "
    "last_timestamp) VALUES (?, ?, ?, ?, ?) USING TTL ?"
)
SAVE_START_TIME = (
    "INSERT INTO progress (generation, application_name, table_name, stream_id, "
    "last_timestamp) VALUES (?, ?, ?, ?, ?)"
)
ZERO_TIME = datetime.datetime(1970, 1, 1)  # any value: position 0 goes as 0 bytes (time.Time{})


class ProgressManager:
    """progress.go's ``TableBackedProgressManager``: its statements with gocql's value shapes
    (``time.Time{}`` as 0 bytes, ``""``, ``[]byte{}``)."""

    def __init__(self, cql: Any, app: str) -> None:
        self.cql = cql
        self.app = app
        cql.execute(PROGRESS_CREATE)
        self.get_current = cql.prepare(GET_CURRENT_GENERATION)
        self.start = cql.prepare(START_GENERATION)
        self.get = cql.prepare(GET_PROGRESS)
        self.save = cql.prepare(SAVE_PROGRESS)
        self.save_start = cql.prepare(SAVE_START_TIME)

    def _special(self) -> tuple[Any, ...]:
        return (ZERO_TIME, self.app, "", b"")

    def current_generation(self) -> datetime.datetime | None:
        row = self.cql.execute(bind_empty(self.get_current, self._special(), [0])).one()
        return None if row is None else row[0]

    def start_generation(self, gen: datetime.datetime) -> None:
        self.cql.execute(bind_empty(self.start, (*self._special(), gen), [0]))

    def progress(self, gen: datetime.datetime, table: str, stream: bytes) -> uuid.UUID | None:
        row = self.cql.execute(self.get, (gen, self.app, table, stream)).one()
        return None if row is None else row[0]

    def save_progress(
        self, gen: datetime.datetime, table: str, stream: bytes, last: uuid.UUID
    ) -> None:
        self.cql.execute(self.save, (gen, self.app, table, stream, last, 7 * 24 * 60 * 60))

    def save_read_start(self, start: uuid.UUID) -> None:
        self.cql.execute(bind_empty(self.save_start, (*self._special(), start), [0]))

    def read_start(self) -> uuid.UUID | None:
        row = self.cql.execute(bind_empty(self.get, self._special(), [0])).one()
        return None if row is None else row[0]


def test_the_table_backed_progress_manager_saves_and_resumes(cql: Any) -> None:
    cql.execute("CREATE TABLE tbl (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    first = ProgressManager(cql, "test")
    # a fresh start: nothing saved (gocql reads ErrNotFound as the zero values)
    assert first.current_generation() is None and first.read_start() is None
    started_at = datetime.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC)
    started = min_uuid_from_time(started_at.timestamp())  # gocql.MinTimeUUID(startTime)
    first.save_read_start(started)
    gen = datetime.datetime(2026, 1, 2, 3, 0, 0)
    first.start_generation(gen)
    stream = bytes(range(16))
    done = uuid_from_time(started_at.timestamp() + 1)
    first.save_progress(gen, "ks.tbl", stream, done)

    # a new reader, as the library's TestConsumerResumesWithTableBackedProgressReporter runs
    # it: the same rows come back, and the special row holds both saved fields
    resumed = ProgressManager(cql, "test")
    assert resumed.current_generation() == gen
    assert resumed.read_start() == started
    assert resumed.progress(gen, "ks.tbl", stream) == done
    assert resumed.progress(gen, "ks.tbl", bytes(16)) is None  # another stream: from the start
    assert ProgressManager(cql, "other").current_generation() is None  # per application
    # the TTL'd progress row and the special row without TTL
    ttl = cql.prepare(f"SELECT ttl(last_timestamp) FROM progress {WHERE}")
    assert cql.execute(bind_empty(ttl, (ZERO_TIME, "test", "", b""), [0])).one()[0] is None
    saved_ttl = cql.execute(ttl, (gen, "test", "ks.tbl", stream)).one()[0]
    assert 7 * 24 * 3600 - 60 <= saved_ttl <= 7 * 24 * 3600
    # a later generation replaces the current one
    later = gen + datetime.timedelta(hours=1)
    resumed.start_generation(later)
    assert ProgressManager(cql, "test").current_generation() == later
