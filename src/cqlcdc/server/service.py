"""``cqlcdc serve``: the CQL native protocol over a data directory's coordinator.

One process owns the data directory and its engine; every client (cqlsh, the drivers, CDC
consumers) connects here. Binds 127.0.0.1 unless told otherwise.

>>> server = CqlServer(coordinator, port=0)  # doctest: +SKIP
>>> host, port = server.start_in_thread()  # doctest: +SKIP
"""

from __future__ import annotations

import abc
import asyncio
import dataclasses
import logging
import ssl
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from cqlcdc.server.budget import BodyBudget
from cqlcdc.server.combiner import WriteCombiner
from cqlcdc.server.compression import ALGORITHMS
from cqlcdc.server.connection import Connection
from cqlcdc.server.contracts import Requests
from cqlcdc.server.executing import InProcessRequests, SessionRequests
from cqlcdc.server.frames import MAX_BODY_BYTES
from cqlcdc.server.login import PASSWORD_AUTHENTICATOR
from cqlcdc.server.results import SchemaChange
from cqlcdc.server.statements import Cursors, PreparedCache

if TYPE_CHECKING:
    from cqlcdc.coordinator import Coordinator
    from cqlcdc.cql import ast
    from cqlcdc.server.worker_pool import WorkerPool
    from cqlcdc.session import PreparedStatement

log = logging.getLogger(__name__)

# what ScyllaDB gives a request's memory by default is a share of the shard's: here a
# fixed 512 MiB, twice the largest body
MAX_BODY_BYTES_IN_FLIGHT = 512 * 1024 * 1024
HANDSHAKE_TIMEOUT_S = 10.0


def tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """A server TLS context from a PEM certificate (chain) and its private key (TLS 1.2+).

    Raises:
        OSError, ssl.SSLError: the files cannot be read or do not match.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


class ProtocolServer(abc.ABC):
    """What serves the protocol on accepted connections, whichever process runs the
    statements: the connection limits, the body budget, the handshake's settings, the
    transport counters, and each connection's ``Requests`` (``requests_for``).

    The arguments are ``CqlServer``'s, for the connections of this process.
    """

    def __init__(
        self,
        *,
        max_connections: int,
        max_in_flight: int,
        max_frame_bytes: int,
        max_body_bytes_in_flight: int,
        handshake_timeout_s: float,
        idle_timeout_s: float | None,
        compression: tuple[str, ...],
        authenticator: str | None,
    ) -> None:
        self.max_connections = max_connections
        self.max_in_flight = max_in_flight
        self.max_frame_bytes = max_frame_bytes
        self.bodies = BodyBudget(max(max_body_bytes_in_flight, max_frame_bytes))
        self.handshake_timeout_s = handshake_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.compression = compression
        # None: no logins, STARTUP is answered READY
        self.authenticator = authenticator
        self.connections: set[Connection] = set()
        self._handlers: set[asyncio.Task[None]] = set()
        # what ScyllaDB's transport metrics count (scylla_transport_*), read at scrape time
        # (``cqlcdc.server.metrics``); updated on the event loop's thread only
        self.connects = 0
        self.requests_served = 0
        self.requests_serving = 0
        self.requests_by_kind: dict[str, int] = {}

    @abc.abstractmethod
    def requests_for(self, *, anonymous: bool) -> Requests:
        """Where a new connection's requests run."""

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.connections) >= self.max_connections and not self._make_room():
            writer.close()
            return
        conn = Connection(self, reader, writer)
        self.connections.add(conn)
        self.connects += 1
        handler = asyncio.current_task()
        if handler is not None:
            self._handlers.add(handler)
        try:
            await conn.serve()
        except Exception:  # a defect in one connection never takes the server down
            log.exception("connection failed")
        finally:
            self.connections.discard(conn)
            if handler is not None:
                self._handlers.discard(handler)

    def _make_room(self) -> bool:
        """Close the oldest connection still in its handshake, so that silent connections
        that never log in cannot lock new clients out; False when every one is logged in."""
        waiting = [c for c in self.connections if not c.logged_in]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c.accepted_at)
        self.connections.discard(oldest)
        oldest.evict()
        return True

    def push_event(self, change: SchemaChange) -> None:
        """Send ``change`` to every connection that REGISTERed for it (event loop thread)."""
        for conn in list(self.connections):
            conn.push_event(change)

    async def _close_connections(self) -> None:
        """Let every request in flight finish, close the connections, and wait for their
        handlers to end."""
        for conn in list(self.connections):
            await asyncio.gather(*conn.tasks, return_exceptions=True)
            conn.writer.close()
        await asyncio.gather(*self._handlers, return_exceptions=True)


class CqlServer(ProtocolServer):
    """Serves the CQL binary protocol (v4 and v5) for one coordinator.

    Args:
        coordinator: the data directory's coordinator (the server does not close it).
        host: the address to bind (127.0.0.1: this machine only).
        port: the port (0: any free one; ``start`` returns it).
        ssl_context: serve TLS with it (``tls_context`` makes one from a certificate).
        max_connections: connections beyond this are refused (closed at once), unless
            one still in its handshake can make room: the oldest of those is closed.
        max_in_flight: requests of one connection running at once; more wait.
        statement_threads: threads running statements (they block until committed); not
            ``protocol_workers``, the processes of ``cqlcdc serve --workers``.
        max_frame_bytes: the largest request body accepted (a larger one is a protocol
            error and closes the connection). Before the login it is
            ``MAX_HANDSHAKE_BODY_BYTES`` (128 KiB).
        max_body_bytes_in_flight: request bodies held at once by the whole server (being
            received, or running); a connection whose next body does not fit is not read
            until others finish. At least ``max_frame_bytes``.
        handshake_timeout_s: a connection that has not finished its TLS handshake, STARTUP
            and login this long after it was accepted is closed.
        idle_timeout_s: a logged-in connection that sends nothing and has no request
            running for this long is closed (None: never, as Cassandra's default; the
            drivers' heartbeats keep a pool's connections alive).
        compression: the algorithms clients may choose in STARTUP (LZ4; () for none).
        auth: require a login (Cassandra's PasswordAuthenticator against the data
            directory's roles; a directory without roles gets ``cassandra``/``cassandra``,
            as Cassandra creates it) and check every statement against the role's
            permissions. Off: every client is anonymous and may do anything but manage roles.
        protocol_workers: processes serving the protocol on the port (``cqlcdc serve
            --workers``): above 1, this process does not listen; N worker processes do
            (``worker_pool.WorkerPool``), and forward what they decoded and bound to it. The
            limits above then hold per worker: ``max_connections`` and
            ``max_body_bytes_in_flight`` are divided among them.
        tls_files: the certificate and key files ``ssl_context`` was made from, which
            protocol workers load (required with TLS and more than one worker).
    """

    def __init__(
        self,
        coordinator: Coordinator,
        host: str = "127.0.0.1",
        port: int = 9042,
        *,
        ssl_context: ssl.SSLContext | None = None,
        max_connections: int = 256,
        max_in_flight: int = 1024,
        statement_threads: int = 64,
        max_frame_bytes: int = MAX_BODY_BYTES,
        max_body_bytes_in_flight: int = MAX_BODY_BYTES_IN_FLIGHT,
        handshake_timeout_s: float = HANDSHAKE_TIMEOUT_S,
        idle_timeout_s: float | None = None,
        compression: tuple[str, ...] = ALGORITHMS,
        auth: bool = False,
        protocol_workers: int = 1,
        tls_files: tuple[str, str] | None = None,
    ) -> None:
        super().__init__(
            max_connections=max_connections,
            max_in_flight=max_in_flight,
            max_frame_bytes=max_frame_bytes,
            max_body_bytes_in_flight=max_body_bytes_in_flight,
            handshake_timeout_s=handshake_timeout_s,
            idle_timeout_s=idle_timeout_s,
            compression=compression,
            authenticator=PASSWORD_AUTHENTICATOR if auth else None,
        )
        self.coordinator = coordinator
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        if auth:
            coordinator.roles.ensure_default_superuser()
        if protocol_workers > 1 and ssl_context is not None and tls_files is None:
            raise ValueError("protocol workers serve TLS from tls_files, not an SSLContext")
        self.protocol_workers = protocol_workers
        self.tls_files = tls_files
        self.pool: WorkerPool | None = None
        self.combiner: WriteCombiner | None = WriteCombiner(coordinator)
        self.executor = ThreadPoolExecutor(max_workers=statement_threads, thread_name_prefix="cql")
        self.prepared = PreparedCache()
        # writes with literal values as the prepared writes they mean (executing._literal)
        self.literal_templates: dict[tuple[str | None, ast.Statement], PreparedStatement] = {}
        self.cursors = Cursors()
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    def requests_for(self, *, anonymous: bool) -> Requests:
        return InProcessRequests(SessionRequests(self, anonymous=anonymous), self.executor)

    def connection_count(self) -> int:
        """Client connections open now: this process's, or its protocol workers'."""
        if self.pool is not None:
            return self.pool.connection_count()
        return len(self.connections)

    async def start(self) -> tuple[str, int]:
        """Listen; returns the bound address."""
        self._loop = asyncio.get_running_loop()
        if self.protocol_workers > 1:
            from cqlcdc.server.worker_pool import WorkerPool

            self.pool = pool = WorkerPool(self, self.protocol_workers)
            host, port = await self._loop.run_in_executor(None, pool.start, self.host, self.port)
        elif self.ssl_context is not None:
            self._server = await asyncio.start_server(
                self._accept,
                self.host,
                self.port,
                ssl=self.ssl_context,
                ssl_handshake_timeout=self.handshake_timeout_s,
            )
        else:
            self._server = await asyncio.start_server(self._accept, self.host, self.port)
        if self._server is not None:
            host, port = self._server.sockets[0].getsockname()[:2]
        self.port = port
        self.coordinator.node = dataclasses.replace(
            self.coordinator.node,
            address=host,
            port=port,
            auth=self.authenticator is not None,
            tls=self.ssl_context is not None,
        )
        return host, port

    def broadcast_schema_change(self, change: SchemaChange) -> None:
        """Tell every connection that REGISTERed for SCHEMA_CHANGE (from a worker thread)."""
        if self.pool is not None:
            self.pool.broadcast(change)
        loop = self._loop
        if loop is not None and self.connections:
            loop.call_soon_threadsafe(self.push_event, change)

    async def serve_until(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set, then stop accepting and finish in-flight requests."""
        await self.start()
        await stop.wait()
        await self.close()

    async def close(self) -> None:
        """Stop accepting, let every request in flight finish (and commit), close the
        connections, and wait for their handlers to end."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self.pool is not None:  # the workers finish theirs, which run here
            await asyncio.get_running_loop().run_in_executor(None, self.pool.close)
        await self._close_connections()
        if self.combiner is not None:
            self.combiner.close()
        self.executor.shutdown(wait=True)

    # -- a server in a thread (tests, embedding) ----------------------------------------

    def start_in_thread(self) -> tuple[str, int]:
        """Run the server's event loop in a daemon thread; returns the bound address."""
        ready = threading.Event()
        address: list[tuple[str, int]] = []

        def run() -> None:
            async def main() -> None:
                address.append(await self.start())
                ready.set()
                while not self._stopped.is_set():
                    await asyncio.sleep(0.05)
                await self.close()

            asyncio.run(main())

        self._thread = threading.Thread(target=run, name="cql-server", daemon=True)
        self._thread.start()
        ready.wait(30)
        return address[0]

    def stop_thread(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(30)
