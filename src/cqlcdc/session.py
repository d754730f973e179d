"""``cqlcdc.connect()`` and its ``Session``: one connection's keyspace, role and prepared
statements over the data directory's ``Coordinator`` (``cqlcdc.coordinator``: the engine,
the clocks, the ingest log).

A write is parsed and validated here, turned into one mutation per partition with its
timestamp and every random bit fixed, appended durably to the ingest log, and acknowledged
once the streaming pipeline has committed it together with its CDC log rows.

>>> session = connect(data_dir="/tmp/cqlcdc-demo")  # doctest: +SKIP
>>> session.execute("SELECT * FROM ks.t").column_names  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from cqlcdc import access
from cqlcdc.auth import AUTH_STATEMENTS
from cqlcdc.coordinator import DEFAULT_BUCKETS, Coordinator
from cqlcdc.cql import ast, parse_statement, with_keyspace
from cqlcdc.errors import CqlError, InvalidRequest
from cqlcdc.location import Location
from cqlcdc.reads import select
from cqlcdc.rows import Row as Row  # re-exported: callers import both from here
from cqlcdc.rows import Rows as Rows
from cqlcdc.system.tables import SYSTEM_KEYSPACES
from cqlcdc.types.arrow import to_pylist
from cqlcdc.write_outcomes import conditional_result, pipeline_errors
from cqlcdc.writes import (
    Parameters,
    arrow_records,
    bulk_records,
    conditional_write,
    literal_bulk,
    row_records,
)

if TYPE_CHECKING:
    from cqlcdc.coordinator import InitialScan
    from cqlcdc.datadir.records import IngestRecord
    from cqlcdc.pipeline.engine import Engine
    from cqlcdc.schema.catalog import Catalog
    from cqlcdc.schema.model import TableSchema

# execute_many takes the bulk path (cqlcdc.writes) from this many writes on
BULK_MIN_WRITES = 16


class PreparedStatement:
    """A statement parsed once (``Session.prepare``); bind values at each execution.

    ``query_id`` is stable for a query and the keyspace it was prepared in (as Cassandra's
    MD5 of both), so a client can re-prepare it and get the same id.
    """

    def __init__(
        self, query_string: str, statement: ast.Statement, keyspace: str | None = None
    ) -> None:
        self.query_string = query_string
        self.statement = statement
        self.keyspace = keyspace
        self.query_id = hashlib.md5(
            f"{keyspace or ''}\x00{query_string}".encode(), usedforsecurity=False
        ).digest()

    def __repr__(self) -> str:
        return f"PreparedStatement({self.query_string!r})"


def _parsed(
    query: str | ast.Statement | PreparedStatement,
) -> ast.Statement | PreparedStatement | CqlError:
    """A query of ``execute_many`` as a statement (its syntax error when it has none)."""
    if not isinstance(query, str):
        return query
    try:
        return parse_statement(query)
    except CqlError as err:
        return err


def _statement(query: str | ast.Statement | PreparedStatement) -> ast.Statement:
    if isinstance(query, PreparedStatement):
        return query.statement
    return parse_statement(query) if isinstance(query, str) else query


class Session:
    """A connection's view of a data directory: its current keyspace, role and prepared
    statements, over the directory's ``Coordinator`` (which owns the engine). Cheap: the
    server makes one per connection (``server.executing.SessionRequests``);
    ``cqlcdc.connect`` makes a coordinator and a session that closes it.

    ``role`` is the role logged in (the server sets it after the login; every statement is
    checked against its permissions, ``cqlcdc.access``); without one the session is the
    data directory's owner, which may do anything, unless ``anonymous`` (a client of a
    server without authentication), which may not run role statements.
    """

    # no other attributes: setting an engine knob on a session (it lives on the coordinator)
    # fails loudly instead of doing nothing
    __slots__ = ("_closed", "_owns", "anonymous", "coordinator", "keyspace", "role")

    def __init__(
        self,
        coordinator: Coordinator,
        keyspace: str | None = None,
        *,
        owns: bool = False,
        role: str | None = None,
        anonymous: bool = False,
    ) -> None:
        self.coordinator = coordinator
        self.keyspace = keyspace
        self.role = role
        self.anonymous = anonymous
        self._owns = owns
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the session; the one ``connect()`` made also waits for acknowledged writes
        to commit and stops the engine."""
        if self._closed:
            return
        self._closed = True
        if self._owns:
            self.coordinator.close()

    def shutdown(self) -> None:
        self.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_keyspace(self, keyspace: str) -> None:
        self.execute(f'USE "{keyspace}"')

    # -- the coordinator's state, for tools and tests -----------------------------------------

    @property
    def data_dir(self) -> Location:
        return self.coordinator.data_dir

    @property
    def catalog(self) -> Catalog:
        return self.coordinator.catalog

    @property
    def engine(self) -> Engine:
        return self.coordinator.engine

    def flush(self) -> None:
        """Wait until every write acknowledged to the ingest log is committed."""
        self.coordinator.flush()

    def table_schema(self, name: ast.QualifiedName) -> TableSchema:
        """The schema of a table (an unqualified name in this session's keyspace).

        Raises:
            InvalidRequest: no such keyspace or table.
        """
        return self.coordinator.table(name, self.keyspace)

    def table_location(self, table: str) -> Location:
        """See ``Coordinator.table_location`` (names resolve in this session's keyspace)."""
        return self.coordinator.table_location(table, self.keyspace)

    def committed_version(self, table: str) -> int | None:
        """See ``Coordinator.committed_version``."""
        return self.coordinator.committed_version(table, self.keyspace)

    def new_cdc_generation(self) -> int:
        """See ``BackgroundWrites.new_cdc_generation``."""
        return self.coordinator.background.new_cdc_generation()

    def sweep_expired(self, now_s: int | None = None) -> int:
        """See ``BackgroundWrites.sweep_expired``."""
        return self.coordinator.background.sweep_expired(now_s)

    def tick_idle_feeds(self, now_ms: int | None = None) -> int:
        """See ``BackgroundWrites.tick_idle_feeds``."""
        return self.coordinator.background.tick_idle_feeds(now_ms)

    def start_initial_scan(self, table: ast.QualifiedName, feed: str) -> InitialScan:
        """See ``BackgroundWrites.start_initial_scan``."""
        return self.coordinator.background.start_initial_scan(table, feed, self.keyspace)

    # -- execute -----------------------------------------------------------------------------

    def prepare(self, query: str) -> PreparedStatement:
        """Parse a statement with ``?`` or ``:name`` bind markers once, for many executions.

        Its unqualified tables are bound to the current keyspace, as Cassandra binds them: a
        later ``USE`` does not move the statement to another keyspace's table.

        Example:
            >>> insert = session.prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")  # doctest: +SKIP
            >>> session.execute(insert, (1, "one"))  # doctest: +SKIP
        """
        return PreparedStatement(
            query, with_keyspace(parse_statement(query), self.keyspace), self.keyspace
        )

    def execute(
        self,
        query: str | ast.Statement | PreparedStatement,
        parameters: Parameters = None,
        *,
        wait: bool = True,
    ) -> Rows:
        """Run one CQL statement.

        Args:
            query: the statement text, a parsed statement or a prepared statement.
            parameters: the values of the statement's bind markers, by position (a sequence)
                or by name (a mapping); each is checked against its column's type.
            wait: for writes, return only when committed (False: return once durable in the
                ingest log; a later read or ``flush()`` waits for it).

        Returns:
            The rows of a SELECT, the text of a DESCRIBE, or an empty result for other
            statements.

        Raises:
            CqlError: the statement is invalid (the subclass and message say why).
            Unauthorized: the session's role may not run it.
        """
        self._check_open()
        c = self.coordinator
        stmt = _statement(query)
        if isinstance(stmt, AUTH_STATEMENTS):
            return Rows(access.run_auth(c, self.role, self.anonymous, stmt, self.keyspace))
        access.check(c, self.role, stmt, self.keyspace)
        if isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch):
            return self._write(stmt, wait, parameters)
        if isinstance(stmt, ast.Select):
            schema = c.table(stmt.table, self.keyspace)
            if schema.keyspace not in SYSTEM_KEYSPACES:  # no write changes system tables
                c.flush()  # a read sees every earlier write, committed
            return Rows(select(c, schema, stmt, parameters))
        if isinstance(stmt, ast.UseKeyspace):
            # the system keyspaces can be USEd too (their tables read, DESC TABLES listed)
            if c.catalog.keyspace(stmt.name) is None and stmt.name not in SYSTEM_KEYSPACES:
                raise InvalidRequest(f"Keyspace '{stmt.name}' does not exist")
            self.keyspace = stmt.name
            return Rows()
        if isinstance(stmt, ast.Truncate):
            c.truncate(stmt, self.keyspace)
            return Rows()
        outcome = access.run_ddl(c, self.role, stmt, self.keyspace)
        return Rows(describe=outcome.text, schema_changes=outcome.changes)

    def _check_open(self) -> None:
        if self._closed:
            from cqlcdc.errors import ServerError

            raise ServerError("Session is closed")
        self.coordinator.check_open()

    def _write(
        self,
        stmt: ast.Insert | ast.Update | ast.Delete | ast.Batch,
        wait: bool,
        parameters: Parameters = None,
    ) -> Rows:
        c = self.coordinator
        with c.lock:
            records, needs_state = row_records(c, stmt, parameters, self.keyspace)
            if not records:
                return Rows()
            c.append(records)
        first, last = records[0].seq, records[-1].seq
        if not (wait or needs_state):
            c.acknowledge(last)
            return Rows()
        c.wait(last)
        errors = pipeline_errors(c, first, last)
        if errors:
            raise errors[min(errors)]
        if conditional_write(stmt):  # one record: its outcome is the result
            return Rows(conditional_result(c, stmt, last, self.keyspace))
        return Rows()

    def execute_many(
        self,
        statements: Sequence[str | ast.Statement | PreparedStatement],
        parameters: Sequence[Parameters] | None = None,
        *,
        wait: bool = True,
    ) -> list[Rows | CqlError]:
        """Run many writes as one durable append and one wait (like the drivers'
        ``execute_concurrent_with_args``). Each statement keeps its own timestamp and its own
        result: a statement that fails validation is reported in its slot and the others
        still run. Non-write statements are rejected in their slot.

        Many executions of a few simple prepared writes of one table (every key and value a
        bind marker of an atomic column) take the bulk path: one Arrow chunk per token bucket
        instead of a record per write (``cqlcdc.writes``), with the same results.

        Args:
            statements: the writes (text, parsed or prepared).
            parameters: per statement, the values of its bind markers (or None).
            wait: return only when committed (False: once durable in the ingest log, as
                ``execute(..., wait=False)``; writes whose outcome depends on the state, such
                as a list index, are waited for anyway so their errors reach their slots).
        """
        self._check_open()
        c = self.coordinator
        if (
            parameters is not None
            and len(statements) >= BULK_MIN_WRITES
            # one check per distinct type, not per statement (a load runs millions)
            and all(issubclass(t, PreparedStatement) for t in set(map(type, statements)))
            and (
                self.role is None
                or access.permits(c, self.role, [_statement(q) for q in statements], self.keyspace)
            )
        ):
            prepared = cast(list[PreparedStatement], list(statements))
            with c.lock:
                bulk = bulk_records(c, prepared, parameters, self.keyspace)
                c.append(bulk or [])
            if bulk is not None:
                return self._bulk_done(bulk[-1].seq, len(statements), wait)
        parsed = [_parsed(q) for q in statements]  # each parsed once, its error in its slot
        if (
            parameters is None
            and len(statements) >= BULK_MIN_WRITES
            and not any(isinstance(q, PreparedStatement | CqlError) for q in parsed)
        ):
            # writes with literal values (a script): as the prepared writes they mean
            bulk = self._literal_bulk(cast(list[ast.Statement], parsed))
            if bulk is not None:
                return self._bulk_done(bulk[-1].seq, len(statements), wait)
        results: list[Rows | CqlError] = []
        batch: list[Any] = []
        slot_of_seq: dict[int, int] = {}
        conditionals: list[tuple[int, ast.Statement, int]] = []  # (slot, statement, seq)
        needs_state = False
        with c.lock:
            for n, q in enumerate(parsed):
                try:
                    if isinstance(q, CqlError):
                        raise q
                    stmt = _statement(q)
                    if not isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch):
                        raise InvalidRequest(
                            "execute_many takes only INSERT, UPDATE, DELETE, BATCH"
                        )
                    access.check(c, self.role, stmt, self.keyspace)
                    params = parameters[n] if parameters else None
                    first = c.next_seq + len(batch)  # all of them go in one append
                    records, stateful = row_records(c, stmt, params, self.keyspace, first)
                    needs_state = needs_state or stateful
                except CqlError as e:
                    results.append(e)
                    continue
                for rec in records:
                    slot_of_seq[rec.seq] = len(results)
                if conditional_write(stmt):
                    conditionals.append((len(results), stmt, records[-1].seq))
                batch.extend(records)
                results.append(Rows())
            c.append(batch)
        if batch and (wait or needs_state):
            c.wait(batch[-1].seq)
            errors = pipeline_errors(c, batch[0].seq, batch[-1].seq)
            for seq, err in errors.items():
                results[slot_of_seq[seq]] = err
            for slot, stmt, seq in conditionals:
                if seq not in errors:
                    results[slot] = Rows(conditional_result(c, stmt, seq, self.keyspace))
        elif batch:
            c.acknowledge(batch[-1].seq)
        return results

    def _literal_bulk(self, statements: list[ast.Statement]) -> list[IngestRecord] | None:
        """Append ``statements`` (writes with literal values) as bulk chunks, or None when
        they are not all of a shape the bulk path takes (nothing appended then)."""
        c = self.coordinator
        if self.role is not None and not access.permits(c, self.role, statements, self.keyspace):
            return None
        with c.lock:
            found = literal_bulk(c, statements, self.keyspace)
            if found is None:
                return None
            bulk = bulk_records(c, found[0], found[1], self.keyspace)
            c.append(bulk or [])
        return bulk

    def _bulk_done(self, last_seq: int, count: int, wait: bool) -> list[Rows | CqlError]:
        """The results of ``count`` bulk writes: one shared empty result each, once
        committed (``wait``) or durable."""
        if wait:
            self.coordinator.wait(last_seq)
        else:
            self.coordinator.acknowledge(last_seq)
        return [Rows()] * count

    def execute_arrow(
        self, prepared: PreparedStatement, values: pa.Table, *, wait: bool = True
    ) -> list[Rows | CqlError]:
        """Run a prepared write once per row of ``values`` (its columns bind the markers in
        order), like ``execute_many`` with the values kept as columns.

        A simple write (every key and value a marker of an atomic column) whose values cast
        exactly to the column types goes in bulk chunks without a Python object per value;
        otherwise the rows run one by one and each error is reported in its slot.
        """
        self._check_open()
        n = values.num_rows
        if n == 0:
            return []
        c = self.coordinator
        access.check(c, self.role, prepared.statement, self.keyspace)
        with c.lock:
            records = arrow_records(c, prepared, values, self.keyspace)
            c.append(records or [])
        if records is not None:
            return self._bulk_done(records[-1].seq, n, wait)
        # Python objects as pyarrow gives them (Decimal, dicts...), dates, times and timestamps
        # as their integers (exact, for any CQL value: pyarrow's own datetime objects stop at
        # year 9999 and microseconds); the prepared statement checks and converts them like
        # any bound value
        pylists = [to_pylist(_cql_units(column)) for column in values.columns]
        rows = list(zip(*pylists, strict=True))
        return self.execute_many([prepared] * n, rows, wait=wait)


def _cql_units(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A temporal column in the units of CQL's integers: timestamps in milliseconds (finer
    ones truncated, as a ``datetime`` bound to a timestamp is), times in nanoseconds, dates
    in days."""
    t = column.type
    if pa.types.is_timestamp(t) and t.unit != "ms":
        return column.cast(pa.timestamp("ms", t.tz), safe=False)
    if (pa.types.is_time32(t) or pa.types.is_time64(t)) and t != pa.time64("ns"):
        return column.cast(pa.time64("ns"))
    if pa.types.is_date64(t):
        return column.cast(pa.date32())
    return column


def connect(
    data_dir: Location | str | Path | None = None,
    master: str = "local[*]",
    keyspace: str | None = None,
    num_buckets: int = DEFAULT_BUCKETS,
    driver_max_rows: int | None = None,
    verbose: bool = False,
    aws_region: str = "",
    storage_options: Mapping[str, str] | None = None,
    lease_ttl_s: float | None = None,
) -> Session:
    """Open a session on an embedded engine (Spark in ``master`` mode, data in ``data_dir``).

    Args:
        data_dir: where tables, logs and the ingest log live: a local path (default
            ``./cqlcdc-data``) or ``s3://bucket/prefix``.
        master: any Spark master URL (``local[*]``, ``local-cluster[2,1,1024]``, ``spark://``).
        keyspace: the initial current keyspace.
        num_buckets: token buckets of a new data directory (the unit of parallelism).
        driver_max_rows: micro-batches up to this many writes run the core in the driver,
            larger ones on executors (None: the engine's default; 0: always executors).
        verbose: let Spark's and the JVM's console output through to stderr (default: it
            goes to ``<data_dir>/spark.log``).
        aws_region: ``awsRegion`` of the DynamoDB Streams records of feeds that set no
            ``AWS_REGION`` (YDB's server-wide default, ``SetAwsRegion``).
        storage_options: settings of an object store as delta-rs names them
            (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, ...); the standard
            AWS environment variables and profiles fill in the rest.
        lease_ttl_s: how long the data directory's lease lives unrenewed (None:
            ``$CQLCDC_LEASE_TTL``, else 30 s): how long a killed owner keeps an object-store
            directory from others.

    Returns:
        A Session shaped like the cassandra-driver's (``execute()``, ``close()``); closing it
        closes the data directory's coordinator. More sessions on the same engine:
        ``Session(session.coordinator)``.

    Raises:
        DataDirLocked: another process owns ``data_dir``.
        UnsupportedLocation: ``data_dir`` is a URI of a scheme cqlcdc cannot store in.
    """
    location = Location.of(data_dir or Path.cwd() / "cqlcdc-data", storage_options)
    coordinator = Coordinator(
        location,
        master,
        num_buckets,
        driver_max_rows,
        verbose,
        aws_region=aws_region,
        lease_ttl_s=lease_ttl_s,
    )
    return Session(coordinator, keyspace, owns=True)
