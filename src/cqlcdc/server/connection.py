"""One client connection: the handshake, then requests run on the coordinator's sessions.

Requests of one connection run concurrently (a driver multiplexes by stream id), each in a
worker thread since statements block until committed; responses go out as they finish.
Prepared statements are shared by all connections (drivers prepare on one connection and
execute on any), keyed by the id ``PreparedStatement`` gives them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import CqlError, InvalidRequest, ProtocolError, ServerError, Unprepared
from cqlcdc.server import wire
from cqlcdc.server.binds import Receiver, bind_receivers
from cqlcdc.server.typecodes import type_option
from cqlcdc.session import PreparedStatement, Rows, Session
from cqlcdc.types import native_type

if TYPE_CHECKING:
    from cqlcdc.server.service import CqlServer

log = logging.getLogger(__name__)
CQL_VERSION = "3.4.5"


class UnpreparedId(Unprepared):
    """EXECUTE of an id this server does not know (the driver re-prepares and retries)."""

    def __init__(self, query_id: bytes) -> None:
        super().__init__(f"Prepared query with ID {query_id.hex()} not found")
        self.query_id = query_id


@dataclass(frozen=True, slots=True)
class Cursor:
    """The rows of a paged SELECT and where its next page starts."""

    rows: Rows
    offset: int


class Cursors:
    """Open cursors by paging state, oldest evicted first past ``limit`` (a client that
    pages too late gets an InvalidRequest and runs its query again)."""

    def __init__(self, limit: int = 256) -> None:
        self.limit = limit
        self._open: OrderedDict[bytes, Cursor] = OrderedDict()
        self._lock = threading.Lock()

    def put(self, cursor: Cursor) -> bytes:
        state = os.urandom(16)
        with self._lock:
            self._open[state] = cursor
            while len(self._open) > self.limit:
                self._open.popitem(last=False)
        return state

    def take(self, state: bytes) -> Cursor:
        with self._lock:
            cursor = self._open.pop(state, None)
        if cursor is None:
            raise InvalidRequest("Invalid or expired paging state: run the query again")
        return cursor


@dataclass(frozen=True, slots=True)
class Prepared:
    """A prepared statement with what EXECUTE needs to decode its values."""

    statement: PreparedStatement
    receivers: tuple[Receiver, ...]
    result: tuple[wire.ColumnSpec, ...]


class Connection:
    """Serves one TCP connection until the client closes it or breaks the protocol."""

    def __init__(
        self,
        server: CqlServer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        executor: Executor,
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.executor = executor
        self.session: Session = server.coordinator.session()
        self.version: int | None = None
        self.started = False
        self.events: set[str] = set()
        self.in_flight = asyncio.Semaphore(server.max_in_flight)
        self.tasks: set[asyncio.Task[None]] = set()

    async def serve(self) -> None:
        try:
            while True:
                header = await self.reader.readexactly(wire.HEADER_SIZE)
                try:
                    version, flags, stream, opcode, length = wire.decode_header(header)
                except ProtocolError as e:
                    await self._send(wire.SUPPORTED_VERSIONS[-1], stream_of(header), e)
                    return
                if version not in wire.SUPPORTED_VERSIONS:
                    # answered in a version the client reads, with the words drivers look for
                    err = ProtocolError(wire.unsupported_version_message(version))
                    await self._send(wire.SUPPORTED_VERSIONS[-1], stream, err)
                    return
                if self.version is not None and version != self.version:
                    err = ProtocolError(f"Protocol version {version} after {self.version}")
                    await self._send(self.version, stream, err)
                    return
                body = await self.reader.readexactly(length)
                if flags & 0x01:  # compressed: we advertise no compression
                    await self._send(version, stream, ProtocolError("Compression not enabled"))
                    return
                self.version = version
                if not await self._dispatch(stream, opcode, body):
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            # requests in flight finish (their writes commit) even though no one will read
            # the answers; each one's errors stay its own
            await asyncio.gather(*self.tasks, return_exceptions=True)
            self.session.close()
            self.writer.close()

    async def _dispatch(self, stream: int, opcode: int, body: bytes) -> bool:
        """Handle one request; False closes the connection (a protocol error)."""
        assert self.version is not None
        version = self.version
        if opcode == wire.OP_OPTIONS:
            supported = {"CQL_VERSION": [CQL_VERSION], "COMPRESSION": []}
            await self._reply(stream, wire.OP_SUPPORTED, wire.supported_body(supported))
            return True
        if opcode == wire.OP_STARTUP:
            try:
                startup = wire.decode(body, wire.read_startup)
                if startup.get("COMPRESSION"):
                    raise ProtocolError(f"Unknown compression algorithm: {startup['COMPRESSION']}")
            except ProtocolError as e:
                await self._send(version, stream, e)
                return False
            self.started = True
            await self._reply(stream, wire.OP_READY, b"")
            return True
        if not self.started:
            err = ProtocolError(f"Unexpected message {opcode:#04x}, expecting STARTUP or OPTIONS")
            await self._send(version, stream, err)
            return False
        if opcode == wire.OP_REGISTER:
            try:
                self.events.update(wire.decode(body, wire.read_register))
            except ProtocolError as e:
                await self._send(version, stream, e)
                return False
            await self._reply(stream, wire.OP_READY, b"")
            return True
        handlers: dict[int, Callable[[bytes], tuple[int, bytes]]] = {
            wire.OP_QUERY: self._query,
            wire.OP_PREPARE: self._prepare,
            wire.OP_EXECUTE: self._execute,
            wire.OP_BATCH: self._batch,
        }
        handler = handlers.get(opcode)
        if handler is None:
            await self._send(version, stream, ProtocolError(f"Unknown opcode {opcode:#04x}"))
            return False
        await self.in_flight.acquire()
        task = asyncio.create_task(self._run(stream, handler, body))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return True

    async def _run(
        self, stream: int, handler: Callable[[bytes], tuple[int, bytes]], body: bytes
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            opcode, out = await loop.run_in_executor(self.executor, handler, body)
        except CqlError as e:
            opcode, out = wire.OP_ERROR, wire.error_body(e)
        except Exception as e:  # a defect: the client gets a server error, we keep serving
            log.exception("request failed")
            opcode, out = wire.OP_ERROR, wire.error_body(ServerError(f"{type(e).__name__}: {e}"))
        finally:
            self.in_flight.release()
        await self._reply(stream, opcode, out)

    async def _reply(self, stream: int, opcode: int, body: bytes) -> None:
        assert self.version is not None
        await self._write(wire.encode_header(self.version, 0, stream, opcode, len(body)) + body)

    async def _send(self, version: int, stream: int, err: CqlError) -> None:
        body = wire.error_body(err)
        await self._write(wire.encode_header(version, 0, stream, wire.OP_ERROR, len(body)) + body)

    async def _write(self, frame: bytes) -> None:
        """Send a frame; a client that went away just does not get it."""
        try:
            self.writer.write(frame)
            await self.writer.drain()
        except ConnectionError:
            pass

    # -- requests (worker threads) -------------------------------------------------------

    def _query(self, body: bytes) -> tuple[int, bytes]:
        request = wire.decode(body, wire.read_query)
        params = request.params
        if params.values:
            prepared = self._prepare_statement(request.query)
            values = _decode_values(prepared.receivers, params)
            return self._result(prepared.statement, values, params)
        return self._result(request.query, None, params)

    def _prepare(self, body: bytes) -> tuple[int, bytes]:
        query = wire.decode(body, wire.read_prepare)
        prepared = self._prepare_statement(query)
        binds = [
            wire.ColumnSpec(r.table.keyspace, r.table.name, r.name, type_option(r.type))
            for r in prepared.receivers
        ]
        pk_indexes = _pk_indexes(prepared.receivers)
        return wire.OP_RESULT, wire.prepared_result(
            prepared.statement.query_id, binds, pk_indexes, prepared.result
        )

    def _execute(self, body: bytes) -> tuple[int, bytes]:
        request = wire.decode(body, wire.read_execute)
        prepared = self.server.prepared.get(request.query_id)
        if prepared is None:
            raise UnpreparedId(request.query_id)
        values = _decode_values(prepared.receivers, request.params)
        return self._result(prepared.statement, values, request.params)

    def _batch(self, body: bytes) -> tuple[int, bytes]:
        request = wire.decode(body, wire.read_batch)
        statements: list[ast.ModificationStatement] = []
        values: list[Any] = []
        for child in request.children:
            if child.query_id is not None:
                prepared = self.server.prepared.get(child.query_id)
                if prepared is None:
                    raise UnpreparedId(child.query_id)
                stmt = prepared.statement.statement
                receivers = prepared.receivers
            else:
                assert child.query is not None
                stmt = parse_statement(child.query)
                receivers = tuple(self._receivers(stmt)) if child.values else ()
            if not isinstance(stmt, ast.Insert | ast.Update | ast.Delete):
                raise InvalidRequest("Only INSERT, UPDATE and DELETE can be in a BATCH")
            statements.append(_shift_markers(stmt, len(values)))
            values += _decode_values(receivers, wire.QueryParams(values=child.values))
        kind = {0: "LOGGED", 1: "UNLOGGED", 2: "COUNTER"}.get(request.kind)
        if kind is None:
            raise ProtocolError(f"Unknown BATCH type {request.kind}")
        batch = ast.Batch(kind, tuple(statements))  # type: ignore[arg-type]
        self.session.execute(self._with_default_timestamp(batch, request.params), values)
        return wire.OP_RESULT, wire.void_result()

    def _with_default_timestamp(
        self, stmt: ast.ModificationStatement | ast.Batch, params: wire.QueryParams
    ) -> ast.ModificationStatement | ast.Batch:
        """The write with the request's default timestamp (the drivers' client-side
        timestamp, flag 0x20) as ``USING TIMESTAMP`` of each statement that has none, as
        ScyllaDB applies it (``query_options::get_timestamp``); a batch's own ``USING
        TIMESTAMP`` wins. Without this a client's chosen timestamp would be replaced by the
        server's clock, changing which write wins. Writes to counter tables keep the server's
        clock (a counter takes no ``USING TIMESTAMP``)."""
        ts = params.timestamp_us
        if ts is None:
            return stmt
        if isinstance(stmt, ast.Batch):
            if stmt.using.timestamp is not None:
                return stmt
            children = tuple(self._timestamped(s, ts) for s in stmt.statements)
            return dataclasses.replace(stmt, statements=children)
        return self._timestamped(stmt, ts)

    def _timestamped(self, stmt: ast.ModificationStatement, ts: int) -> ast.ModificationStatement:
        if stmt.using.timestamp is not None:
            return stmt
        try:
            schema = self.session.coordinator.table(stmt.table, self.session.keyspace)
        except CqlError:
            return stmt  # the write reports the unknown table itself
        if any(c.type.is_counter for c in schema.columns):
            return stmt
        using = dataclasses.replace(stmt.using, timestamp=ast.Constant("integer", str(ts)))
        return dataclasses.replace(stmt, using=using)

    def _prepare_statement(self, query: str) -> Prepared:
        statement = self.session.prepare(query)
        known: Prepared | None = self.server.prepared.get(statement.query_id)
        if known is not None:
            return known
        receivers = tuple(self._receivers(statement.statement))
        result = self._result_columns(statement.statement)
        prepared = Prepared(statement, receivers, result)
        self.server.prepared[statement.query_id] = prepared
        return prepared

    def _receivers(self, stmt: ast.Statement) -> list[Receiver]:
        c, ks = self.session.coordinator, self.session.keyspace
        return bind_receivers(stmt, lambda name: c.table(name, ks))

    def _result_columns(self, stmt: ast.Statement) -> tuple[wire.ColumnSpec, ...]:
        """The columns a prepared SELECT returns (empty for other statements)."""
        if not isinstance(stmt, ast.Select):
            return ()
        schema = self.session.coordinator.table(stmt.table, self.session.keyspace)
        from cqlcdc.storage.select import result_columns

        return tuple(
            wire.ColumnSpec(schema.keyspace, schema.name, name, type_option(ctype))
            for name, ctype in result_columns(schema, stmt)
        )

    def _result(
        self, query: str | PreparedStatement, values: list[Any] | None, params: wire.QueryParams
    ) -> tuple[int, bytes]:
        stmt = query.statement if isinstance(query, PreparedStatement) else parse_statement(query)
        if params.paging_state is not None:
            if not isinstance(stmt, ast.Select):
                raise InvalidRequest("A paging state is only valid for a SELECT")
            cursor = self.server.cursors.take(params.paging_state)
            return wire.OP_RESULT, self._page(stmt, cursor, params.page_size)
        run: str | ast.Statement | PreparedStatement = query
        if params.timestamp_us is not None and isinstance(
            stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch
        ):
            timed = self._with_default_timestamp(stmt, params)
            run = (
                PreparedStatement(query.query_string, timed, query.keyspace)
                if isinstance(query, PreparedStatement)
                else timed
            )
        rows = self.session.execute(run, values)
        if isinstance(stmt, ast.UseKeyspace):
            return wire.OP_RESULT, wire.set_keyspace_result(stmt.name)
        change = _schema_change(stmt, self.session.keyspace)
        if change is not None:
            self.server.broadcast_schema_change(*change)
            return wire.OP_RESULT, wire.schema_change_result(*change)
        if isinstance(stmt, ast.Describe):
            return wire.OP_RESULT, self._describe(stmt, rows)
        if isinstance(stmt, ast.Select):
            return wire.OP_RESULT, self._page(stmt, Cursor(rows, 0), params.page_size)
        return wire.OP_RESULT, wire.void_result()

    def _describe(self, stmt: ast.Describe, rows: Rows) -> bytes:
        """Server-side DESCRIBE as Cassandra 4 answers it (what cqlsh 6 prints): rows of
        ``keyspace_name, type, name, create_statement``."""
        catalog, current = self.session.catalog, self.session.keyspace
        listing: list[tuple[str, str, str, str]] = []
        if stmt.kind == "KEYSPACES":
            listing = [(k.name, "keyspace", k.name, "") for k in catalog.keyspaces()]
        elif stmt.kind in ("TABLES", "TYPES"):
            spaces = [current] if current else [k.name for k in catalog.keyspaces()]
            for ks in spaces:
                if stmt.kind == "TABLES":
                    listing += [(ks, "table", t.name, "") for t in catalog.tables(ks)]
                else:
                    listing += [(ks, "type", u.name, "") for u in catalog.user_types(ks)]
        else:
            name = stmt.name
            owner = (name.keyspace if stmt.kind != "KEYSPACE" else name.name) if name else None
            text = rows.describe or ""
            listing = [(owner or current or "", stmt.kind.lower(), name.name if name else "", text)]
        spec = [
            wire.ColumnSpec("system", "describe", n, type_option(native_type("text")))
            for n in ("keyspace_name", "type", "name", "create_statement")
        ]
        cells = [[v.encode() for v in row] for row in listing]
        return wire.rows_result(spec, cells)

    def _page(self, stmt: ast.Select, cursor: Cursor, page_size: int | None) -> bytes:
        """The next page of a SELECT's rows (all of them without a page size); the rest
        waits in a cursor whose id is the paging state, so every page comes from the one
        snapshot the first page read."""
        rows = cursor.rows
        schema = self.session.coordinator.table(stmt.table, self.session.keyspace)
        text = native_type("text")
        types = [t if t is not None else text for t in rows.column_types]
        columns = [
            wire.ColumnSpec(schema.keyspace, schema.name, name, type_option(ctype))
            for name, ctype in zip(rows.column_names, types, strict=True)
        ]
        everything = rows.current_rows
        end = len(everything)
        if page_size is not None and page_size > 0:
            end = min(end, cursor.offset + page_size)
        cells = [
            [None if v is None else bytes(t.serialize(v)) for v, t in zip(row, types, strict=True)]
            for row in everything[cursor.offset : end]
        ]
        state = None
        if end < len(everything):
            state = self.server.cursors.put(Cursor(rows, end))
        return wire.rows_result(columns, cells, paging_state=state)


def stream_of(header: bytes) -> int:
    return int.from_bytes(header[2:4], "big", signed=True) if len(header) >= 4 else 0


def _decode_values(
    receivers: tuple[Receiver, ...] | list[Receiver], params: wire.QueryParams
) -> list[Any]:
    """Bound values as Python values, each decoded with its receiver's type."""
    if len(params.values) != len(receivers):
        raise InvalidRequest(
            f"There were {len(receivers)} markers(?) in CQL but {len(params.values)} "
            "bound variables"
        )
    out: list[Any] = []
    for receiver, raw in zip(receivers, params.values, strict=True):
        if isinstance(raw, wire.Unset):
            raise InvalidRequest(
                f"Unset value for {receiver.name}: unset values are not supported yet"
            )
        if raw is None:
            out.append(None)
            continue
        try:
            out.append(receiver.type.deserialize(raw))
        except CqlError:
            raise
        except Exception as e:
            raise InvalidRequest(
                f"Invalid value for {receiver.name} of type {receiver.type.cql_name}: {e}"
            ) from None
    return out


def _pk_indexes(receivers: tuple[Receiver, ...]) -> list[int]:
    """The markers that bind the partition key, in key order (all or none)."""
    if not receivers:
        return []
    table = receivers[0].table
    by_name = {r.name: i for i, r in enumerate(receivers) if r.table is table}
    indexes = [by_name.get(c.name) for c in table.partition_key]
    return [i for i in indexes if i is not None] if None not in indexes else []


def _shift_markers(node: Any, offset: int) -> Any:
    """The statement with every bind marker index moved by ``offset`` (BATCH children bind
    one list of values)."""
    if offset == 0:
        return node
    if isinstance(node, ast.BindMarker):
        return dataclasses.replace(node, index=node.index + offset)
    if isinstance(node, tuple):
        return tuple(_shift_markers(n, offset) for n in node)
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        changes = {
            f.name: _shift_markers(getattr(node, f.name), offset) for f in dataclasses.fields(node)
        }
        return dataclasses.replace(node, **changes)
    return node


def _schema_change(stmt: ast.Statement, keyspace: str | None) -> tuple[str, str, str, str] | None:
    """``(change, target, keyspace, name)`` of a DDL statement's SCHEMA_CHANGE result."""
    if isinstance(stmt, ast.CreateKeyspace):
        return "CREATED", "KEYSPACE", stmt.name, ""
    if isinstance(stmt, ast.AlterKeyspace):
        return "UPDATED", "KEYSPACE", stmt.name, ""
    if isinstance(stmt, ast.DropKeyspace):
        return "DROPPED", "KEYSPACE", stmt.name, ""
    named: list[tuple[type, str, str]] = [
        (ast.CreateTable, "CREATED", "TABLE"),
        (ast.AlterTable, "UPDATED", "TABLE"),
        (ast.DropTable, "DROPPED", "TABLE"),
        (ast.CreateType, "CREATED", "TYPE"),
        (ast.AlterType, "UPDATED", "TYPE"),
        (ast.DropType, "DROPPED", "TYPE"),
    ]
    for kind, change, target in named:
        if isinstance(stmt, kind):
            name: ast.QualifiedName = getattr(stmt, "name")  # noqa: B009 - narrowed by kind
            return change, target, name.keyspace or keyspace or "", name.name
    return None
