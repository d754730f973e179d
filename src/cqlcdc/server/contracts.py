"""What the server's parts need of the server that runs them, as Protocols.

A connection, the statement handlers, the metrics and the worker pool each read a few
attributes of the server they serve. ``service.CqlServer`` (and a worker's
``worker.WorkerServer``) is that server, and it imports all of them; so they name these
contracts, never the concrete server, and ``cqlcdc.server`` has no import circle (an
import-linter contract in ``pyproject.toml`` keeps it so).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from cqlcdc.server.requests import Batch, Execute, Prepare, Query

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from cqlcdc.coordinator import Coordinator
    from cqlcdc.cql import ast
    from cqlcdc.server.budget import BodyBudget
    from cqlcdc.server.combiner import WriteCombiner
    from cqlcdc.server.frames import Frame
    from cqlcdc.server.responses import ResponseMessage
    from cqlcdc.server.results import SchemaChange
    from cqlcdc.server.statements import Cursors, PreparedCache
    from cqlcdc.session import PreparedStatement

Request = Query | Prepare | Execute | Batch


class Requests(Protocol):
    """Where a connection's requests run: its session in this process
    (``executing.InProcessRequests``), or in the coordinator's process for a protocol worker
    (``worker.ForwardedRequests``)."""

    async def run(self, version: int, frame: Frame, request: Request) -> ResponseMessage:
        """The response to ``request`` (decoded from ``frame``).

        Raises:
            CqlError: what the client is answered with an ERROR.
        """
        ...

    async def log_in(self, version: int, token: bytes | None) -> ResponseMessage | None:
        """None once logged in as the role ``token`` names, else the error to answer."""
        ...

    async def close(self) -> None:
        """The connection is gone and its requests have run."""
        ...


class Transport(Protocol):
    """What a connection reads and counts of the server that accepted it, whichever process
    runs its statements (``service.ProtocolServer``): its limits, the handshake's settings,
    the body budget and the transport counters (ScyllaDB's ``scylla_transport_*``)."""

    max_connections: int
    max_in_flight: int
    max_frame_bytes: int
    bodies: BodyBudget
    handshake_timeout_s: float
    idle_timeout_s: float | None
    compression: tuple[str, ...]
    authenticator: str | None
    connects: int
    requests_served: int
    requests_serving: int
    requests_by_kind: dict[str, int]

    def requests_for(self, *, anonymous: bool) -> Requests:
        """Where a new connection's requests run."""
        ...


class StatementHost(Protocol):
    """What the statement handlers share across connections (``service.CqlServer``): the
    coordinator, the prepared statements, the paging cursors and the write combiner."""

    coordinator: Coordinator
    combiner: WriteCombiner | None
    prepared: PreparedCache
    cursors: Cursors
    literal_templates: dict[tuple[str | None, ast.Statement], PreparedStatement]

    def broadcast_schema_change(self, change: SchemaChange) -> None:
        """Push a schema change to every connection registered for its events."""
        ...


class Node(Transport, StatementHost, Protocol):
    """The whole server of the coordinator's process, as its metrics and its protocol
    workers read it."""

    tls_files: tuple[str, str] | None
    executor: ThreadPoolExecutor

    def connection_count(self) -> int:
        """The open client connections, its protocol workers' included."""
        ...


__all__ = ["Node", "Request", "Requests", "StatementHost", "Transport"]
