"""The CQL native protocol server, driven by the real cassandra-driver (never our own
client): connect and negotiate, DDL, simple and prepared statements, batches, every CQL type
round-tripped, errors as the driver's own classes, hostile frames, ``cqlcdc serve``."""

from __future__ import annotations

import datetime
import decimal
import ipaddress
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra import AlreadyExists, InvalidRequest
from cassandra.cluster import Cluster, ConsistencyLevel, NoHostAvailable
from cassandra.policies import RoundRobinPolicy
from cassandra.protocol import SyntaxException
from cassandra.query import BatchStatement, SimpleStatement
from cassandra.util import Duration

import cqlcdc
from cqlcdc.server import CqlServer
from cqlcdc.session import Session
from tests.e2e.serving import WORKERS, workers_id

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture(scope="module")
def server(served: CqlServer) -> tuple[str, int]:
    return served.host, served.port


def _cluster(address: tuple[str, int], **kwargs: Any) -> Cluster:
    return Cluster(
        [address[0]], port=address[1], load_balancing_policy=RoundRobinPolicy(), **kwargs
    )


@pytest.fixture(scope="module")
def cql(server: tuple[str, int]) -> Iterator[Any]:
    cluster = _cluster(server)  # what a driver negotiates by default: v5 with LZ4
    session = cluster.connect()
    session.default_timeout = 60  # a loaded machine: a first read waits for the first batch
    session.execute(KS.replace("KEYSPACE ks", "KEYSPACE IF NOT EXISTS ks"))
    session.set_keyspace("ks")
    yield session
    cluster.shutdown()


def test_the_driver_negotiates_v5_with_lz4(server: tuple[str, int]) -> None:
    cluster = _cluster(server)  # starts at DSE_V2 and downgrades, as against Cassandra 4
    try:
        session = cluster.connect()
        assert cluster.protocol_version == 5
        assert cluster.control_connection._connection.compressor is not None  # LZ4 agreed
        row = session.execute("SELECT cluster_name, partitioner FROM system.local").one()
        assert row.partitioner == "org.apache.cassandra.dht.Murmur3Partitioner"
    finally:
        cluster.shutdown()


@pytest.mark.parametrize(("version", "compression"), [(4, True), (4, False), (5, False)])
def test_v4_and_v5_with_and_without_compression(
    server: tuple[str, int], version: int, compression: bool
) -> None:
    cluster = _cluster(server, protocol_version=version, compression=compression)
    try:
        session = cluster.connect()
        table = f"ks.framing_v{version}_{int(compression)}"
        session.execute(KS.replace("KEYSPACE ks", "KEYSPACE IF NOT EXISTS ks"))
        session.execute(f"CREATE TABLE {table} (pk int PRIMARY KEY, v text)")
        insert = session.prepare(f"INSERT INTO {table} (pk, v) VALUES (?, ?)")
        big = "x" * 200_000  # a v5 frame over two segments
        session.execute(insert, (1, big))
        session.execute(insert, (2, "small"))
        rows = sorted(tuple(r) for r in session.execute(f"SELECT pk, v FROM {table}"))
        assert rows == [(1, big), (2, "small")]
        connection = cluster.control_connection._connection
        assert (connection.compressor is not None) is compression
    finally:
        cluster.shutdown()


def test_unset_values_leave_columns_alone(cql: Any) -> None:
    """The driver's UNSET_VALUE: an INSERT or UPDATE does not write that column, an unset
    TTL is no TTL, an unset key is an error (Cassandra's behaviour)."""
    from cassandra.query import UNSET_VALUE

    cql.execute("CREATE TABLE unset_t (pk int, ck int, a int, b text, PRIMARY KEY (pk, ck))")
    cql.execute("INSERT INTO unset_t (pk, ck, a, b) VALUES (1, 1, 10, 'ten')")
    insert = cql.prepare("INSERT INTO unset_t (pk, ck, a, b) VALUES (?, ?, ?, ?) USING TTL ?")
    cql.execute(insert, (1, 1, 11, UNSET_VALUE, UNSET_VALUE))
    update = cql.prepare("UPDATE unset_t SET a = ?, b = ? WHERE pk = ? AND ck = ?")
    cql.execute(update, (UNSET_VALUE, "new", 1, 1))
    cql.execute(update, (UNSET_VALUE, UNSET_VALUE, 1, 1))  # nothing to write
    assert [tuple(r) for r in cql.execute("SELECT a, b, ttl(a) FROM unset_t")] == [
        (11, "new", None)
    ]
    with pytest.raises(InvalidRequest, match="Invalid unset value for column ck"):
        cql.execute(insert, (1, UNSET_VALUE, 1, "x", 5))
    batch = BatchStatement()
    batch.add(insert, (2, 1, UNSET_VALUE, "two", UNSET_VALUE))
    batch.add(update, (20, UNSET_VALUE, 2, 1))
    cql.execute(batch)
    row = cql.execute("SELECT a, b FROM unset_t WHERE pk = 2").one()
    assert tuple(row) == (20, "two")


def test_unset_list_elements_leave_the_list_alone(cql: Any) -> None:
    """collections_test's testListWithUnsetValues: ``l[1] = ?``, ``DELETE l[?]`` and
    ``l = l - ?`` bound to unset change nothing (the DELETE is not a row delete); an unset
    index to write at is refused."""
    from cassandra.query import UNSET_VALUE

    cql.execute("CREATE TABLE IF NOT EXISTS unset_l (k int PRIMARY KEY, l list<text>)")
    cql.execute("INSERT INTO unset_l (k, l) VALUES (10, ['foo', 'foo'])")
    cql.execute(cql.prepare("UPDATE unset_l SET l[1] = ? WHERE k = 10"), (UNSET_VALUE,))
    cql.execute(cql.prepare("DELETE l[?] FROM unset_l WHERE k = 10"), (UNSET_VALUE,))
    cql.execute(cql.prepare("UPDATE unset_l SET l = l - ? WHERE k = 10"), (UNSET_VALUE,))
    assert cql.execute("SELECT l FROM unset_l WHERE k = 10").one().l == ["foo", "foo"]
    with pytest.raises(InvalidRequest, match="unset value"):
        cql.execute(cql.prepare("UPDATE unset_l SET l[?] = 'foo' WHERE k = 10"), (UNSET_VALUE,))
    # a map key must be set, to write or to delete (testMapWithUnsetValues)
    cql.execute("CREATE TABLE IF NOT EXISTS unset_m (k int PRIMARY KEY, m map<text, text>)")
    with pytest.raises(InvalidRequest, match="unset value"):
        cql.execute(cql.prepare("DELETE m[?] FROM unset_m WHERE k = 10"), (UNSET_VALUE,))


def test_the_drivers_schema_metadata_matches_the_catalog(cql: Any) -> None:
    cql.execute("CREATE TYPE IF NOT EXISTS pair (k text, n int)")
    cql.execute(
        "CREATE TABLE md (pk int, c1 text, c2 int, s int static, v frozen<pair>, "
        "l list<int>, PRIMARY KEY ((pk), c1, c2)) WITH CLUSTERING ORDER BY (c1 DESC) "
        "AND comment = 'it''s' AND default_time_to_live = 7"
    )
    meta = cql.cluster.metadata.keyspaces["ks"].tables["md"]
    assert [c.name for c in meta.partition_key] == ["pk"]
    assert [c.name for c in meta.clustering_key] == ["c1", "c2"]
    assert meta.clustering_key[0].is_reversed and not meta.clustering_key[1].is_reversed
    assert meta.columns["s"].is_static and meta.columns["v"].cql_type == "frozen<pair>"
    assert not meta.is_compact_storage
    assert meta.options["comment"] == "it's" and meta.options["default_time_to_live"] == 7
    text = meta.export_as_string()
    assert "PRIMARY KEY (pk, c1, c2)" in text and "CLUSTERING ORDER BY (c1 DESC, c2 ASC)" in text
    assert "pair" in cql.cluster.metadata.keyspaces["ks"].user_types


def test_writes_reads_and_the_cdc_log(cql: Any) -> None:
    cql.execute(
        "CREATE TABLE w (pk int, ck text, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true, 'preimage': true}"
    )
    cql.execute("INSERT INTO w (pk, ck, v) VALUES (1, 'a', 1)")
    cql.execute("UPDATE w SET v = %s WHERE pk = %s AND ck = %s", (2, 1, "a"))
    assert [tuple(r) for r in cql.execute("SELECT pk, ck, v FROM w")] == [(1, "a", 2)]
    log = cql.execute('SELECT "cdc$operation", v FROM w_scylla_cdc_log')
    assert [tuple(r) for r in log] == [(2, 1), (0, 1), (1, 2)]  # insert; preimage, update
    select = cql.prepare("SELECT v FROM w WHERE pk = ? AND ck = ?")
    assert cql.execute(select, (1, "a")).one().v == 2


TYPES = {
    "a": ("ascii", "ascii!"),
    "b": ("bigint", -(2**62)),
    "bl": ("blob", b"\x00\xff"),
    "bo": ("boolean", True),
    "d": ("date", datetime.date(2020, 2, 29)),
    "de": ("decimal", decimal.Decimal("-12.3400")),
    "do": ("double", 1.5e300),
    "du": ("duration", Duration(1, 2, 3_000_000_000)),
    "f": ("float", 0.5),
    "i": ("inet", "10.1.2.3"),
    "s": ("smallint", -32768),
    "t": ("text", "żółw"),
    "ti": ("time", 3_600_000_000_123),
    "ts": ("timestamp", datetime.datetime(2021, 5, 4, 3, 2, 1, 123000)),
    "tu": ("timeuuid", uuid.UUID("0ee8a4a0-33d5-11eb-8080-808080808080")),
    "ty": ("tinyint", 127),
    "u": ("uuid", uuid.UUID("01234567-89ab-cdef-0123-456789abcdef")),
    "vi": ("varint", 10**30),
    "li": ("list<int>", [3, 1, 3]),
    "se": ("set<text>", {"x", "y"}),
    "ma": ("map<int, text>", {1: "one", 2: "two"}),
    "fr": ("frozen<list<map<int, text>>>", [{1: "a"}, {}]),
    "tp": ("tuple<int, text, boolean>", (1, "x", None)),
    "ve": ("vector<float, 3>", [1.0, -2.5, 0.0]),
    "ud": ("frozen<pair>", ("k", 7)),
}


def test_every_type_round_trips_through_prepared_statements(cql: Any) -> None:
    cql.execute("CREATE TYPE IF NOT EXISTS pair (k text, n int)")
    columns = ", ".join(f"{name} {ctype}" for name, (ctype, _) in TYPES.items())
    cql.execute(f"CREATE TABLE types (pk int PRIMARY KEY, {columns})")
    names = list(TYPES)
    insert = cql.prepare(
        f"INSERT INTO types (pk, {', '.join(names)}) VALUES (?, {', '.join('?' * len(names))})"
    )
    cql.execute(insert, [1, *(value for _, value in TYPES.values())])
    row = cql.execute(cql.prepare("SELECT * FROM types WHERE pk = ?"), (1,)).one()
    for name, (ctype, value) in TYPES.items():
        got = getattr(row, name)
        if ctype == "inet":
            assert ipaddress.ip_address(got) == ipaddress.ip_address(value)
        elif ctype == "time":
            assert got.nanosecond_time == value
        elif ctype == "date":
            assert got.date() == value
        elif ctype.startswith(("set", "map", "frozen<list<map")):
            assert _plain(got) == _plain(value), name
        elif ctype == "frozen<pair>":
            assert (got.k, got.n) == value
        else:
            assert got == value, name
    cql.execute(insert, [2, *([None] * len(names))])
    nulls = cql.execute("SELECT * FROM types WHERE pk = 2").one()
    assert all(getattr(nulls, name) is None for name in names)


def _plain(value: Any) -> Any:
    if isinstance(value, dict) or hasattr(value, "items"):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, set | frozenset) or type(value).__name__ == "SortedSet":
        return sorted(value)
    return value


def test_batches_of_prepared_and_simple_statements(cql: Any) -> None:
    cql.execute("CREATE TABLE b (pk int, ck int, v text, PRIMARY KEY (pk, ck))")
    insert = cql.prepare("INSERT INTO b (pk, ck, v) VALUES (?, ?, ?)")
    batch = BatchStatement()
    batch.add(insert, (1, 1, "one"))
    batch.add(SimpleStatement("INSERT INTO b (pk, ck, v) VALUES (%s, %s, %s)"), (1, 2, "two"))
    batch.add(SimpleStatement("UPDATE b SET v = 'three' WHERE pk = 1 AND ck = 3"))
    cql.execute(batch)
    rows = cql.execute("SELECT ck, v FROM b WHERE pk = 1")
    assert [tuple(r) for r in rows] == [(1, "one"), (2, "two"), (3, "three")]


def test_the_drivers_client_timestamps_are_the_write_timestamps(cql: Any) -> None:
    # the default timestamp of QUERY, EXECUTE and BATCH used to be read and dropped: the
    # server's clock decided which write won
    cql.execute("CREATE TABLE cts (pk int PRIMARY KEY, v int)")
    cql.execute("CREATE TABLE ctn (pk int PRIMARY KEY, n counter)")
    update = cql.prepare("UPDATE cts SET v = ? WHERE pk = ?")
    generator = cql.cluster.timestamp_generator
    try:
        cql.cluster.timestamp_generator = lambda: 1_000_000
        cql.execute("INSERT INTO cts (pk, v) VALUES (1, 1)")
        cql.execute(update, (2, 2))
        batch = BatchStatement()
        batch.add(SimpleStatement("INSERT INTO cts (pk, v) VALUES (3, 3)"))
        batch.add(update, (4, 4))
        batch.add(SimpleStatement("INSERT INTO cts (pk, v) VALUES (5, 5) USING TIMESTAMP 7"))
        cql.execute(batch)
        cql.execute("UPDATE ctn SET n = n + 1 WHERE pk = 1")  # counters take no timestamp
        cql.cluster.timestamp_generator = lambda: 999_999  # older: loses, as in ScyllaDB
        cql.execute("INSERT INTO cts (pk, v) VALUES (1, 100)")
    finally:
        cql.cluster.timestamp_generator = generator
    rows = {r.pk: (r.v, r.w) for r in cql.execute("SELECT pk, v, WRITETIME(v) AS w FROM cts")}
    at = 1_000_000
    assert rows == {1: (1, at), 2: (2, at), 3: (3, at), 4: (4, at), 5: (5, 7)}
    assert cql.execute("SELECT n FROM ctn WHERE pk = 1").one().n == 1


def test_a_statement_prepared_in_a_keyspace_keeps_it(cql: Any) -> None:
    cql.execute(KS.replace("ks", "ks2"))
    cql.execute("CREATE TABLE ks.pk (pk int PRIMARY KEY)")
    cql.execute("CREATE TABLE ks2.pk (pk int PRIMARY KEY)")
    insert = cql.prepare("INSERT INTO pk (pk) VALUES (?)")  # prepared in ks
    cql.set_keyspace("ks2")
    try:
        cql.execute(insert, (1,))
    finally:
        cql.set_keyspace("ks")
    assert [r.pk for r in cql.execute("SELECT pk FROM ks.pk")] == [1]
    assert [r.pk for r in cql.execute("SELECT pk FROM ks2.pk")] == []


def test_errors_arrive_as_the_drivers_classes(cql: Any) -> None:
    cql.execute("CREATE TABLE e (pk int, ck text, PRIMARY KEY (pk, ck))")
    with pytest.raises(SyntaxException):
        cql.execute("SELEC * FROM e")
    with pytest.raises(InvalidRequest, match="unconfigured table nope"):
        cql.execute("SELECT * FROM nope")
    with pytest.raises(AlreadyExists):
        cql.execute("CREATE TABLE e (pk int PRIMARY KEY)")
    with pytest.raises(InvalidRequest, match="Key length of 70000"):
        cql.execute("INSERT INTO e (pk, ck) VALUES (%s, %s)", (1, "x" * 70_000))


def test_an_unknown_prepared_id_is_prepared_again(cql: Any, served: CqlServer) -> None:
    cql.execute("CREATE TABLE r (pk int PRIMARY KEY, v int)")
    insert = cql.prepare("INSERT INTO r (pk, v) VALUES (?, ?)")
    served.prepared.clear()  # as after a server restart: EXECUTE gets UNPREPARED
    cql.execute(insert, (1, 1))
    assert cql.execute("SELECT v FROM r WHERE pk = 1").one().v == 1


def test_hostile_frames_close_only_their_connection(cql: Any, server: tuple[str, int]) -> None:
    rng = random.Random(7)
    frames = [
        b"\x04\x00\x00\x01\x07\x7f\xff\xff\xff",  # a 2 GiB body
        b"\x04\x00\x00\x01\x07\x00\x00\x00\x05abc",  # truncated
        b"\x84\x00\x00\x01\x02\x00\x00\x00\x00",  # a response frame
        b"\x04\x00\x00\x01\x01\x00\x00\x00\x02\xff\xff",  # a bad STARTUP
        b"\x04\x00\x00\x01\x07\x00\x00\x00\x00",  # QUERY before STARTUP
    ]
    frames += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))) for _ in range(40)]
    for frame in frames:
        with socket.create_connection(server, timeout=5) as sock:
            try:  # the server may answer and close before all of it is sent
                sock.sendall(frame)
                sock.shutdown(socket.SHUT_WR)
                while sock.recv(65536):
                    pass
            except OSError:
                pass
    cql.execute("CREATE TABLE h (pk int PRIMARY KEY)")
    cql.execute("INSERT INTO h (pk) VALUES (1)")
    assert cql.execute("SELECT count(*) FROM h").one().count == 1


def _serve(data: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    """``cqlcdc serve`` as a process on a free port, once it says it listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cli = Path(sys.executable).with_name("cqlcdc")
    command = [str(cli), "serve", "--data-dir", str(data), "--port", str(port)]
    proc = subprocess.Popen(
        [*command, "--master", "local[1]", *extra],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:  # the line that says it listens (warnings may come first)
        said.append(line)
        if "serving" in line:
            break
    assert said and f"127.0.0.1:{port}" in said[-1], said
    return proc, port


@pytest.mark.parametrize("workers", WORKERS, ids=workers_id)
def test_kill_9_loses_no_acknowledged_write(spark: Any, tmp_path: Path, workers: int) -> None:
    """Writes are acknowledged once durable in the ingest log: a server killed with
    SIGKILL right after acknowledging them has every one, with its CDC log row, once."""
    from cassandra.concurrent import execute_concurrent_with_args

    data = tmp_path / "data"
    proc, port = _serve(data, "--workers", str(workers))
    try:
        cluster = _cluster(("127.0.0.1", port))
        session = cluster.connect()
        session.execute(KS)
        session.execute(
            "CREATE TABLE ks.k (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
        )
        insert = session.prepare("INSERT INTO ks.k (pk, v) VALUES (?, ?)")
        results = execute_concurrent_with_args(
            session, insert, [(i, i) for i in range(400)], concurrency=64
        )
        assert all(ok for ok, _ in results)
        proc.kill()  # SIGKILL: no flush, no shutdown
        proc.wait(timeout=60)
        cluster.shutdown()
    finally:
        if proc.poll() is None:
            proc.kill()
    again = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        rows = sorted(tuple(r) for r in again.execute("SELECT pk, v FROM ks.k"))
        assert rows == [(i, i) for i in range(400)]
        log = [r.pk for r in again.execute("SELECT pk FROM ks.k_scylla_cdc_log")]
        assert sorted(log) == list(range(400))
    finally:
        again.close()


@pytest.mark.parametrize("workers", WORKERS, ids=workers_id)
def test_cqlcdc_serve_stops_cleanly_on_sigterm(spark: Any, tmp_path: Path, workers: int) -> None:
    data = tmp_path / "data"
    proc, port = _serve(data, "--workers", str(workers))
    try:
        assert proc.stderr is not None
        cluster = _cluster(("127.0.0.1", port), protocol_version=4)
        session = cluster.connect()
        session.execute(KS)
        session.execute("CREATE TABLE ks.t (pk int PRIMARY KEY, v int)")
        session.execute("INSERT INTO ks.t (pk, v) VALUES (1, 1)")
        cluster.shutdown()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=120)
        assert code == 0, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    again = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        assert [tuple(r) for r in again.execute("SELECT pk, v FROM ks.t")] == [(1, 1)]
    finally:
        again.close()
    with pytest.raises(NoHostAvailable):
        _cluster(("127.0.0.1", port), protocol_version=4).connect()


def _cqlsh(server: tuple[str, int], statement: str) -> subprocess.CompletedProcess[str]:
    cqlsh = Path(sys.executable).with_name("cqlsh")
    return subprocess.run(
        [str(cqlsh), server[0], str(server[1]), "-e", statement],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def test_cqlsh_select_output_is_cqlcdc_runs(
    cql: Any, server: tuple[str, int], served: CqlServer, capsys: Any
) -> None:
    from cqlcdc.cli import Runner

    cql.execute("CREATE TABLE sh (pk int, ck text, v double, PRIMARY KEY (pk, ck))")
    cql.execute("INSERT INTO sh (pk, ck, v) VALUES (1, 'it''s', 1.5)")
    cql.execute("INSERT INTO sh (pk, ck, v) VALUES (2, 'b', null)")
    query = "SELECT pk, ck, v FROM ks.sh"
    done = _cqlsh(server, query + ";")
    assert done.returncode == 0, done.stderr
    runner = Runner(Session(served.coordinator, "ks"), "table", sys.stdout, sys.stderr)
    runner.run_text(query + ";", "<test>")
    ours = capsys.readouterr().out
    # cqlsh first warns that it was built against another Cassandra version
    theirs = [line for line in done.stdout.splitlines() if "cqlsh was built against" not in line]
    assert "\n".join(theirs).strip("\n") == ours.strip("\n")


def test_cqlsh_runs_a_file(cql: Any, server: tuple[str, int], tmp_path: Path) -> None:
    script = tmp_path / "setup.cql"
    script.write_text(
        "CREATE TABLE IF NOT EXISTS ks.f (pk int PRIMARY KEY, v text);\n"
        "INSERT INTO ks.f (pk, v) VALUES (1, 'one');\n"
        "INSERT INTO ks.f (pk, v) VALUES (2, 'two');\n"
        "SELECT pk, v FROM ks.f WHERE pk = 2;\n"
    )
    cqlsh = Path(sys.executable).with_name("cqlsh")
    done = subprocess.run(
        [str(cqlsh), server[0], str(server[1]), "-f", str(script)],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert " two" in done.stdout and "(1 rows)" in done.stdout
    assert sorted(tuple(r) for r in cql.execute("SELECT pk, v FROM ks.f")) == [
        (1, "one"),
        (2, "two"),
    ]


def test_cqlsh_describe_and_errors(cql: Any, server: tuple[str, int]) -> None:
    cql.execute("CREATE TABLE IF NOT EXISTS d (pk int PRIMARY KEY, v text) WITH comment = 'x'")
    done = _cqlsh(server, "DESCRIBE TABLE ks.d;")
    assert done.returncode == 0, done.stderr
    assert "CREATE TABLE ks.d (" in done.stdout and "comment = 'x'" in done.stdout
    listed = _cqlsh(server, "DESCRIBE KEYSPACES;")
    assert "ks" in listed.stdout.split()
    failed = _cqlsh(server, "SELECT * FROM ks.nope;")
    assert failed.returncode != 0
    assert 'message="unconfigured table nope"' in failed.stderr


def test_describe_answers_a_row_per_element(cql: Any) -> None:
    """ScyllaDB's server-side DESCRIBE: one row per keyspace, type, table, index and CDC log
    (cqlpy's test_cdc.py finds the log's ``ALTER TABLE ... tombstone_gc`` row by its name)."""
    cql.execute("CREATE KEYSPACE IF NOT EXISTS described WITH replication = "
                "{'class': 'SimpleStrategy', 'replication_factor': 1}")  # fmt: skip
    cql.execute("CREATE TABLE IF NOT EXISTS described.t (p int PRIMARY KEY, v int) "
                "WITH cdc = {'enabled': true}")  # fmt: skip
    cql.execute("CREATE INDEX IF NOT EXISTS t_v ON described.t (v)")
    rows = list(cql.execute("DESCRIBE KEYSPACE described WITH INTERNALS"))
    assert [(r.keyspace_name, r.type, r.name) for r in rows] == [
        ("described", "keyspace", "described"),
        ("described", "table", "t"),
        ("described", "index", "t_v"),
        ("described", "table", "t_scylla_cdc_log"),
    ]
    assert rows[1].create_statement.startswith("CREATE TABLE described.t (")
    assert rows[3].create_statement.startswith("ALTER TABLE described.t_scylla_cdc_log WITH ")
    assert "tombstone_gc = {" in rows[3].create_statement
    table_rows = list(cql.execute("DESCRIBE TABLE described.t"))
    assert [r.name for r in table_rows] == ["t", "t_v", "t_scylla_cdc_log"]


def test_tls(served: CqlServer, tmp_path: Path) -> None:
    import ssl

    from cqlcdc.server.service import tls_context

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    secure = CqlServer(
        served.coordinator,
        port=0,
        ssl_context=tls_context(str(cert), str(key)),
        tls_files=(str(cert), str(key)),
        protocol_workers=served.protocol_workers,
    )
    address = secure.start_in_thread()
    try:
        client = ssl.create_default_context(cafile=str(cert))
        cluster = _cluster(address, protocol_version=4, ssl_context=client)
        try:
            row = cluster.connect().execute("SELECT cluster_name FROM system.local").one()
            assert row.cluster_name == "cqlcdc"
        finally:
            cluster.shutdown()
        with pytest.raises(NoHostAvailable):  # plain text against TLS
            _cluster(address, protocol_version=4, connect_timeout=3).connect()
        # cqlsh --ssl, certificate validation off (its SSL_VALIDATE setting)
        cqlsh = Path(sys.executable).with_name("cqlsh")
        done = subprocess.run(
            [str(cqlsh), address[0], str(address[1]), "--ssl", "-e",
             "SELECT cluster_name FROM system.local;"],
            capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120, check=False,
            env={**os.environ, "SSL_VALIDATE": "false"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "cqlcdc" in done.stdout
    finally:
        secure.stop_thread()


def test_the_stream_window_query_of_scylla_cdc_readers(cql: Any) -> None:
    """What ScyllaDB's CDC libraries send: generations, streams, then each window."""
    cql.execute("CREATE TABLE cw (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    before = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    for pk in range(6):
        cql.execute("INSERT INTO cw (pk, v) VALUES (%s, %s)", (pk, pk))
    after = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(seconds=1)
    generation = cql.execute(
        "SELECT time FROM system_distributed.cdc_generation_timestamps WHERE key = 'timestamps'"
    ).one()
    described = cql.execute(
        "SELECT streams FROM system_distributed.cdc_streams_descriptions_v2 WHERE time = %s",
        (generation.time,),
    )
    streams = sorted({sid for row in described for sid in row.streams})
    window = cql.prepare(
        'SELECT pk FROM cw_scylla_cdc_log WHERE "cdc$stream_id" IN ? '
        'AND "cdc$time" > minTimeuuid(?) AND "cdc$time" < maxTimeuuid(?)'
    )
    seen = [r.pk for r in cql.execute(window, (streams, before, after))]
    assert sorted(seen) == list(range(6))
    assert cql.execute(window, (streams, after, after)).all() == []
    assert cql.execute(window, ([], before, after)).all() == []


def test_the_example_cdc_consumer_rebuilds_the_table(cql: Any, server: tuple[str, int]) -> None:
    columns = "pk int, ck int, v text, n int, PRIMARY KEY (pk, ck)"
    cql.execute(f"CREATE TABLE src ({columns}) WITH cdc = {{'enabled': true}}")
    cql.execute(f"CREATE TABLE dst ({columns})")
    for pk in range(3):
        for ck in range(4):
            cql.execute("INSERT INTO src (pk, ck, v, n) VALUES (%s, %s, %s, %s)", (pk, ck, "x", ck))
    cql.execute("UPDATE src SET v = 'y', n = null WHERE pk = 0 AND ck = 1")
    cql.execute("DELETE FROM src WHERE pk = 0 AND ck = 2")
    cql.execute("DELETE FROM src WHERE pk = 1 AND ck >= 1 AND ck < 3")
    cql.execute("DELETE FROM src WHERE pk = 2")
    cql.execute("INSERT INTO src (pk, ck, v) VALUES (2, 9, 'back')")
    example = Path(__file__).resolve().parents[2] / "examples" / "cdc_consumer.py"
    done = subprocess.run(
        [sys.executable, str(example), "ks.src", "ks.dst", "--port", str(server[1])],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    query = "SELECT pk, ck, v, n, writetime(v) FROM {}"
    source = sorted(tuple(r) for r in cql.execute(query.format("src")))
    assert sorted(tuple(r) for r in cql.execute(query.format("dst"))) == source
    assert len(source) == 6  # pk 0: ck 0, 1, 3; pk 1: ck 0, 3; pk 2: ck 9


def test_paging_over_10k_rows(cql: Any, served: CqlServer) -> None:
    import pyarrow as pa

    cql.execute("CREATE TABLE pg (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    local = Session(served.coordinator, "ks")
    ids = pa.array(range(10_000), pa.int32())
    insert = local.prepare("INSERT INTO pg (pk, ck, v) VALUES (?, ?, ?)")
    local.execute_arrow(insert, pa.table({"pk": pa.compute.divide(ids, 100), "ck": ids, "v": ids}))
    statement = SimpleStatement("SELECT ck, v FROM pg", fetch_size=1000)
    result = cql.execute(statement)
    assert len(result.current_rows) == 1000 and result.has_more_pages
    pages = 1
    rows = list(result.current_rows)
    while result.has_more_pages:
        result.fetch_next_page()
        rows += result.current_rows
        pages += 1
    assert pages == 11  # the tenth page is full: an empty one follows, as from ScyllaDB
    assert sorted(r.ck for r in rows) == list(range(10_000))
    first = cql.execute(statement)
    state = first.paging_state
    again = cql.execute(statement, paging_state=state)  # a state serves once: the next page
    assert len(again.current_rows) == 1000
    with pytest.raises(InvalidRequest, match="paging state"):
        cql.execute(statement, paging_state=state)


def test_a_page_stops_at_one_megabyte(cql: Any) -> None:
    """cqlpy's test_page_size_0: a page of big rows stops at 1 MB (ScyllaDB's limit); a
    fetch size of 0 means no paging."""
    cql.execute("CREATE TABLE IF NOT EXISTS big (p int, c int, s text, PRIMARY KEY (p, c))")
    insert = cql.prepare("INSERT INTO big (p, c, s) VALUES (?, ?, ?)")
    for c in range(15):
        cql.execute(insert, [0, c, "x" * 100_000])
    query = "SELECT * FROM big WHERE p = 0"
    assert len(cql.execute(SimpleStatement(query, fetch_size=3)).current_rows) == 3
    first = cql.execute(SimpleStatement(query, fetch_size=100_000))
    assert 1 <= len(first.current_rows) < 15 and first.has_more_pages
    assert len(list(first)) == 15  # the driver fetches the rest
    assert len(cql.execute(SimpleStatement(query, fetch_size=0)).current_rows) == 15


def test_a_second_client_the_nodejs_driver(server: tuple[str, int]) -> None:
    node_dir = Path(__file__).resolve().parents[1] / "node"
    done = subprocess.run(
        ["node", str(node_dir / "smoke.js"), server[0], str(server[1])],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows"] == [[1, "a", 2.5]]
    assert result["log"] == [[2, 1, "a", 1.5], [1, 1, "a", 2.5]]


def test_concurrent_writes_are_combined_with_their_own_timestamps_and_errors(
    cql: Any, served: CqlServer, server: tuple[str, int]
) -> None:
    """Many single-row EXECUTEs in flight become bulk chunks (one append for a group),
    each keeping the timestamp its client chose; a write the bulk path cannot take (a key
    over 64 KiB) fails alone, with ScyllaDB's error, and its neighbours are written."""
    from cassandra.concurrent import execute_concurrent_with_args

    first_ts = 1_700_000_000_000_000
    stamps = iter(range(first_ts, first_ts + 10_000))
    cluster = _cluster(server, timestamp_generator=lambda: next(stamps))
    try:
        session = cluster.connect("ks")
        session.execute(
            "CREATE TABLE comb (pk text PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
        )
        insert = session.prepare("INSERT INTO comb (pk, v) VALUES (?, ?)")
        before = served.combiner.combined if served.combiner is not None else 0
        rows = [(f"k{i}", i) for i in range(300)]
        done = execute_concurrent_with_args(session, insert, rows, concurrency=64)
        assert all(ok for ok, _ in done)
        assert served.combiner is not None and served.combiner.combined > before
        got = session.execute("SELECT pk, v, writetime(v) AS ts FROM comb").all()
        assert sorted((r.pk, r.v) for r in got) == sorted(rows)
        assert all(first_ts <= r.ts < first_ts + 10_000 for r in got)
        bad = [(f"m{i}", i) for i in range(40)] + [("x" * 70_000, -1)]
        done = execute_concurrent_with_args(
            session, insert, bad, concurrency=64, raise_on_first_error=False
        )
        failed = [result for ok, result in done if not ok]
        assert len(failed) == 1 and isinstance(failed[0], InvalidRequest)
        assert "Key length of 70000 is longer than maximum of 65535" in str(failed[0])
        assert session.execute("SELECT count(*) FROM comb").one()[0] == 340
    finally:
        cluster.shutdown()


def test_concurrent_simple_statements_are_combined_as_the_prepared_writes_they_mean(
    cql: Any, served: CqlServer, server: tuple[str, int]
) -> None:
    """The Python driver's simple statements carry their values in the text (QUERY without
    values); in flight together they are combined like EXECUTEs, each with its client
    timestamp, and read back as the same writes run one by one do. A shape the bulk path
    does not take (a list) and a bad literal still get their own result."""
    from cassandra.concurrent import execute_concurrent, execute_concurrent_with_args

    first_ts = 1_700_000_000_000_000
    stamps = iter(range(first_ts, first_ts + 10_000))
    cluster = _cluster(server, timestamp_generator=lambda: next(stamps))
    try:
        session = cluster.connect("ks")
        for table in ("lit", "lit_rows"):
            session.execute(
                f"CREATE TABLE {table} (pk int, ck text, v bigint, b blob, l list<int>, "
                "PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true, 'preimage': true}"
            )
        before = served.combiner.combined if served.combiner is not None else 0
        rows = [(i % 37, f"c{i % 5}", i * 1_000_000_007, bytes([i % 256])) for i in range(400)]
        insert = "INSERT INTO {} (pk, ck, v, b) VALUES (%s, %s, %s, %s)"
        done = execute_concurrent_with_args(
            session, SimpleStatement(insert.format("lit")), rows, concurrency=64
        )
        assert all(ok for ok, _ in done)
        assert served.combiner is not None and served.combiner.combined > before
        for row in rows:  # one by one: the row path's answer
            session.execute(insert.format("lit_rows"), row)
        read = "SELECT pk, ck, v, b, writetime(v) AS ts FROM {}"
        combined = sorted(tuple(r) for r in session.execute(read.format("lit")))
        one_by_one = sorted(tuple(r) for r in session.execute(read.format("lit_rows")))
        assert [r[:4] for r in combined] == [r[:4] for r in one_by_one]
        assert all(first_ts <= r[4] < first_ts + 10_000 for r in combined)
        log = 'SELECT "cdc$operation", pk, ck, v, b FROM {}_scylla_cdc_log'
        assert sorted(tuple(r) for r in session.execute(log.format("lit"))) == sorted(
            tuple(r) for r in session.execute(log.format("lit_rows"))
        )
        mixed = [
            "UPDATE lit SET l = l + [1] WHERE pk = 1 AND ck = 'c1'",
            "UPDATE lit SET v = 'text' WHERE pk = 1 AND ck = 'c1'",
            *(f"UPDATE lit SET v = {i} WHERE pk = 2 AND ck = 'c{i}'" for i in range(40)),
        ]
        done = execute_concurrent(
            session, [(m, ()) for m in mixed], concurrency=64, raise_on_first_error=False
        )
        failed = [result for ok, result in done if not ok]
        assert len(failed) == 1 and isinstance(failed[0], InvalidRequest)
        assert 'Invalid STRING constant (text) for "v" of type bigint' in str(failed[0])
        got = session.execute("SELECT l FROM lit WHERE pk = 1 AND ck = 'c1'").one()
        assert got.l == [1]
        assert session.execute("SELECT count(*) FROM lit WHERE pk = 2").one()[0] == 40
    finally:
        cluster.shutdown()


def test_prepared_from_json_and_using_timeout_bind_their_own_types(cql: Any) -> None:
    """``fromJson(?)`` takes the JSON text and ``USING TIMEOUT ?`` a duration: the bind
    metadata says so, so the driver sends them as such."""
    cql.execute("CREATE TABLE js (pk int PRIMARY KEY, m map<text, int>, d date)")
    insert = cql.prepare(
        "INSERT INTO js (pk, m, d) VALUES (?, fromJson(?), fromJson(?)) USING TIMEOUT ?"
    )
    assert [c.type.typename for c in insert.column_metadata] == [
        "int",
        "varchar",
        "varchar",
        "duration",
    ]
    cql.execute(insert, (1, '{"a": 1, "b": 2}', '"2024-02-29"', Duration(0, 0, 5_000_000_000)))
    row = cql.execute("SELECT JSON pk, m, d FROM js WHERE pk = 1").one()
    assert json.loads(row[0]) == {"pk": 1, "m": {"a": 1, "b": 2}, "d": "2024-02-29"}


# ScyllaDB's test/cql-pytest/test_cdc.py, through the real driver (flushes have no
# counterpart here: every read already merges whatever files hold the data)
def test_scylla_cdc_log_entries_use_cdc_streams(cql: Any) -> None:
    cql.execute("CREATE TABLE cdc_streams (pk int PRIMARY KEY) WITH cdc = {'enabled': true}")
    stmt = cql.prepare("INSERT INTO cdc_streams (pk) VALUES (?) USING TIMEOUT 5m")
    for i in range(100):
        cql.execute(stmt, [i])
    logged = {r[0] for r in cql.execute('SELECT "cdc$stream_id" FROM cdc_streams_scylla_cdc_log')}
    described = cql.execute(
        SimpleStatement(
            "SELECT streams FROM system_distributed.cdc_streams_descriptions_v2",
            consistency_level=ConsistencyLevel.ONE,
        )
    )
    assert logged and logged <= {sid for entry in described for sid in entry.streams}


def test_scylla_cdc_alter_table_drop_column(cql: Any) -> None:
    cql.execute("CREATE TABLE cdc_drop (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}")
    cql.execute("INSERT INTO cdc_drop (pk, v) VALUES (0, 0)")
    cql.execute("INSERT INTO cdc_drop (pk, v) VALUES (1, null)")
    cql.execute("ALTER TABLE cdc_drop DROP v")
    assert len(cql.execute("SELECT * FROM cdc_drop_scylla_cdc_log").all()) == 2
    # and added again (USING TIMESTAMP bound by the driver's own prepared write): the log and
    # the table show nothing of the old column
    cql.execute("ALTER TABLE cdc_drop ADD v int")
    write = cql.prepare("INSERT INTO cdc_drop (pk, v) VALUES (?, ?) USING TIMESTAMP ?")
    cql.execute(write, (2, 2, int(time.time() * 1_000_000)))
    assert sorted(tuple(r) for r in cql.execute("SELECT pk, v FROM cdc_drop")) == [
        (0, None),
        (1, None),
        (2, 2),
    ]
    log = cql.execute("SELECT pk, v FROM cdc_drop_scylla_cdc_log")
    assert sorted((r.pk, r.v) for r in log) == [(0, None), (1, None), (2, 2)]
    dropped = cql.execute(
        "SELECT column_name, type FROM system_schema.dropped_columns "
        "WHERE keyspace_name = 'ks' AND table_name = 'cdc_drop'"
    ).all()
    assert [(r.column_name, r.type) for r in dropped] == [("v", "int")]


def test_scylla_cdc_with_lwt_preimage(cql: Any) -> None:
    """LWT inserts do not observe themselves inside preimages (ScyllaDB #12098)."""
    from cassandra.concurrent import execute_concurrent_with_args

    cql.execute(
        "CREATE TABLE cdc_lwt (pk int PRIMARY KEY) WITH cdc = {'enabled': true, 'preimage': true}"
    )
    stmt = cql.prepare("INSERT INTO cdc_lwt (pk) VALUES (?) IF NOT EXISTS")
    for pk in range(10):  # one at a time: each in a micro-batch of its own
        assert cql.execute(stmt, (pk,)).one()[0]
    # the rest at once: many in one micro-batch (each answer waits for its batch)
    results = execute_concurrent_with_args(cql, stmt, [(pk,) for pk in range(10, 100)], 32)
    assert all(ok and outcome.one()[0] for ok, outcome in results)
    operations = [r[0] for r in cql.execute('SELECT "cdc$operation" FROM cdc_lwt_scylla_cdc_log')]
    assert len(operations) == 100 and all(op == 2 for op in operations)


def test_a_schema_change_invalidates_prepared_statements(cql: Any, server: tuple[str, int]) -> None:
    """ScyllaDB forgets a prepared statement whose table or type changed: preparing it again
    gives the new bind types (a new UDT field was silently dropped before), and executing
    the old id gets UNPREPARED, which the driver answers by preparing again."""
    from cassandra.query import named_tuple_factory

    cql.execute("CREATE TYPE ua_t (a int)")
    cql.execute("CREATE TABLE ua (k int PRIMARY KEY, d frozen<ua_t>)")
    text = "INSERT INTO ua (k, d) VALUES (?, ?)"
    old = cql.prepare(text)
    cql.execute(old, (1, (1,)))  # an unregistered UDT binds as a tuple of its fields
    cql.execute("ALTER TYPE ua_t ADD b text")
    cluster = _cluster(server)
    try:
        fresh = cluster.connect("ks")
        fresh.row_factory = named_tuple_factory
        insert = fresh.prepare(text)
        fresh.execute(insert, (2, (2, "hello")))
        row = fresh.execute("SELECT d FROM ua WHERE k = 2").one()
        assert (row.d.a, row.d.b) == (2, "hello")
        cql.execute(old, (3, (3,)))  # the old id: UNPREPARED, prepared again, run
        assert fresh.execute("SELECT d FROM ua WHERE k = 3").one().d.a == 3
        # a table dropped and made again with another type: the new type binds
        fresh.execute("CREATE TABLE re (k int PRIMARY KEY, x int)")
        write = "INSERT INTO re (k, x) VALUES (?, ?)"
        fresh.execute(fresh.prepare(write), (1, 1))
        fresh.execute("DROP TABLE re")
        fresh.execute("CREATE TABLE re (k int PRIMARY KEY, x text)")
        again = fresh.prepare(write)
        assert [c.type.typename for c in again.column_metadata] == ["int", "varchar"]
        fresh.execute(again, (2, "two"))
        assert fresh.execute("SELECT x FROM re WHERE k = 2").one().x == "two"
    finally:
        cluster.shutdown()


def test_the_driver_selects_a_udt_field_and_a_map_element(cql: Any) -> None:
    cql.execute("CREATE TYPE sel_t (a int, b text)")
    cql.execute("CREATE TABLE sel (k int PRIMARY KEY, u frozen<sel_t>, m map<int, text>)")
    cql.execute("INSERT INTO sel (k, u, m) VALUES (1, {a: 7, b: 'x'}, {2: 'two'})")
    row = cql.execute("SELECT u.a, u.b, m[2], m[3] FROM sel WHERE k = 1").one()
    assert tuple(row) == (7, "x", "two", None)
    select = cql.prepare("SELECT u.a AS a FROM sel WHERE k = ?")
    assert [c[3].typename for c in select.result_metadata] == ["int"]  # (ks, table, name, type)
    assert cql.execute(select, (1,)).one().a == 7


def test_prepare_refuses_counter_arithmetic_on_a_regular_column(cql: Any) -> None:
    """cqlpy's test_counter_syntax_non_counter_prepare: refused at PREPARE, not at EXECUTE."""
    from cassandra import InvalidRequest as DriverInvalidRequest

    cql.execute("CREATE TABLE IF NOT EXISTS arith (p int, c int, r int, PRIMARY KEY (p, c))")
    for sign in "+-":
        with pytest.raises(DriverInvalidRequest, match="for non counter column r"):
            cql.prepare(f"UPDATE arith SET r = r {sign} 1 WHERE p = ? AND c = ?")


def test_prepare_refuses_an_unknown_udt_field_and_binds_tuples_per_marker(cql: Any) -> None:
    """user_types_test's testInvalidField (refused at PREPARE: its marker has no receiver) and
    select_multi_column_relation_test's ``(b, c) IN (?, ?)`` (each marker a whole tuple)."""
    from cassandra import InvalidRequest as DriverInvalidRequest

    cql.execute("CREATE TYPE IF NOT EXISTS onef (f int)")
    cql.execute("CREATE TABLE IF NOT EXISTS udtf (k int PRIMARY KEY, v frozen<onef>)")
    with pytest.raises(DriverInvalidRequest, match="Unknown field 's' in value of user defined"):
        cql.prepare("INSERT INTO udtf (k, v) VALUES (?, {s : ?})")
    cql.execute("CREATE TABLE IF NOT EXISTS mcin (a int, b int, c int, PRIMARY KEY (a, b, c))")
    for b, c in ((0, 0), (0, 1), (1, 0)):
        cql.execute(f"INSERT INTO mcin (a, b, c) VALUES (0, {b}, {c})")
    select = cql.prepare("SELECT b, c FROM mcin WHERE a = ? AND (b, c) IN (?, ?)")
    assert [tuple(r) for r in cql.execute(select, (0, (1, 0), (0, 1)))] == [(0, 1), (1, 0)]
