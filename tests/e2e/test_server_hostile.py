"""``cqlcdc serve`` under hostile and unlucky clients, through the real server: silent
connections (plain and TLS) that never log in, large bodies announced before and after the
login, an error message longer than a [string], and counters that overflow 64 bits.

Everything is on loopback and bounded: at most ~100 sockets, bodies of a few MiB, and
timeouts of a few seconds (the server's handshake timeout is set low for the test)."""

from __future__ import annotations

import socket
import ssl
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra import InvalidRequest
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

import cqlcdc
from cqlcdc.server import CqlServer
from cqlcdc.server.handshake import MAX_HANDSHAKE_BODY_BYTES
from cqlcdc.server.service import tls_context
from tests.e2e.serving import until

pytestmark = pytest.mark.spark

KS = (
    "CREATE KEYSPACE IF NOT EXISTS ks "
    "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
)
MAX_CONNECTIONS = 32
HANDSHAKE_TIMEOUT_S = 3.0
MAX_FRAME_BYTES = 4 * 1024 * 1024
BODY_BUDGET_BYTES = 8 * 1024 * 1024


@pytest.fixture(scope="module")
def coordinator(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("hostile"), master="local[2]")
    try:
        yield session.coordinator
    finally:
        session.close()


@pytest.fixture(scope="module")
def served(coordinator: Any) -> Iterator[CqlServer]:
    """A server with small limits, so that a test reaches them with few sockets."""
    srv = CqlServer(
        coordinator,
        port=0,
        max_connections=MAX_CONNECTIONS,
        handshake_timeout_s=HANDSHAKE_TIMEOUT_S,
        max_frame_bytes=MAX_FRAME_BYTES,
        max_body_bytes_in_flight=BODY_BUDGET_BYTES,
    )
    srv.start_in_thread()
    try:
        yield srv
    finally:
        srv.stop_thread()


@pytest.fixture(scope="module")
def cql(served: CqlServer) -> Iterator[Any]:
    cluster = _cluster(served)
    session = cluster.connect()
    session.default_timeout = 60  # a shared, loaded machine: reads wait for the pipeline
    session.execute(KS)
    session.set_keyspace("ks")
    yield session
    cluster.shutdown()


def _cluster(srv: CqlServer, **kwargs: Any) -> Cluster:
    return Cluster(
        [srv.host],
        port=srv.port,
        load_balancing_policy=RoundRobinPolicy(),
        connect_timeout=5,
        **kwargs,
    )


def _frame(opcode: int, body: bytes, stream: int = 1, length: int | None = None) -> bytes:
    """A v4 request frame (``length`` announces another body length than ``body``'s)."""
    size = len(body) if length is None else length
    return struct.pack(">BBhBi", 4, 0, stream, opcode, size) + body


def _startup() -> bytes:
    body = struct.pack(">H", 1)
    for text in ("CQL_VERSION", "3.0.0"):
        body += struct.pack(">H", len(text)) + text.encode()
    return _frame(0x01, body)


def _closed_by_server(sock: socket.socket, timeout_s: float) -> bool:
    """Whether the server closes ``sock`` within ``timeout_s`` (what it sent is dropped)."""
    sock.settimeout(timeout_s)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except OSError:  # reset: closed too
        return True
    return True


def _query_works(srv: CqlServer) -> None:
    cluster = _cluster(srv, protocol_version=4)
    try:
        row = cluster.connect().execute("SELECT cluster_name FROM system.local").one()
        assert row.cluster_name == "cqlcdc"
    finally:
        cluster.shutdown()


def test_silent_connections_do_not_lock_new_clients_out(served: CqlServer, cql: Any) -> None:
    """More silent sockets than the server takes: the oldest that never logged in make room
    for new clients, the rest are closed at the handshake timeout, and logged-in clients
    are never evicted."""
    address = (served.host, served.port)
    silent = [socket.create_connection(address) for _ in range(3 * MAX_CONNECTIONS)]
    try:
        started = time.monotonic()
        _query_works(served)  # a new client gets in while every slot was taken
        assert time.monotonic() - started < HANDSHAKE_TIMEOUT_S
        assert cql.execute("SELECT cluster_name FROM system.local").one() is not None
        assert len(served.connections) <= MAX_CONNECTIONS + 1
        # the last ones accepted are closed by the handshake timeout, not left open
        assert _closed_by_server(silent[-1], HANDSHAKE_TIMEOUT_S + 5)
        assert until(lambda: all(c.logged_in for c in served.connections), 10.0)
    finally:
        for sock in silent:
            sock.close()


@pytest.fixture(scope="module")
def tls_served(coordinator: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A TLS server requiring logins (the certificate made as ``test_server.test_tls``
    makes it); yields the server and the certificate file."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    srv = CqlServer(
        coordinator,
        port=0,
        ssl_context=tls_context(str(cert), str(key)),
        auth=True,
        max_connections=MAX_CONNECTIONS,
        handshake_timeout_s=HANDSHAKE_TIMEOUT_S,
    )
    srv.start_in_thread()
    try:
        yield srv, cert
    finally:
        srv.stop_thread()


def test_silent_tls_connections_do_not_lock_logins_out(tls_served: tuple[CqlServer, Path]) -> None:
    srv, cert = tls_served
    client = ssl.create_default_context(cafile=str(cert))
    silent = []
    try:
        for _ in range(2 * MAX_CONNECTIONS):  # each finishes the TLS handshake, then waits
            raw = socket.create_connection((srv.host, srv.port), timeout=5)
            silent.append(client.wrap_socket(raw, server_hostname="127.0.0.1"))
        started = time.monotonic()
        cluster = _cluster(
            srv,
            protocol_version=4,
            ssl_context=client,
            auth_provider=PlainTextAuthProvider("cassandra", "cassandra"),
        )
        try:
            row = cluster.connect().execute("SELECT cluster_name FROM system.local").one()
            assert row.cluster_name == "cqlcdc"
        finally:
            cluster.shutdown()
        assert time.monotonic() - started < HANDSHAKE_TIMEOUT_S
        assert _closed_by_server(silent[-1], HANDSHAKE_TIMEOUT_S + 5)
        # a TCP connection that never starts its TLS handshake is closed too
        with socket.create_connection((srv.host, srv.port)) as plain:
            assert _closed_by_server(plain, HANDSHAKE_TIMEOUT_S + 5)
    finally:
        for sock in silent:
            sock.close()


def test_no_large_body_before_the_login(served: CqlServer, cql: Any) -> None:
    """A frame before the handshake is over is at most 128 KiB: a header announcing more is
    refused at once, before its body is read."""
    peak = served.bodies.peak_bytes
    sockets = [socket.create_connection((served.host, served.port)) for _ in range(16)]
    try:
        for sock in sockets:  # a STARTUP announcing the largest body the server takes
            sock.sendall(_frame(0x01, b"", length=MAX_FRAME_BYTES))
        for sock in sockets:
            sock.settimeout(5)
            answer = sock.recv(65536)
            assert answer[4] == 0x00  # ERROR
            assert b"exceeds maximum allowed length %d" % MAX_HANDSHAKE_BODY_BYTES in answer
            assert _closed_by_server(sock, 5)
    finally:
        for sock in sockets:
            sock.close()
    assert served.bodies.peak_bytes == peak  # nothing was held for them
    assert cql.execute("SELECT cluster_name FROM system.local").one() is not None


def test_bodies_in_flight_are_bounded_server_wide(served: CqlServer, cql: Any) -> None:
    """Logged-in clients announcing the largest bodies and sending most of them: the server
    reads no more of them than its budget, and small requests still go through."""
    senders = []
    try:
        for _ in range(6):
            sock = socket.create_connection((served.host, served.port), timeout=5)
            sock.sendall(_startup())
            assert sock.recv(65536)[4] == 0x02  # READY
            sock.sendall(_frame(0x07, b"", stream=2, length=MAX_FRAME_BYTES))
            senders.append(sock)
        chunk = b"\0" * (256 * 1024)
        total_sent = 0
        for sock in senders:  # as much as each gets in (the kernel's buffers, when held)
            sock.settimeout(0.3)
            sent = 0
            try:
                while sent < MAX_FRAME_BYTES - len(chunk):
                    sent += sock.send(chunk)
            except TimeoutError:
                pass
            total_sent += sent
        assert total_sent > 2 * BODY_BUDGET_BYTES  # more than the server may hold
        assert served.bodies.peak_bytes >= MAX_FRAME_BYTES  # bodies were reserved
        held = sum(c.framing.buffered for c in list(served.connections))
        assert held <= BODY_BUDGET_BYTES + 6 * 64 * 1024
        assert served.bodies.peak_bytes <= BODY_BUDGET_BYTES + 64 * 1024
        # small requests of other clients are not held behind the large ones
        assert cql.execute("SELECT cluster_name FROM system.local").one() is not None
    finally:
        for sock in senders:
            sock.close()
    assert until(lambda: served.bodies.used_bytes < 64 * 1024, 10.0)


def test_an_error_message_longer_than_a_string_is_cut(cql: Any) -> None:
    """A [string] holds 65,535 bytes: the error quoting a 70,000-character identifier is
    cut, and the client gets it at once instead of waiting for its timeout."""
    name = "c" * 70_000
    started = time.monotonic()
    with pytest.raises(InvalidRequest) as raised:
        cql.execute(f"SELECT {name} FROM system.local", timeout=10)
    assert time.monotonic() - started < 5
    assert "c" * 1000 in str(raised.value)
    assert cql.execute("SELECT cluster_name FROM system.local").one() is not None


def test_counters_wrap_instead_of_breaking_the_row(cql: Any) -> None:
    """Two increments by the largest bigint wrap as Cassandra's and ScyllaDB's 64-bit
    counters do; the row and the table stay readable."""
    cql.execute("CREATE TABLE IF NOT EXISTS wrapped (pk int PRIMARY KEY, n counter)")
    big = 2**63 - 1
    for _ in range(2):
        cql.execute(f"UPDATE wrapped SET n = n + {big} WHERE pk = 1")
    cql.execute("UPDATE wrapped SET n = n + 1 WHERE pk = 2")
    assert cql.execute("SELECT n FROM wrapped WHERE pk = 1").one().n == -2
    assert sorted(tuple(r) for r in cql.execute("SELECT pk, n FROM wrapped")) == [(1, -2), (2, 1)]
    cql.execute("UPDATE wrapped SET n = n + 3 WHERE pk = 1")
    assert cql.execute("SELECT n FROM wrapped WHERE pk = 1").one().n == 1


def test_an_idle_timeout_closes_silent_logged_in_connections(coordinator: Any) -> None:
    """With ``idle_timeout_s`` a connection that logged in and then sends nothing (and has
    nothing running) is closed; one that keeps talking is not."""
    srv = CqlServer(coordinator, port=0, idle_timeout_s=1.0)
    srv.start_in_thread()
    try:
        idle = socket.create_connection((srv.host, srv.port), timeout=5)
        busy = socket.create_connection((srv.host, srv.port), timeout=5)
        for sock in (idle, busy):
            sock.sendall(_startup())
            assert sock.recv(65536)[4] == 0x02  # READY
        started = time.monotonic()
        for stream in range(1, 5):  # an OPTIONS every half second: never idle for 1 s
            busy.sendall(_frame(0x05, b"", stream=stream))
            assert busy.recv(65536)[4] == 0x06  # SUPPORTED
            time.sleep(0.5)  # the client's own pace, not a synchronisation
        assert _closed_by_server(idle, 0.1)
        assert time.monotonic() - started >= 1.0
        busy.sendall(_frame(0x05, b"", stream=9))
        assert busy.recv(65536)[4] == 0x06
        idle.close()
        busy.close()
    finally:
        srv.stop_thread()
