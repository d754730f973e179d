"""One client connection: the handshake, then requests run on the coordinator's sessions.

Frames come in through the connection's ``Framing`` (plain, then v5 segments once STARTUP
is answered); the ``Handshake`` says which request may come when. Requests of one
connection run concurrently (a driver multiplexes by stream id), each where its
``Requests`` runs it (a thread of this process, or the coordinator's process for a
protocol worker) since statements block until durable; responses go out as they finish. A write is
acknowledged once it is durable in the ingest log, as Cassandra acknowledges once its
commit log has it: concurrent writes share one append (group commit), a crash replays
them, and every read waits until the writes acknowledged before it are applied. Prepared
statements are shared by all connections (drivers prepare on one connection and execute
on any), keyed by the id ``PreparedStatement`` gives them.
"""

from __future__ import annotations

import asyncio
import logging
import time

from cqlcdc.errors import CqlError, ProtocolError
from cqlcdc.server.contracts import Request, Transport
from cqlcdc.server.error_responses import error_response, failure_response
from cqlcdc.server.frames import Frame, Opcode
from cqlcdc.server.framing import FrameReader, Framing
from cqlcdc.server.handshake import MAX_HANDSHAKE_BODY_BYTES, Handshake, Phase
from cqlcdc.server.metrics import note_request, opcode_name
from cqlcdc.server.requests import (
    AuthResponse,
    Options,
    Register,
    Startup,
    decode_request,
)
from cqlcdc.server.responses import (
    EVENT_STREAM,
    AuthSuccess,
    Ready,
    ResponseMessage,
    SchemaChangeEvent,
    Supported,
    encode_response,
    supported_options,
)
from cqlcdc.server.results import ColumnSpec, SchemaChange

log = logging.getLogger(__name__)


class Connection:
    """Serves one TCP connection until the client closes it or breaks the protocol."""

    def __init__(
        self, server: Transport, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.server = server
        self.writer = writer
        # until the client is logged in (READY) a frame can only be small: an unknown
        # client cannot make the server buffer large bodies
        self.framing = Framing(max_body_bytes=min(MAX_HANDSHAKE_BODY_BYTES, server.max_frame_bytes))
        self.handshake = Handshake(
            authenticator=server.authenticator, compression=server.compression
        )
        self.frames = FrameReader(reader, self.framing, server.bodies)
        self.accepted_at = asyncio.get_running_loop().time()
        # without an authenticator every client is anonymous (no role statements)
        self.requests = server.requests_for(anonymous=server.authenticator is None)
        self.events: set[str] = set()
        self.in_flight = asyncio.Semaphore(server.max_in_flight)
        self.tasks: set[asyncio.Task[None]] = set()

    @property
    def logged_in(self) -> bool:
        """Whether the handshake is over (READY, or AUTH_SUCCESS with ``--auth``)."""
        return self.handshake.phase is Phase.READY

    def evict(self) -> None:
        """Close at once (a connection still in its handshake, to make room for a new
        client); ``serve`` then ends as if the client had gone."""
        self.writer.transport.abort()

    async def serve(self) -> None:
        try:
            while True:
                try:
                    frame = await self._next_frame()
                except ProtocolError as e:  # the framing is broken: say why, then close
                    version, stream = self.handshake.reply_to(self.framing.rejected)
                    await self._send(version, stream, error_response(e))
                    return
                except TimeoutError:
                    return
                if frame is None or not await self._dispatch(frame):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            # requests in flight finish (their writes commit) even though no one will read
            # the answers; each one's errors stay its own
            await asyncio.gather(*self.tasks, return_exceptions=True)
            self.frames.close()
            await self.requests.close()
            self.writer.close()

    async def _next_frame(self) -> Frame | None:
        """The next frame, within the handshake's time while logging in and the idle time
        after (no frame and no request running for that long closes the connection).

        Raises:
            TimeoutError: the client did not log in, or stayed idle, for too long.
        """
        server = self.server
        loop = asyncio.get_running_loop()
        if not self.logged_in:
            left_s = self.accepted_at + server.handshake_timeout_s - loop.time()
            try:
                if left_s <= 0:
                    raise TimeoutError
                return await asyncio.wait_for(self.frames.read(), left_s)
            except TimeoutError:
                log.debug("closing a connection not logged in in %ss", server.handshake_timeout_s)
                raise
        idle_s = server.idle_timeout_s
        if not idle_s:
            return await self.frames.read()
        while True:  # FrameReader.read is safe to cancel: nothing read is lost
            try:
                return await asyncio.wait_for(self.frames.read(), idle_s)
            except TimeoutError:
                if not self.tasks:
                    log.debug("closing a connection idle for %ss", idle_s)
                    raise

    async def _dispatch(self, frame: Frame) -> bool:
        """Handle one request frame; False closes the connection (a protocol error).

        The frame's body holds the server's body budget until it is answered here, or,
        for a request run by a worker, until it has run."""
        running = False
        try:
            running, keep = await self._start(frame)
            return keep
        finally:
            if not running:
                self.server.bodies.release(len(frame.body))

    async def _start(self, frame: Frame) -> tuple[bool, bool]:
        """Answer a handshake request, or start a request in a worker: ``(whether a
        worker runs it, whether the connection goes on)``."""
        header = frame.header
        version = self.handshake.reply_version(header)
        started = time.perf_counter()
        opcode = opcode_name(header.opcode)
        server = self.server
        server.requests_by_kind[opcode] = server.requests_by_kind.get(opcode, 0) + 1
        try:
            self.handshake.check(header)
            request = decode_request(frame)
        except ProtocolError as e:
            note_request(server, opcode, e, started)
            await self._send(version, header.stream, error_response(e))
            return False, False
        message = request.message
        if isinstance(message, Startup | Options | Register):
            try:
                response = self._handshake_step(message, header.version)
            except CqlError as e:
                response = error_response(e)
                closing = isinstance(e, ProtocolError)
            else:
                closing = False
            note_request(server, opcode, response, started)
            await self._send(self.handshake.reply_version(header), header.stream, response)
            if header.opcode == Opcode.STARTUP:  # answered: v5 switches to segments now
                self.handshake.switch_framing(self.framing)
                self._lift_limit()
            return False, not closing
        if isinstance(message, AuthResponse):
            response = await self._log_in(version, message)
            note_request(server, opcode, response, started)
            await self._send(version, header.stream, response)
            return False, True
        await self.in_flight.acquire()
        server.requests_serving += 1
        task = asyncio.create_task(self._run(version, frame, message, (opcode, started)))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return True, True

    def _handshake_step(
        self, message: Startup | Options | Register, version: int
    ) -> ResponseMessage:
        if isinstance(message, Options):
            return Supported(supported_options(compression=self.server.compression))
        if isinstance(message, Startup):
            response = self.handshake.startup(message, version)
            if message.compression is not None:
                self.framing.use_compression(message.compression.lower())
            return response
        self.events.update(message.events)
        return Ready()

    async def _log_in(self, version: int, message: AuthResponse) -> ResponseMessage:
        """AUTH_SUCCESS and the session's role, or the AUTHENTICATION_ERROR (the client
        may try again). Awaited before the next frame is read: nothing else is accepted
        before a login succeeds."""
        refused = await self.requests.log_in(version, message.token)
        if refused is not None:
            return refused
        self.handshake.authenticated()
        self._lift_limit()
        return AuthSuccess()

    def _lift_limit(self) -> None:
        """Once logged in, frames up to the server's limit are taken."""
        if self.logged_in:
            self.framing.limit_bodies(self.server.max_frame_bytes)

    async def _run(
        self, version: int, frame: Frame, message: Request, arrival: tuple[str, float]
    ) -> None:
        outcome: ResponseMessage | CqlError
        try:
            response = outcome = await self.requests.run(version, frame, message)
        except Exception as e:
            response, outcome = failure_response(e)
        finally:
            self.in_flight.release()
            self.server.bodies.release(len(frame.body))  # the request has run: its body is gone
            self.server.requests_serving -= 1
        # counted before it is sent: a client that has its answer finds it counted
        note_request(self.server, arrival[0], outcome, arrival[1])
        await self._send(version, frame.header.stream, response)

    async def _send(self, version: int, stream: int, response: ResponseMessage) -> None:
        """Send a response; a client that went away just does not get it."""
        try:
            self.write_now(encode_response(version, stream, response))
            await self.writer.drain()
        except ConnectionError:
            pass

    def write_now(self, frame: bytes) -> None:
        """Write one encoded frame (in segments in v5); on the event loop's thread only."""
        self.writer.write(self.framing.encode([frame]))

    def push_event(self, change: SchemaChange) -> None:
        """Send a SCHEMA_CHANGE event if the client registered for it (event loop thread)."""
        version = self.handshake.version
        if "SCHEMA_CHANGE" in self.events and version is not None:
            self.write_now(encode_response(version, EVENT_STREAM, SchemaChangeEvent(change)))


__all__ = ["ColumnSpec", "Connection"]
