"""A client connection's requests run on its own ``Session``: QUERY, PREPARE, EXECUTE, BATCH
and the login.

The same handlers serve a connection of the one-process server (``Connection`` runs them in
the server's thread pool) and, with ``cqlcdc serve --workers N``, a protocol worker's
connection in the coordinator's process (``worker_pool.WorkerPool``): what a statement does,
which role checks it and which keyspace it runs in never depend on the process that
decoded its frame. Everything here blocks (a write until it is durable): call it from a
worker thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import TYPE_CHECKING, Any

from cqlcdc import access
from cqlcdc.cql import ast, parse_statement, with_keyspace
from cqlcdc.cql.render import render
from cqlcdc.errors import CqlError, InvalidRequest
from cqlcdc.server.combiner import combinable
from cqlcdc.server.contracts import Request, StatementHost
from cqlcdc.server.error_responses import error_response
from cqlcdc.server.login import log_in
from cqlcdc.server.metrics import log_schema_change
from cqlcdc.server.requests import Batch, Execute, Prepare, Query, QueryParams
from cqlcdc.server.responses import ResponseMessage
from cqlcdc.server.results import (
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
    from cqlcdc.server.frames import Frame

MAX_LITERAL_TEMPLATES = 1024  # distinct shapes of literal writes kept as prepared ones


class SessionRequests:
    """One client connection's session and the handlers of its requests.

    Args:
        server: the server whose coordinator, prepared statements, paging cursors and
            write combiner every connection shares.
        anonymous: no login (a server without ``--auth``): the session may do anything but
            manage roles.
    """

    def __init__(self, server: StatementHost, *, anonymous: bool) -> None:
        self.server = server
        self.session = Session(server.coordinator, anonymous=anonymous)
        self._handlers: dict[type, Callable[[Any], ResponseMessage]] = {
            Query: self._query,
            Prepare: self._prepare,
            Execute: self._execute,
            Batch: self._batch,
        }

    def run(self, request: Request) -> ResponseMessage:
        """The response to ``request``.

        Raises:
            CqlError: what the client is answered with an ERROR.
        """
        return self._handlers[type(request)](request)

    def log_in(self, token: bytes | None) -> None:
        """Log the session in as the role ``token`` names (slow on purpose: scrypt).

        Raises:
            AuthenticationFailed: what Cassandra says of a wrong or malformed login.
        """
        self.session.role = log_in(self.server.coordinator.roles, token)

    def close(self) -> None:
        self.session.close()

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
        done = self._submit(statement, values, timestamp_us)
        return done is not None and bool(done.result())

    def _submit(
        self, statement: PreparedStatement, values: list[Any], timestamp_us: int | None
    ) -> Future[bool] | None:
        """The write, handed to the combiner (None: not a write it takes)."""
        combiner = self.server.combiner
        if combiner is None or not combinable(statement.statement, values):
            return None
        # the combiner writes for every connection: this one's role is checked here
        access.check(
            self.server.coordinator, self.session.role, statement.statement, self.session.keyspace
        )
        return combiner.submit(statement, values, timestamp_us)

    def submit_write(self, request: Execute) -> Future[bool] | None:
        """An EXECUTE of a prepared single-row write, handed to the write combiner without
        blocking: nothing but the combiner's future waits for it to be durable, so the
        event loop may call this and no thread of the pool is taken per write. The future
        is True once acknowledged, False when the combiner is closing (then ``run`` it).
        None: not such a write (``run`` it).

        Raises:
            CqlError: UNPREPARED, a value that does not bind, a permission refused.
        """
        prepared = current_prepared(self.server.prepared, request.query_id, self.session)
        if prepared is None:
            raise UnpreparedId(request.query_id)
        if not isinstance(prepared.statement.statement, ast.Insert | ast.Update | ast.Delete):
            return None
        values = bind_values(prepared.receivers, request.params)
        return self._submit(prepared.statement, values, request.params.timestamp_us)

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
        # an event for each table the DDL changed, its CDC log's too (a driver refreshes
        # only what an event names), in ScyllaDB's order
        for event in rows.schema_changes:
            self.server.broadcast_schema_change(
                SchemaChange(event.change, event.target, event.keyspace, event.name)
            )
        change = schema_change(stmt, self.session.keyspace)
        if change is not None:
            log_schema_change(change, self.session.role)
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


class InProcessRequests:
    """A connection's ``Requests`` in the coordinator's own process: its ``SessionRequests``
    run in the server's thread pool (a statement blocks until it is durable)."""

    def __init__(self, requests: SessionRequests, executor: Executor) -> None:
        self.requests = requests
        self.executor = executor

    async def run(self, version: int, frame: Frame, request: Request) -> ResponseMessage:
        if isinstance(request, Execute):  # a single-row write waits on the event loop
            done = self.requests.submit_write(request)
            if done is not None and await asyncio.wrap_future(done):
                return VoidResult()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.requests.run, request)

    async def log_in(self, version: int, token: bytes | None) -> ResponseMessage | None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, self.requests.log_in, token)
        except CqlError as e:
            return error_response(e)
        return None

    async def close(self) -> None:
        self.requests.close()


__all__ = ["MAX_LITERAL_TEMPLATES", "InProcessRequests", "Request", "SessionRequests"]
