"""``--connect HOST:PORT``: the command line's session over a running ``cqlcdc serve``.

A ``RemoteSession`` has the surface the command line uses of the embedded ``Session``
(``execute``, ``execute_many``, ``execute_arrow``, ``table_schema``, ``keyspace``,
``flush``, ``close``) and returns the same ``Rows`` with the same values and errors: rows
come undecoded from the cassandra-driver (``protocol.RawRowsHandler``) and are decoded with
cqlcdc's own types; a server error becomes the ``CqlError`` the embedded engine raises. No
Spark starts in this process, and the data directory stays the server's.

>>> session = RemoteSession("127.0.0.1", 9042)  # doctest: +SKIP
>>> session.execute("SELECT * FROM ks.t").column_names  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from cassandra import DriverException
from cassandra.auth import PlainTextAuthProvider
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, NoHostAvailable
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import RoundRobinPolicy
from cassandra.protocol import ErrorMessage
from cassandra.query import tuple_factory

from cqlcdc.cql import ast, parse_statement, split_statements
from cqlcdc.errors import CqlError, InvalidRequest, ServerError
from cqlcdc.remote.protocol import NoRetries, RawRowsHandler, cql_error, cql_type, decode_row
from cqlcdc.rows import Rows
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.describe import Described, describe_names, described_text, listing_text
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.select import ResultSet

__all__ = ["RemoteSession", "parse_address"]

PAGE_ROWS = 5000  # rows per page the server sends (the driver fetches the next on demand)
CONCURRENCY = 64  # writes in flight from execute_many / execute_arrow
# what the driver raises for a server's answer or a lost server: a server error (code 0),
# a protocol error or an overload is an ErrorMessage, not a DriverException, and
# NoHostAvailable is neither
_DRIVER_FAILURES = (DriverException, ErrorMessage, NoHostAvailable, OSError)


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``HOST``, port 9042; ``[v6]:PORT``).

    Raises:
        InvalidRequest: not an address.
    """
    host, sep, port = text.rpartition(":")
    if not sep or "]" in port:
        host, port = text, "9042"
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InvalidRequest(f"--connect takes HOST:PORT, not {text!r}")
    return host, int(port)


class RemoteSession:
    """A connection to ``cqlcdc serve`` shaped like the embedded ``Session``.

    Raises:
        ServerError: nothing answers at the address (the driver's reason).
        AuthenticationFailed: the server refused the credentials.
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        keyspace: str | None = None,
        username: str | None = None,
        password: str | None = None,
        connect_timeout: float = 10.0,
    ) -> None:
        profile = ExecutionProfile(
            load_balancing_policy=RoundRobinPolicy(),
            retry_policy=NoRetries(),
            row_factory=tuple_factory,
            request_timeout=None,  # a write is answered once durable, a DDL once applied
        )
        auth = None if username is None else PlainTextAuthProvider(username, password or "")
        self._cluster = Cluster(
            [host],
            port=port,
            protocol_version=5,  # what cqlcdc serve speaks (no downgrade warnings)
            execution_profiles={EXEC_PROFILE_DEFAULT: profile},
            auth_provider=auth,
            connect_timeout=connect_timeout,
        )
        try:
            self._session = self._cluster.connect()
        except NoHostAvailable as e:
            self._cluster.shutdown()
            raise _connection_error(e, host, port) from None
        self._session.client_protocol_handler = RawRowsHandler
        self._session.default_fetch_size = PAGE_ROWS
        self._prepared: dict[tuple[str, str | None], Any] = {}
        self.keyspace: str | None = None
        if keyspace is not None:
            self.execute(f'USE "{keyspace}"')

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._cluster.shutdown()

    def flush(self) -> None:
        """Nothing to wait for here: the server acknowledges a write once durable, and its
        reads wait for every write acknowledged before them."""

    # -- statements ---------------------------------------------------------------------------

    def execute(self, query: str | ast.Statement, parameters: Any = None) -> Rows:
        """Run one statement on the server; the result as the embedded session returns it.

        Raises:
            CqlError: the server's error, as the embedded engine raises it.
        """
        text = query if isinstance(query, str) else _render(query)
        stmt = parse_statement(text) if isinstance(query, str) else query
        try:
            if parameters is None:
                result = self._session.execute(text)
            else:  # bind markers: a prepared statement, as the embedded session binds them
                result = self._session.execute(self._prepare(text), parameters)
        except _DRIVER_FAILURES as e:
            raise _as_cql_error(e) from None
        if isinstance(stmt, ast.UseKeyspace):
            self.keyspace = stmt.name
        if isinstance(stmt, ast.Describe):
            return Rows(describe=_describe_text(stmt, result, self.keyspace))
        return _rows(result)

    def execute_many(
        self,
        statements: Sequence[Any],
        parameters: Sequence[Any] | None = None,
        *,
        wait: bool = True,
    ) -> list[Rows | CqlError]:
        """Run writes, many in flight; each gets its own result or error (``wait`` is
        accepted for the embedded signature: the server acknowledges once durable)."""
        if not statements:
            return []
        texts = [s if isinstance(s, str) else _text_of(s) for s in statements]
        results: list[Rows | CqlError] = []
        if parameters is None or any(v is None for v in parameters):
            # statements as written: one at a time, in order, as cqlsh runs a file (a
            # condition or a list index depends on the writes before it)
            for i, text in enumerate(texts):
                params = None if parameters is None else parameters[i]
                try:
                    results.append(self.execute(text, params))
                except CqlError as e:
                    results.append(e)
            return results
        results = [Rows()] * len(texts)
        by_query: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            by_query.setdefault(text, []).append(i)
        for text, slots in by_query.items():
            bound = [parameters[i] for i in slots]
            try:
                prepared = self._prepare(text)
            except CqlError as e:
                for i in slots:
                    results[i] = e
                continue
            # many executions of one prepared write (a load): in flight together, each
            # with the driver's client timestamp, so the last one sent wins as in order
            outcomes = execute_concurrent_with_args(
                self._session,
                prepared,
                bound,
                concurrency=CONCURRENCY,
                raise_on_first_error=False,
            )
            for i, (ok, outcome) in zip(slots, outcomes, strict=True):
                results[i] = _rows(outcome) if ok else _as_cql_error(outcome)
        return results

    def execute_arrow(self, prepared: Any, values: pa.Table, *, wait: bool = True) -> list[Any]:
        """One execution of a prepared write per row of ``values`` (columns bind the markers
        in order), values as Python objects (the driver encodes them)."""
        columns = [c.to_pylist() for c in values.columns]
        rows = [tuple(r) for r in zip(*columns, strict=True)]
        return self.execute_many([prepared] * len(rows), rows, wait=wait)

    def table_schema(self, name: ast.QualifiedName) -> TableSchema:
        """A table's schema as the server has it (from its ``DESCRIBE KEYSPACE``, replayed
        into a catalog of this process).

        Raises:
            InvalidRequest: the keyspace or table does not exist (the server's message).
        """
        keyspace = name.keyspace or self.keyspace
        if keyspace is None:
            raise InvalidRequest(
                "No keyspace has been specified. USE a keyspace, or explicitly specify "
                "keyspace.tablename"
            )
        text = self.execute(f'DESCRIBE KEYSPACE "{keyspace}"').describe or ""
        catalog = Catalog()
        catalog.execute(  # its replication does not matter here
            parse_statement(
                f'CREATE KEYSPACE "{keyspace}" WITH replication = '
                "{'class': 'SimpleStrategy', 'replication_factor': 1}"
            ),
            None,
        )
        for piece in split_statements(text):
            head = piece.text.lstrip().upper()
            if head.startswith(("CREATE TYPE", "CREATE TABLE")):  # the rest is not needed
                catalog.execute(parse_statement(piece.text), keyspace)
        schema = catalog.table(keyspace, name.name)
        if schema is None:
            raise InvalidRequest(f"unconfigured table {name.name}")
        return schema

    def _prepare(self, text: str) -> Any:
        key = (text, self.keyspace)
        prepared = self._prepared.get(key)
        if prepared is None:
            try:
                prepared = self._prepared[key] = self._session.prepare(text)
            except _DRIVER_FAILURES as e:
                raise _as_cql_error(e) from None
        return prepared

    # -- the server's changefeed topics (system_cqlcdc) -----------------------------------------

    def feed_offsets(self, feed: str) -> list[tuple[int, int, int]]:
        """``(partition, earliest retained offset, next offset)`` of each partition.

        Raises:
            InvalidRequest: no such changefeed (the server's message).
        """
        rows = self.execute(
            "SELECT partition, earliest_offset, next_offset FROM "
            "system_cqlcdc.changefeed_partitions WHERE feed = ?",
            (feed,),
        )
        return [(int(r[0]), int(r[1]), int(r[2])) for r in rows]

    def feed_records(
        self, feed: str, partition: int, first: int, page: int = 1000
    ) -> Iterator[tuple[int, str | None, str]]:
        """The records of one partition from offset ``first`` on, a page at a time, as
        ``(offset, key JSON text or None, value JSON text)``."""
        while True:
            rows = list(
                self.execute(
                    "SELECT offset, key, value FROM system_cqlcdc.changefeed_records "
                    f"WHERE feed = ? AND partition = ? AND offset >= ? LIMIT {page}",
                    (feed, partition, first),
                )
            )
            for offset, key, value in rows:
                yield int(offset), key, value
            if len(rows) < page:
                return
            first = int(rows[-1][0]) + 1


def _render(stmt: ast.Statement) -> str:
    from cqlcdc.cql.render import render

    return render(stmt)


def _text_of(statement: Any) -> str:
    """The CQL text of a statement the command line built (parsed, or prepared)."""
    query = getattr(statement, "query_string", None)
    if isinstance(query, str):
        return query
    return _render(statement)


def _rows(result: Any) -> Rows:
    """A driver result of raw rows as cqlcdc ``Rows`` (every page)."""
    names = list(result.column_names or [])
    if not names:
        return Rows()
    types = [cql_type(t) for t in result.column_types]
    decoded = [decode_row(row, types) for row in result]
    return Rows(ResultSet(names, list(types), decoded))


def _describe_text(stmt: ast.Describe, result: Any, current: str | None) -> str:
    """What the embedded DESCRIBE prints, from the server's rows (``keyspace_name, type,
    name, create_statement``)."""
    rows = [tuple("" if c is None else bytes(c).decode() for c in row) for row in result]
    # the server quotes names where needed (as ScyllaDB); the printers quote them again
    rows = [(_unquoted(ks), kind, _unquoted(name), text) for ks, kind, name, text in rows]
    if stmt.kind == "KEYSPACES":
        return describe_names([r[2] for r in rows])
    if stmt.kind in ("TABLES", "TYPES"):
        blocks: dict[str, list[str]] = {}
        for keyspace, _, name, _ in rows:
            blocks.setdefault(keyspace, []).append(name)
        return listing_text(list(blocks.items()), current is not None)
    if stmt.kind in ("SCHEMA", "KEYSPACE", "TABLE", "TYPE", "INDEX"):  # a row per element
        return described_text([Described(*r) for r in rows])
    return "".join(r[3] or "" for r in rows)


def _unquoted(name: str) -> str:
    """A name as DESCRIBE rows carry it (``"Zed"``) back to the name itself (``Zed``)."""
    if len(name) >= 2 and name.startswith('"') and name.endswith('"'):
        return name[1:-1].replace('""', '"')
    return name


def _as_cql_error(exc: BaseException) -> CqlError:
    found = cql_error(exc)
    if found is not None:
        return found
    if isinstance(exc, NoHostAvailable):  # the one host's own answer, when it gave one
        for reason in exc.errors.values():
            if isinstance(reason, BaseException) and (found := cql_error(reason)) is not None:
                return found
    if isinstance(exc, Mapping):  # execute_concurrent's per-host errors
        return ServerError(str(exc))
    return ServerError(f"{type(exc).__name__}: {exc}")


def _connection_error(exc: NoHostAvailable, host: str, port: int) -> CqlError:
    """The one line a client without a server gets (or the server's login refusal)."""
    for reason in exc.errors.values():
        found = cql_error(reason) if isinstance(reason, BaseException) else None
        if found is not None:
            return found
        if "Authentication" in type(reason).__name__:
            from cqlcdc.errors import AuthenticationFailed

            return AuthenticationFailed(str(reason))
    return ServerError(f"Cannot connect to {host}:{port}: no cqlcdc serve answers there")
