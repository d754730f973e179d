"""A protocol worker of ``cqlcdc serve --workers N`` (started by ``worker_pool.WorkerPool``).

It listens on the server's port beside the other workers (``SO_REUSEPORT``) and serves
the protocol on the connections the kernel gives it: TLS, frames, compression, the
handshake, and the answers. A client's requests run in the coordinator's process, where
the data directory is (``worker_pool`` says what goes over the link): an EXECUTE of a prepared
single-row write is bound here, with the types of the statement as the coordinator
prepared it, and forwarded as values; every other request is forwarded as its frame. So
a statement means what it means with one process, and the coordinator's CPU goes to what
only it can do.

The worker lives as long as its link: when the coordinator asks it to stop, it stops
accepting, waits for its requests in flight to be answered, and exits; when the link
breaks (the coordinator died), it exits at once, answering nothing, since nothing it has
not answered was acknowledged.

    python -m cqlcdc.server.worker_process '<json config>'
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import signal
import socket
import sys
from typing import Any

from cqlcdc.errors import CqlError
from cqlcdc.server.combiner import combinable
from cqlcdc.server.frames import Frame
from cqlcdc.server.link import Message, pack, read_batch_async
from cqlcdc.server.requests import Execute
from cqlcdc.server.responses import EncodedBody, ResponseMessage
from cqlcdc.server.results import SchemaChange, VoidResult
from cqlcdc.server.service import ProtocolServer, tls_context
from cqlcdc.server.statements import Prepared, bind_values
from cqlcdc.server.worker_pool import shared_port

log = logging.getLogger(__name__)

MAX_PREPARED = 10_000  # as the coordinator's cache: past it, the worker starts over


class WorkerServer(ProtocolServer):
    """The protocol on this worker's connections; their requests go over the link."""

    def __init__(self, config: dict[str, Any], link: asyncio.StreamWriter) -> None:
        super().__init__(
            max_connections=config["max_connections"],
            max_in_flight=config["max_in_flight"],
            max_frame_bytes=config["max_frame_bytes"],
            max_body_bytes_in_flight=config["max_body_bytes_in_flight"],
            handshake_timeout_s=config["handshake_timeout_s"],
            idle_timeout_s=config["idle_timeout_s"],
            compression=tuple(config["compression"]),
            authenticator=config["authenticator"],
        )
        self._link = link
        self._outbox: list[Message] = []
        self._waiting: dict[int, asyncio.Future[Message]] = {}
        self._ids = itertools.count()
        self._conn_ids = itertools.count()
        # the prepared writes the coordinator shipped, by id: their EXECUTEs are bound here
        self.prepared: dict[bytes, Prepared] = {}

    def requests_for(self, *, anonymous: bool) -> ForwardedRequests:
        conn = next(self._conn_ids)
        self.send(("open", conn))
        return ForwardedRequests(self, conn)

    def send(self, message: Message) -> None:
        """Queue ``message``: what this turn of the event loop queues goes as one batch."""
        if not self._outbox:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outbox.append(message)

    def _flush(self) -> None:
        batch, self._outbox = self._outbox, []
        if batch:
            self._link.write(pack(batch))

    async def call(self, kind: str, *args: Any) -> Message:
        """Send ``(kind, rid, *args)`` and wait for the coordinator's reply to it."""
        rid = next(self._ids)
        reply: asyncio.Future[Message] = asyncio.get_running_loop().create_future()
        self._waiting[rid] = reply
        self.send((kind, rid, *args))
        return await reply

    async def read_link(self, reader: asyncio.StreamReader, stopping: asyncio.Event) -> bool:
        """Take the coordinator's messages until it asks to stop (True) or is gone."""
        while True:
            batch = await read_batch_async(reader)
            if batch is None:
                return False
            for message in batch:
                kind = message[0]
                if kind == "event":
                    self._schema_changed(message[1])
                elif kind == "stop":
                    stopping.set()
                else:
                    waiter = self._waiting.pop(message[1], None)
                    if waiter is not None and not waiter.done():
                        waiter.set_result(message)

    def _schema_changed(self, change: SchemaChange) -> None:
        self.prepared.clear()  # bound again with the types the coordinator ships next
        self.push_event(change)

    def keep(self, query_id: bytes, prepared: Prepared) -> None:
        if len(self.prepared) >= MAX_PREPARED:
            self.prepared.clear()
        self.prepared[query_id] = prepared


class ForwardedRequests:
    """One connection's ``Requests`` on a worker: run in the coordinator's process."""

    def __init__(self, server: WorkerServer, conn: int) -> None:
        self.server = server
        self.conn = conn

    async def run(self, version: int, frame: Frame, request: Any) -> ResponseMessage:
        server = self.server
        if isinstance(request, Execute):
            prepared = server.prepared.get(request.query_id)
            if prepared is not None:
                answer = await self._write(version, frame, request, prepared)
                if answer is not None:
                    return answer
        reply = await server.call("r", self.conn, version, frame)
        _, _, opcode, body, ship = reply
        if ship is not None:
            server.keep(*ship)
        return EncodedBody(opcode, body)

    async def _write(
        self, version: int, frame: Frame, request: Execute, prepared: Prepared
    ) -> ResponseMessage | None:
        """An EXECUTE of a shipped write, bound here; None: the long way (the
        coordinator decides: a value that does not bind, UNSET, a schema moved on)."""
        try:
            values = bind_values(prepared.receivers, request.params)
        except CqlError:
            return None
        if not combinable(prepared.statement.statement, values):
            return None
        reply = await self.server.call(
            "w", self.conn, version, request.query_id, values, request.params.timestamp_us
        )
        if reply[0] == "ok":
            return VoidResult()
        if reply[0] == "body":
            return EncodedBody(reply[2], reply[3])
        self.server.prepared.pop(request.query_id, None)  # "rebind"
        return None

    async def log_in(self, version: int, token: bytes | None) -> ResponseMessage | None:
        reply = await self.server.call("login", self.conn, version, token)
        refused = reply[2]
        return None if refused is None else EncodedBody(*refused)

    async def close(self) -> None:
        self.server.send(("close", self.conn))


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` beside the other workers (``SO_REUSEPORT``)."""
    sock = shared_port(host, port)
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def serve(config: dict[str, Any]) -> bool:
    """Serve until the coordinator says stop (True) or is gone (False)."""
    link_sock = socket.socket(fileno=config["link_fd"])
    reader, writer = await asyncio.open_unix_connection(sock=link_sock)
    server = WorkerServer(config, writer)
    tls = config["tls_files"]
    context = tls_context(*tls) if tls else None
    listener = await asyncio.start_server(
        server._accept,
        sock=listening_socket(config["host"], config["port"]),
        ssl=context,
        ssl_handshake_timeout=config["handshake_timeout_s"] if context is not None else None,
    )
    writer.write(pack([("ready", os.getpid())]))
    stopping = asyncio.Event()
    reading = asyncio.create_task(server.read_link(reader, stopping))
    stop = asyncio.create_task(stopping.wait())
    await asyncio.wait({reading, stop}, return_when=asyncio.FIRST_COMPLETED)
    if not stopping.is_set():
        return False  # the coordinator is gone
    listener.close()
    await listener.wait_closed()
    await server._close_connections()  # the link still answers their requests
    server._flush()
    await writer.drain()
    return True


def main(argv: list[str]) -> int:
    config = json.loads(argv[0])
    # a terminal's Ctrl-C (the whole process group) and a service manager's SIGTERM are the
    # coordinator's to act on: it stops the workers once their requests are answered
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(
        level=config.get("log_level", logging.WARNING),
        format=f"%(asctime)s %(levelname)s worker {config['index']} %(name)s: %(message)s",
    )
    stopped = asyncio.run(serve(config))
    if not stopped:
        os._exit(0)  # nothing to finish: what was not answered was not acknowledged
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
