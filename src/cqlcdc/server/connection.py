"""One client connection: the handshake, then requests run on the coordinator's sessions.

Frames come in through the connection's ``Framing`` (plain, then v5 segments once STARTUP
is answered); the ``Handshake`` says which request may come when. Requests of one
connection run concurrently (a driver multiplexes by stream id), each in a worker thread
since statements block until durable; responses go out as they finish. A write is
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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cqlcdc import access
from cqlcdc.cql import ast, parse_statement, with_keyspace
from cqlcdc.cql.render import render
from cqlcdc.errors import CqlError, InvalidRequest, ProtocolError, ServerError
from cqlcdc.server.combiner import combinable
from cqlcdc.server.error_responses import error_response
from cqlcdc.server.frames import Frame, Opcode
from cqlcdc.server.framing import FrameReader, Framing
from cqlcdc.server.handshake import MAX_HANDSHAKE_BODY_BYTES, Handshake, Phase
from cqlcdc.server.login import log_in
from cqlcdc.server.metrics import log_schema_change, note_request, opcode_name
from cqlcdc.server.requests import (
    AuthResponse,
    Batch,
    Execute,
    Options,
    Prepare,
    Query,
    QueryParams,
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
from cqlcdc.server.results import (
    ColumnSpec,
    PreparedResult,
    SchemaChange,
    SchemaChangeResult,
    SetKeyspaceResult,
    VoidResult,
)
from cqlcdc.server.statements import (
    Cursor,
    Prepared,
    UnpreparedId,
    batch_statement,
    bind_values,
    current_prepared,
    describe_rows,
    open_ended,
    page,
    pk_indexes,
    prepare_in,
    schema_change,
    with_default_timestamp,
    without_unset,
)
from cqlcdc.session import PreparedStatement, Session
from cqlcdc.writes import literal_template

if TYPE_CHECKING:
    from cqlcdc.server.service import CqlServer

log = logging.getLogger(__name__)

MAX_LITERAL_TEMPLATES = 1024  # distinct shapes of literal writes kept as prepared ones

Handler = Callable[[Any], ResponseMessage]


class Connection:
    """Serves one TCP connection until the client closes it or breaks the protocol."""

    def __init__(
        self, server: CqlServer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
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
        self.session = Session(server.coordinator, anonymous=server.authenticator is None)
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
            self.session.close()
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
            response = await self._log_in(message)
            note_request(server, opcode, response, started)
            await self._send(version, header.stream, response)
            return False, True
        handlers: dict[type, Handler] = {
            Query: self._query,
            Prepare: self._prepare,
            Execute: self._execute,
            Batch: self._batch,
        }
        await self.in_flight.acquire()
        server.requests_serving += 1
        task = asyncio.create_task(
            self._run(
                version,
                header.stream,
                handlers[type(message)],
                message,
                len(frame.body),
                (opcode, started),
            )
        )
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

    async def _log_in(self, message: AuthResponse) -> ResponseMessage:
        """AUTH_SUCCESS and the session's role, or the AUTHENTICATION_ERROR (the client
        may try again). Awaited before the next frame is read: nothing else is accepted
        before a login succeeds."""
        loop = asyncio.get_running_loop()
        roles = self.server.coordinator.roles
        try:
            role = await loop.run_in_executor(self.server.executor, log_in, roles, message.token)
        except CqlError as e:
            return error_response(e)
        self.session.role = role
        self.handshake.authenticated()
        self._lift_limit()
        return AuthSuccess()

    def _lift_limit(self) -> None:
        """Once logged in, frames up to the server's limit are taken."""
        if self.logged_in:
            self.framing.limit_bodies(self.server.max_frame_bytes)

    async def _run(
        self,
        version: int,
        stream: int,
        handler: Handler,
        message: Any,
        body_bytes: int,
        arrival: tuple[str, float],
    ) -> None:
        loop = asyncio.get_running_loop()
        outcome: ResponseMessage | CqlError
        try:
            response = outcome = await loop.run_in_executor(self.server.executor, handler, message)
        except CqlError as e:
            response, outcome = error_response(e), e
        except Exception as e:  # a defect: the client gets a server error, we keep serving
            log.exception("request failed")
            outcome = ServerError(f"{type(e).__name__}: {e}")
            response = error_response(outcome)
        finally:
            self.in_flight.release()
            self.server.bodies.release(body_bytes)  # the request has run: its body is gone
            self.server.requests_serving -= 1
        # counted before it is sent: a client that has its answer finds it counted
        note_request(self.server, arrival[0], outcome, arrival[1])
        await self._send(version, stream, response)

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

    # -- requests (worker threads) -------------------------------------------------------

    def _query(self, request: Query) -> ResponseMessage:
        params = request.params
        if params.values:
            prepared = self._prepared(request.query, params.keyspace)
            values = bind_values(prepared.receivers, params)
            if self._combined(prepared.statement, values, params.timestamp_us):
                return VoidResult()
            return self._result(prepared, values, params)
        if params.keyspace is not None:
            statement = prepare_in(self.session, request.query, params.keyspace).statement
        else:
            statement = parse_statement(request.query)
        literal = self._literal(statement, params.keyspace)
        if literal is not None and self._combined(*literal, params.timestamp_us):
            return VoidResult()
        return self._result(statement, None, params)

    def _literal(
        self, statement: ast.Statement, keyspace: str | None
    ) -> tuple[PreparedStatement, list[Any]] | None:
        """A write with literal values as the prepared write it means and its values, so
        that the combiner can take it with the other connections' writes (the drivers'
        simple statements: the Python driver puts the values in the text)."""
        if self.server.combiner is None or not isinstance(
            statement, ast.Insert | ast.Update | ast.Delete
        ):
            return None
        keyspace = keyspace or self.session.keyspace
        found = literal_template(self.server.coordinator, statement, keyspace)
        if found is None:
            return None
        template, values = found
        templates = self.server.literal_templates
        prepared = templates.get((keyspace, template))
        if prepared is None:
            if len(templates) >= MAX_LITERAL_TEMPLATES:  # many shapes: start over
                templates.clear()
            # as a statement prepared in the keyspace: its tables stay bound to it
            bound = with_keyspace(template, keyspace)
            prepared = PreparedStatement(render(template), bound, keyspace)
            templates[(keyspace, template)] = prepared
        return prepared, list(values)

    def _combined(
        self, statement: PreparedStatement, values: list[Any], timestamp_us: int | None
    ) -> bool:
        """Whether the combiner took the write (acknowledged with other connections')."""
        combiner = self.server.combiner
        if combiner is None or not combinable(statement.statement, values):
            return False
        # the combiner writes for every connection: this one's role is checked here
        access.check(
            self.server.coordinator, self.session.role, statement.statement, self.session.keyspace
        )
        return bool(combiner.submit(statement, values, timestamp_us).result())

    def _prepare(self, request: Prepare) -> ResponseMessage:
        prepared = self._prepared(request.query, request.keyspace)
        return PreparedResult(
            prepared.statement.query_id,
            prepared.receivers_spec,
            pk_indexes(prepared.receivers),
            prepared.result,
        )

    def _execute(self, request: Execute) -> ResponseMessage:
        prepared = current_prepared(self.server.prepared, request.query_id, self.session)
        if prepared is None:
            raise UnpreparedId(request.query_id)
        values = bind_values(prepared.receivers, request.params)
        if self._combined(prepared.statement, values, request.params.timestamp_us):
            return VoidResult()
        return self._result(
            prepared, values, request.params, metadata_id=request.result_metadata_id
        )

    def _batch(self, request: Batch) -> ResponseMessage:
        batch, values = batch_statement(self.server.prepared, self.session, request)
        if batch is None:
            return VoidResult()
        rows = self.session.execute(batch, values, wait=False)
        if rows.column_names:  # a conditional batch: [applied] and the old rows
            cursor = Cursor(rows, 0, self._result_table(batch))
            return page(self.server.cursors, cursor, QueryParams(), None)
        return VoidResult()

    def _prepared(self, query: str, keyspace: str | None) -> Prepared:
        statement = prepare_in(self.session, query, keyspace)
        known = current_prepared(self.server.prepared, statement.query_id, self.session)
        if known is not None:
            return known
        prepared = Prepared.of(statement, self.session)
        self.server.prepared[statement.query_id] = prepared
        return prepared

    def _result(
        self,
        query: ast.Statement | Prepared,
        values: list[Any] | None,
        params: QueryParams,
        *,
        metadata_id: bytes | None = None,
    ) -> ResponseMessage:
        prepared = query if isinstance(query, Prepared) else None
        stmt = prepared.statement.statement if prepared is not None else query
        assert isinstance(stmt, ast.Statement)
        if params.paging_state is not None:
            if not isinstance(stmt, ast.Select):
                raise InvalidRequest("A paging state is only valid for a SELECT")
            cursor = self.server.cursors.take(params.paging_state)
            return page(self.server.cursors, cursor, params, metadata_id)
        run: ast.Statement | PreparedStatement = (
            prepared.statement if prepared is not None else stmt
        )
        if prepared is not None and values is not None:
            pruned, values = without_unset(stmt, values, prepared.receivers)
            if pruned is None:
                return VoidResult()
            if pruned is not stmt:
                run = stmt = pruned
        if params.timestamp_us is not None and isinstance(
            stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch
        ):
            run = with_default_timestamp(self.session, stmt, params.timestamp_us)
        # a write is acknowledged once durable in the ingest log (the commit log): its
        # outcome is fixed then, a crash replays it, and every read waits for it to be
        # applied; writes whose outcome depends on the state (Session._write) still wait
        rows = self.session.execute(run, values, wait=False)
        if isinstance(stmt, ast.UseKeyspace):
            return SetKeyspaceResult(stmt.name)
        change = schema_change(stmt, self.session.keyspace)
        if change is not None:
            log_schema_change(change, self.session.role)
            self.server.broadcast_schema_change(change)
            return SchemaChangeResult(change)
        if isinstance(stmt, ast.Describe):
            return describe_rows(self.session, stmt, rows)
        if rows.column_names:
            schema = self._result_table(stmt)
            cursor = Cursor(rows, 0, schema, open_ended(stmt, rows, values))
            return page(self.server.cursors, cursor, params, metadata_id)
        return VoidResult()

    def _result_table(self, stmt: ast.Statement) -> tuple[str, str]:
        """The (keyspace, table) result columns are named under."""
        if isinstance(stmt, ast.Batch) and stmt.statements:  # a conditional batch's rows
            stmt = stmt.statements[0]
        if isinstance(stmt, ast.Select | ast.Insert | ast.Update | ast.Delete):
            schema = self.session.coordinator.table(stmt.table, self.session.keyspace)
            return schema.keyspace, schema.name
        return "", ""


__all__ = ["ColumnSpec", "Connection"]
