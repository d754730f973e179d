"""``cqlcdc serve --workers N``: N protocol processes on one port, one coordinator.

The coordinator's process owns the data directory: the engine, the ingest log and its
seqs, the catalog, the roles, the prepared statements, the paging cursors. It does not
listen for clients. It reserves the port (a bound socket with ``SO_REUSEPORT`` that never
listens) and starts N worker processes (``cqlcdc.server.worker_process``), each listening on the
same port with ``SO_REUSEPORT``, so the kernel spreads new connections over them. A worker
does what costs per request and needs no state but the protocol's: TLS, frames, segments
and compression, the handshake, decoding EXECUTE's values with the prepared statement's
types, and framing the answers. It forwards to the coordinator, over a socket pair of its
own (``link``):

- ``("w", rid, conn, version, query_id, values, timestamp)``: an EXECUTE of a
  prepared single-row write, bound (a statement ``combiner.combinable`` takes). It goes to
  the write combiner with the other workers' writes, and is answered ``("ok", rid)`` once
  durable, or with its error; ``("rebind", rid)`` when the worker bound it with types the
  schema no longer has (the worker then sends the frame itself).
- ``("r", rid, conn, version, frame)``: any other request, as the frame the client sent.
  It runs here exactly as in one process (``executing.SessionRequests``: the connection's
  session, its keyspace and role, LWT, batches, reads, DDL) and is answered with the
  encoded response body. A PREPARE or EXECUTE of a write also ships the worker the
  prepared statement, with which it binds that statement's next executions itself.
- ``("login", rid, conn, version, token)``, ``("open", conn)``, ``("close", conn)``: a
  connection's login and life.

Schema changes go to every worker (``("event", change)``): each pushes them to its
connections that REGISTERed and forgets the prepared statements it had been shipped.

The limit of the model is the coordinator's own cost per write, which it pays whatever
the number of workers: the link's share of a batch, the permission check, the combiner,
the ingest append and the acknowledgement (``docs/server.md``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from cqlcdc import access
from cqlcdc.cql import ast
from cqlcdc.errors import CqlError, ServerError
from cqlcdc.server.error_responses import error_response, failure_response
from cqlcdc.server.executing import SessionRequests
from cqlcdc.server.frames import Frame, Opcode
from cqlcdc.server.link import Message, Outbox, read_batch
from cqlcdc.server.metrics import note_request, opcode_name
from cqlcdc.server.requests import Execute, decode_request
from cqlcdc.server.responses import ResponseMessage, encode_body
from cqlcdc.server.results import PreparedResult, SchemaChange, VoidResult
from cqlcdc.server.statements import Prepared, UnpreparedId, current_prepared
from cqlcdc.system.tables import SYSTEM_KEYSPACES

if TYPE_CHECKING:
    from cqlcdc.coordinator import Coordinator
    from cqlcdc.server.contracts import Node

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0  # a worker imports the package and binds: seconds on a busy machine
STOP_TIMEOUT_S = 60.0  # a worker finishes its requests in flight, then exits


def shared_port(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (port 0: a free one) that other sockets of this user
    may bind too (``SO_REUSEPORT``): the kernel spreads connections over those listening.

    Raises:
        OSError: the address cannot be bound.
    """
    family, _, _, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


class WorkerPool:
    """The protocol workers of one ``CqlServer`` and the coordinator's end of their links."""

    def __init__(self, server: Node, count: int) -> None:
        self.server = server
        self.count = count
        self._links: list[_Link] = []
        self._reserved: socket.socket | None = None
        self._address: tuple[str, int] = ("", 0)
        self._lock = threading.Lock()  # replacing a worker, or closing
        self._closing = False

    def start(self, host: str, port: int) -> tuple[str, int]:
        """Reserve ``host:port`` (port 0: a free one), start the workers and wait until
        each listens on it; returns the address.

        Raises:
            OSError: the address cannot be bound, or a worker did not start.
        """
        reserved = self._reserved = shared_port(host, port)
        host, port = self._address = reserved.getsockname()[:2]
        try:
            for index in range(self.count):
                self._links.append(self._spawn(index, host, port))
            for link in self._links:
                link.wait_ready()
        except BaseException:
            self.close()
            raise
        for link in self._links:
            link.start()
        return host, port

    def _spawn(self, index: int, host: str, port: int) -> _Link:
        server = self.server
        ours, theirs = socket.socketpair()
        config = {
            "index": index,
            "link_fd": theirs.fileno(),
            "host": host,
            "port": port,
            "tls_files": server.tls_files,
            "max_connections": max(1, -(-server.max_connections // self.count)),
            "max_in_flight": server.max_in_flight,
            "max_frame_bytes": server.max_frame_bytes,
            "max_body_bytes_in_flight": max(
                server.max_frame_bytes, server.bodies.limit_bytes // self.count
            ),
            "handshake_timeout_s": server.handshake_timeout_s,
            "idle_timeout_s": server.idle_timeout_s,
            "compression": list(server.compression),
            "authenticator": server.authenticator,
            "log_level": logging.getLogger("cqlcdc").getEffectiveLevel(),
        }
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "cqlcdc.server.worker_process", json.dumps(config)],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        finally:
            theirs.close()
        return _Link(self, index, process, ours)

    def replace(self, dead: _Link) -> None:
        """Start another worker in place of one that exited while the server serves (its
        clients lost their connections; the drivers reconnect to the port, where the
        other workers answer meanwhile). A worker that dies within a second of its start
        is replaced a second later, so a crash at start does not spin."""
        dead.join()
        code = dead.process.returncode
        lived_s = time.monotonic() - dead.started_at
        log.warning(
            "protocol worker %d (pid %d) exited with code %s: starting another",
            dead.index, dead.process.pid, code,
        )  # fmt: skip
        if lived_s < 1.0:
            time.sleep(1.0)
        with self._lock:
            if self._closing:
                return
            try:
                link = self._spawn(dead.index, *self._address)
                link.wait_ready()
            except OSError:
                log.exception("protocol worker %d could not be started again", dead.index)
                return
            self._links[dead.index] = link
            link.start()

    def broadcast(self, change: SchemaChange) -> None:
        """A schema change, to every worker's registered connections."""
        for link in self._links:
            link.shipped.clear()  # the worker forgets them: it is shipped them again
            link.out.put(("event", change))

    def connection_count(self) -> int:
        return sum(len(link.sessions) for link in self._links)

    def close(self) -> None:
        """Stop the workers: each stops accepting, finishes its requests in flight (they
        run here, so the links serve until it exits) and closes its connections."""
        with self._lock:
            self._closing = True
        for link in self._links:
            link.out.put(("stop",))
        for link in self._links:
            link.join()
        if self._reserved is not None:
            self._reserved.close()
            self._reserved = None


class _Link:
    """One worker: its process, and the coordinator's end of its link (a thread reads;
    answers go through an ``Outbox`` from the thread that has them)."""

    def __init__(
        self, pool: WorkerPool, index: int, process: subprocess.Popen[bytes], sock: socket.socket
    ):
        self.pool = pool
        self.server = pool.server
        self.index = index
        self.process = process
        self.sock = sock
        self.out = Outbox(sock)
        # the sessions of the worker's connections, by the worker's connection number
        self.sessions: dict[int, SessionRequests] = {}
        # the prepared statements the worker binds with, by id, as shipped to it
        self.shipped: dict[bytes, Prepared] = {}
        self._reader: threading.Thread | None = None
        self.started_at = time.monotonic()
        self._joined = False

    def wait_ready(self) -> None:
        """Block until the worker listens (its first message).

        Raises:
            OSError: it exited or said nothing in ``START_TIMEOUT_S``.
        """
        self.sock.settimeout(START_TIMEOUT_S)
        try:
            first = read_batch(self.sock)
        except TimeoutError:
            first = None
        self.sock.settimeout(None)
        if not first or first[0][0] != "ready":
            code = self.process.poll()
            raise OSError(f"protocol worker {self.index} did not start (exit code {code})")

    def start(self) -> None:
        self._reader = threading.Thread(
            target=self._read, name=f"cql-link-{self.index}-in", daemon=True
        )
        self._reader.start()

    def join(self) -> None:
        """Wait for the worker to exit (killed past ``STOP_TIMEOUT_S``), then for the link."""
        if self._joined:
            return
        self._joined = True
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log.warning(
                "protocol worker %d did not stop in %ss: killed", self.index, STOP_TIMEOUT_S
            )
            self.process.kill()
            self.process.wait()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join()
        self.out.close()
        self.sock.close()

    # -- the reading thread -------------------------------------------------------------

    def _read(self) -> None:
        try:
            while True:
                batch = read_batch(self.sock)
                if batch is None:
                    break
                for message in batch:
                    try:
                        self._dispatch(message)
                    except Exception:  # a defect answers that request; the link goes on
                        log.exception("protocol worker message %r failed", message[0])
        except OSError:
            pass
        finally:  # the worker is gone: so are its connections
            for conn in list(self.sessions):
                self._close(conn)
        if not self.pool._closing:  # it died on its own
            self.pool.replace(self)

    def _dispatch(self, message: Message) -> None:
        kind = message[0]
        executor = self.server.executor
        if kind == "w":
            self._write(*message[1:])
        elif kind == "r":
            _, rid, conn, version, frame = message
            request = self._committed_read(frame)
            if request is not None:  # answered here: no hand-off to a pool thread
                self._request(rid, conn, version, frame, request)
            else:
                executor.submit(self._request, *message[1:])
        elif kind == "login":
            executor.submit(self._log_in, *message[1:])
        elif kind == "open":
            self._session(message[1])
            self.server.connects += 1
        elif kind == "close":
            executor.submit(self._close, message[1])
        else:
            raise ValueError(f"unknown message {kind!r}")

    def _session(self, conn: int) -> SessionRequests:
        found = self.sessions.get(conn)
        if found is None:
            anonymous = self.server.authenticator is None
            found = self.sessions[conn] = SessionRequests(self.server, anonymous=anonymous)
        return found

    def _close(self, conn: int) -> None:
        found = self.sessions.pop(conn, None)
        if found is not None:
            found.close()

    # -- the requests -------------------------------------------------------------------

    def _write(
        self,
        rid: int,
        conn: int,
        version: int,
        query_id: bytes,
        values: list[Any],
        timestamp_us: int | None,
    ) -> None:
        """A bound single-row write, to the combiner; answered once durable."""
        server = self.server
        started = time.perf_counter()
        server.requests_by_kind["EXECUTE"] = server.requests_by_kind.get("EXECUTE", 0) + 1
        session = self._session(conn).session
        combiner = server.combiner
        try:
            prepared = current_prepared(server.prepared, query_id, session)
            if prepared is None:
                raise UnpreparedId(query_id)
            shipped = self.shipped.get(query_id)
            if prepared is not shipped:
                if shipped is None or prepared.receivers_spec != shipped.receivers_spec:
                    self.shipped.pop(query_id, None)
                    self.out.put(("rebind", rid))
                    return
                self.shipped[query_id] = prepared  # recomputed, the same types
            access.check(
                server.coordinator, session.role, prepared.statement.statement, session.keyspace
            )
            if combiner is None:
                self.out.put(("rebind", rid))
                return
            done = combiner.submit(prepared.statement, values, timestamp_us)
        except CqlError as e:
            self._answer_error(rid, version, e, started)
            return
        done.add_done_callback(lambda f: self._written(rid, version, f, started))

    def _written(self, rid: int, version: int, done: Future[bool], started: float) -> None:
        error = done.exception()
        if error is None and not done.result():  # the combiner is closing: the long way
            self.out.put(("rebind", rid))
            return
        if error is None:
            note_request(self.server, "EXECUTE", VoidResult(), started)
            self.out.put(("ok", rid))
            return
        if not isinstance(error, CqlError):
            log.error("a combined write failed", exc_info=error)
            error = ServerError(f"{type(error).__name__}: {error}")
        self._answer_error(rid, version, error, started)

    def _answer_error(self, rid: int, version: int, error: CqlError, started: float) -> None:
        note_request(self.server, "EXECUTE", error, started)
        response = error_response(error)
        self.out.put(("body", rid, response.opcode, encode_body(version, response), None))

    def _committed_read(self, frame: Frame) -> Execute | None:
        """The EXECUTE in ``frame`` when it is a one-partition read the committed snapshot
        answers now (``one_partition_read``, and no acknowledged write left to apply: its
        read waits for nothing), so that this thread runs it: a millisecond of work, less
        than the hand-off to a pool thread and back costs on a busy machine; None: the
        pool runs it."""
        if frame.header.opcode != Opcode.EXECUTE:
            return None
        try:
            request = decode_request(frame).message
        except Exception:
            return None  # the pool answers what is wrong with it
        assert isinstance(request, Execute)
        prepared = self.server.prepared.get(request.query_id)
        coordinator = self.server.coordinator
        if prepared is None or not one_partition_read(coordinator, prepared):
            return None
        if coordinator.group_commit.flush_target() > coordinator.engine.committed_seq():
            return None  # the read would wait for the pipeline: not on the link's thread
        return request

    def _request(
        self, rid: int, conn: int, version: int, frame: Frame, decoded: Execute | None = None
    ) -> None:
        """Any other request, run as in one process (``decoded``: its frame's request,
        already decoded)."""
        server = self.server
        started = time.perf_counter()
        opcode = opcode_name(frame.header.opcode)
        server.requests_by_kind[opcode] = server.requests_by_kind.get(opcode, 0) + 1
        server.requests_serving += 1
        response: ResponseMessage
        outcome: ResponseMessage | CqlError
        request = None
        try:
            request = decoded if decoded is not None else decode_request(frame).message
            response = outcome = self._session(conn).run(request)  # type: ignore[arg-type]
        except Exception as e:
            response, outcome = failure_response(e)
        finally:
            server.requests_serving -= 1
        note_request(server, opcode, outcome, started)
        ship = None
        if isinstance(response, PreparedResult) or isinstance(request, Execute):
            query_id = (
                response.query_id if isinstance(response, PreparedResult) else request.query_id  # type: ignore[union-attr]
            )
            ship = self._ship(query_id)
        body = encode_body(version, response)
        self.out.put(("body", rid, response.opcode, body, ship))

    def _ship(self, query_id: bytes) -> tuple[bytes, Prepared] | None:
        """The prepared write ``query_id`` names, for the worker to bind (None: not a
        write the combiner takes, or not prepared)."""
        prepared = self.server.prepared.get(query_id)
        if prepared is None or not isinstance(
            prepared.statement.statement, ast.Insert | ast.Update | ast.Delete
        ):
            return None
        if self.shipped.get(query_id) is prepared:
            return None
        self.shipped[query_id] = prepared
        return query_id, dataclasses.replace(prepared, catalog=None)

    def _log_in(self, rid: int, conn: int, version: int, token: bytes | None) -> None:
        try:
            self._session(conn).log_in(token)
        except CqlError as e:
            response = error_response(e)
            self.out.put(("login", rid, (response.opcode, encode_body(version, response))))
            return
        self.out.put(("login", rid, None))


def one_partition_read(coordinator: Coordinator, prepared: Prepared) -> bool:
    """Whether ``prepared`` is a SELECT of one partition of a base table (each partition key
    column restricted by ``=``, no filtering): a read of a few rows of the committed
    snapshot, short enough to answer on the thread that received it."""
    stmt = prepared.statement.statement
    if not isinstance(stmt, ast.Select) or stmt.allow_filtering:
        return False
    try:
        schema = coordinator.table(stmt.table, prepared.statement.keyspace)
    except CqlError:
        return False
    if schema.log_of is not None or schema.keyspace in SYSTEM_KEYSPACES:
        return False
    fixed = {
        rel.columns[0]
        for rel in stmt.where
        if rel.operator == "=" and not rel.token and not rel.multi and rel.key is None
    }
    return bool(schema.partition_key) and all(c.name in fixed for c in schema.partition_key)


__all__ = ["WorkerPool", "one_partition_read"]
