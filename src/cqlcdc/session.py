"""The coordinator behind ``cqlcdc.connect()``: DDL, timestamps, ingest, waiting, reads.

A write is parsed and validated here, turned into one mutation per partition with its
timestamp and every random bit fixed, appended durably to the ingest log, and acknowledged
once the streaming pipeline has committed it together with its CDC log rows.

>>> session = connect(data_dir="/tmp/cqlcdc-demo")  # doctest: +SKIP
>>> session.execute("SELECT * FROM ks.t").column_names  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.cdc.processor import CoreProcessor, base_output, load_generations, log_output
from cqlcdc.cdc.system_tables import SYSTEM_KEYSPACES, system_rows, system_table
from cqlcdc.changefeed import parse_feed_options
from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import CqlError, InvalidRequest, ServerError
from cqlcdc.pipeline.recovery import DataDirLock
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.bulk import (
    BulkStatement,
    ChunkWrites,
    arrow_columns,
    bound_columns,
    keys_usable,
    make_chunks,
    plan_bulk,
)
from cqlcdc.storage.codec import (
    ScanRequest,
    SweepRequest,
    TickRequest,
    WritePayload,
    encode_payload,
)
from cqlcdc.storage.mutations import (
    Mutation,
    WriteContext,
    build_delete,
    build_insert,
    build_update,
    merge_by_partition,
    using_values,
    write_key_bytes,
)
from cqlcdc.storage.select import PartitionRows, ResultSet, base_partition_rows, evaluate, prepare
from cqlcdc.storage.token import bucket_of, murmur3_token, serialize_partition_key
from cqlcdc.storage.uuids import SeededBits
from cqlcdc.storage.vectorized import splitmix64
from cqlcdc.storage.view import PartitionView

DEFAULT_BUCKETS = 16
WRITE_TIMEOUT_S = 120.0
# execute_many takes the bulk path (cqlcdc.storage.bulk) from this many writes on
BULK_MIN_WRITES = 16


class Row(tuple[Any, ...]):
    """A result row: a tuple with access by column name (``row.pk`` or ``row["cdc$time"]``)."""

    _names: tuple[str, ...] = ()

    def __new__(cls, names: tuple[str, ...], values: Sequence[Any]) -> Row:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getattr__(self, name: str) -> Any:
        try:
            return self[self._names.index(name)]
        except ValueError:
            raise AttributeError(name) from None

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self._names.index(key))
        return tuple.__getitem__(self, key)

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(self._names, self, strict=True))


class Rows:
    """What ``execute()`` returns: iterable rows plus ``column_names`` (cassandra-driver shape).

    ``column_types`` holds the CQL type of each column (for cqlsh-style printing);
    ``describe`` is the text of a DESCRIBE statement.
    """

    def __init__(self, result: ResultSet | None = None, describe: str | None = None) -> None:
        if describe is not None:
            self.column_names: list[str] = ["describe"]
            self.column_types: list[Any] = [None]
            self._rows: list[Row] = [Row(("describe",), (describe,))]
        elif result is not None:
            self.column_names = list(result.columns)
            self.column_types = list(result.types)
            names = tuple(result.columns)
            self._rows = [Row(names, r) for r in result.rows]
        else:
            self.column_names, self.column_types, self._rows = [], [], []
        self.describe = describe

    def __iter__(self) -> Iterator[Row]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def all(self) -> list[Row]:
        return list(self._rows)

    def one(self) -> Row | None:
        return self._rows[0] if self._rows else None

    @property
    def current_rows(self) -> list[Row]:
        return self._rows

    @property
    def is_write(self) -> bool:
        return not self.column_names


class PreparedStatement:
    """A statement parsed once (``Session.prepare``); bind values at each execution."""

    def __init__(self, query_string: str, statement: ast.Statement) -> None:
        self.query_string = query_string
        self.statement = statement

    def __repr__(self) -> str:
        return f"PreparedStatement({self.query_string!r})"


def _statement(query: str | ast.Statement | PreparedStatement) -> ast.Statement:
    if isinstance(query, PreparedStatement):
        return query.statement
    return parse_statement(query) if isinstance(query, str) else query


class InitialScan:
    """Appends the scan records of one feed's initial scan, a chunk at a time."""

    def __init__(
        self,
        session: Session,
        schema: TableSchema,
        feed: str,
        partitions: list[tuple[bytes, int]],
        step: int,
        tx_id: int,
        chunk: int = 256,
    ) -> None:
        self.session = session
        self.schema = schema
        self.feed = feed
        self.pending = list(partitions)
        self.step_ms = step
        self.tx_id = tx_id
        self.chunk = chunk
        self.first_seq: int | None = None
        self.done = False

    def step(self, count: int | None = None) -> int:
        """Append scan records for the next ``count`` partitions (default: one chunk)."""
        from cqlcdc.pipeline.records import IngestRecord

        s = self.session
        take = self.pending[: count or self.chunk]
        del self.pending[: len(take)]
        with s._lock:
            payload = encode_payload(ScanRequest(self.feed, self.step_ms, self.tx_id, self.step_ms))
            records = []
            for pk_bytes, token in take:
                records.append(
                    IngestRecord(
                        seq=s._next_seq,
                        table_id=self.schema.table_id,
                        schema_version=self.schema.schema_version,
                        bucket=bucket_of(token, s.num_buckets),
                        token=token,
                        pk=pk_bytes,
                        payload=payload,
                    )
                )
                s._next_seq += 1
            if records:
                s._append(records)
            if not self.pending and not self.done:
                self.done = True
                entry = s.processor.scans.get(self.schema.table_id, self.feed) or {}
                s.processor.scans.put(
                    self.schema.table_id,
                    self.feed,
                    first_seq=int(entry.get("first_seq") or s._next_seq),
                    last_seq=s._next_seq - 1,
                    step=self.step_ms,
                    tx_id=self.tx_id,
                )
        return len(take)

    def run(self) -> None:
        while not self.done:
            self.step()

    def run_in_background(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name=f"initial-scan-{self.feed}", daemon=True)
        thread.start()
        self.session._scanners.append(thread)
        return thread


class Session:
    """A connection to an embedded cqlcdc engine on ``data_dir`` (see ``cqlcdc.connect``)."""

    def __init__(
        self,
        data_dir: str | Path,
        master: str = "local[*]",
        keyspace: str | None = None,
        num_buckets: int = DEFAULT_BUCKETS,
        driver_max_rows: int | None = None,
        verbose: bool = False,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # taken before Spark starts, so a second process is told at once who owns the data
        lock = DataDirLock(self.data_dir)
        lock.acquire()
        try:
            self._open(master, keyspace, num_buckets, driver_max_rows, lock, verbose)
        except BaseException:
            lock.release()
            raise

    def _open(
        self,
        master: str,
        keyspace: str | None,
        num_buckets: int,
        driver_max_rows: int | None,
        lock: DataDirLock,
        verbose: bool,
    ) -> None:
        from cqlcdc.pipeline.engine import Engine
        from cqlcdc.pipeline.ingest import IngestLog
        from cqlcdc.pipeline.spark import get_spark

        self.keyspace = keyspace
        self.catalog = Catalog(self.data_dir)
        self.generations = load_generations(
            self.data_dir, num_buckets, int.from_bytes(os.urandom(8), "big")
        )
        self.num_buckets = self.generations.generations[0].num_ranges
        self.processor = CoreProcessor(self.data_dir, self.catalog)
        # Spark's start-up noise goes to <data_dir>/spark.log unless asked for
        self.spark = get_spark(master, log_file=None if verbose else self.data_dir / "spark.log")
        self.engine = Engine(self.data_dir, self.processor, self.spark, lock=lock)
        if driver_max_rows is not None:
            self.engine.driver_max_rows = driver_max_rows
        self.engine.start()
        self.ingest = IngestLog(self.engine.ingest_dir)
        self._lock = threading.Lock()
        self._next_seq = self.ingest.last_seq() + 1
        self._last_ts = 0
        # writes durable before this session began (a crash between an append and its commit)
        # are applied once the engine runs: the first read waits for them as for its own
        self._pending_seq = self.ingest.last_seq()
        self._closed = False
        self.autoscan = True
        self._scanners: list[threading.Thread] = []
        self.sweep_interval_s = 1.0
        self._sweep_error: Exception | None = None
        # every write's random bits come from its seed (kept in its ingest record); the seeds
        # themselves are a keyed stream, one urandom per session instead of one per write
        self._seeds = SeededBits(int.from_bytes(os.urandom(16), "big"), "write-seeds")
        self._bulk_cache: dict[tuple[Any, ...], BulkStatement | None] = {}
        self._last_write_ms: dict[str, int] = {}
        self._last_now_us = 0
        self._last_tick_ms: dict[str, int] = {}
        self._stop = threading.Event()
        self._sweep_thread = threading.Thread(target=self._sweeper, name="ttl-sweeper", daemon=True)
        self._sweep_thread.start()

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for acknowledged writes to commit, then stop the engine."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._sweep_thread.join()
        try:
            for thread in self._scanners:
                thread.join()
            self.flush()
        finally:
            self.engine.stop()

    def shutdown(self) -> None:
        self.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def set_keyspace(self, keyspace: str) -> None:
        self.execute(f'USE "{keyspace}"')

    # -- clock -------------------------------------------------------------------------------

    def _timestamp_us(self) -> int:
        """A monotonic microsecond clock, like the drivers' timestamp generator."""
        now = time.time_ns() // 1000
        self._last_ts = max(now, self._last_ts + 1)
        return self._last_ts

    # -- execute -----------------------------------------------------------------------------

    def prepare(self, query: str) -> PreparedStatement:
        """Parse a statement with ``?`` or ``:name`` bind markers once, for many executions.

        Example:
            >>> insert = session.prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")  # doctest: +SKIP
            >>> session.execute(insert, (1, "one"))  # doctest: +SKIP
        """
        return PreparedStatement(query, parse_statement(query))

    def execute(
        self,
        query: str | ast.Statement | PreparedStatement,
        parameters: Sequence[Any] | Mapping[str, Any] | None = None,
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
        """
        if self._closed:
            raise ServerError("Session is closed")
        stmt = _statement(query)
        if isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch):
            return self._write(stmt, wait, parameters)
        if isinstance(stmt, ast.Select):
            self.flush()
            return Rows(self._select(stmt, parameters))
        if isinstance(stmt, ast.UseKeyspace):
            if self.catalog.keyspace(stmt.name) is None:
                raise InvalidRequest(f"Keyspace '{stmt.name}' does not exist")
            self.keyspace = stmt.name
            return Rows()
        if isinstance(stmt, ast.Truncate):
            self.flush()
            self._truncate(stmt)
            return Rows()
        # DDL (and DESCRIBE): apply in order after every earlier write
        self.flush()
        scan: tuple[ast.QualifiedName, str] | None = None
        if isinstance(stmt, ast.AlterTable) and isinstance(stmt.action, ast.AddChangefeed):
            options = parse_feed_options(stmt.action)  # YDB's defaults, limits and messages
            if options.initial_scan:
                scan = (stmt.name, stmt.action.name)
        text = self.catalog.execute(stmt, self.keyspace)
        if scan is not None:
            scanner = self.start_initial_scan(*scan)
            if self.autoscan:
                scanner.run_in_background()
        return Rows(describe=text) if text is not None else Rows()

    def start_initial_scan(self, table: ast.QualifiedName, feed: str) -> InitialScan:
        """Begin exporting the rows a new feed's table holds now (YDB's initial scan).

        Scan records, one per base partition, enter the ingest log in chunks while other
        writes go on; ``InitialScan.step()`` appends the next chunk (the background thread
        calls it until done).
        """
        schema = self._table(table)
        snap = self.engine.snapshot()
        pks: list[tuple[bytes, int]] = []
        output = base_output(schema)
        if snap.version_of(output) is not None:
            truncated = self.processor.truncations.upto(schema.table_id)
            rows = snap.read(output, [("seq", ">", truncated)], ["pk", "token"])
            pks = sorted(set(zip(rows["pk"].to_pylist(), rows["token"].to_pylist(), strict=True)))
        with self._lock:
            step = self._timestamp_us() // 1000
            tx_id = self._next_seq - 1
            self.processor.scans.put(
                schema.table_id,
                feed,
                first_seq=self._next_seq,
                last_seq=None,
                step=step,
                tx_id=tx_id,
            )
        return InitialScan(self, schema, feed, pks, step, tx_id)

    def flush(self) -> None:
        """Wait until every write acknowledged to the ingest log is committed."""
        if self._sweep_error is not None:
            err, self._sweep_error = self._sweep_error, None
            raise ServerError(f"TTL sweeper failed: {err}") from err
        if self._pending_seq:
            self._wait(self._pending_seq)

    def _wait(self, seq: int) -> None:
        self.engine.wait_for(seq, WRITE_TIMEOUT_S)

    # -- writes ------------------------------------------------------------------------------

    def _table(self, name: ast.QualifiedName) -> TableSchema:
        ks = name.keyspace or self.keyspace
        if ks in SYSTEM_KEYSPACES:
            sys_schema = system_table(ks, name.name)
            if sys_schema is None:
                raise InvalidRequest(f"unconfigured table {name.name}")
            return sys_schema
        if ks is None:
            raise InvalidRequest(
                "No keyspace has been specified. USE a keyspace, or explicitly specify "
                "keyspace.tablename"
            )
        if self.catalog.keyspace(ks) is None:
            raise InvalidRequest(f"Keyspace {ks} does not exist")
        schema = self.catalog.table(ks, name.name)
        if schema is None:
            raise InvalidRequest(f"unconfigured table {name.name}")
        return schema

    def _write(
        self,
        stmt: ast.Insert | ast.Update | ast.Delete | ast.Batch,
        wait: bool,
        parameters: Sequence[Any] | Mapping[str, Any] | None = None,
    ) -> Rows:
        with self._lock:
            records, needs_state = self._records(stmt, parameters)
            if not records:
                return Rows()
            self._append(records)
            first, last = records[0].seq, records[-1].seq
        if wait or needs_state:
            self._wait(last)
            self._raise_pipeline_errors(first, last)
        return Rows()

    def execute_many(
        self,
        statements: Sequence[str | ast.Statement | PreparedStatement],
        parameters: Sequence[Sequence[Any] | Mapping[str, Any] | None] | None = None,
        *,
        wait: bool = True,
    ) -> list[Rows | CqlError]:
        """Run many writes as one durable append and one wait (like the drivers'
        ``execute_concurrent_with_args``). Each statement keeps its own timestamp and its own
        result: a statement that fails validation is reported in its slot and the others
        still run. Non-write statements are rejected in their slot.

        Many executions of a few simple prepared writes of one table (every key and value a
        bind marker of an atomic column) take the bulk path: one Arrow chunk per token bucket
        instead of a record per write (``cqlcdc.storage.bulk``), with the same results.

        Args:
            statements: the writes (text, parsed or prepared).
            parameters: per statement, the values of its bind markers (or None).
            wait: return only when committed (False: once durable in the ingest log, as
                ``execute(..., wait=False)``; writes whose outcome depends on the state, such
                as a list index, are waited for anyway so their errors reach their slots).
        """
        results: list[Rows | CqlError] = []
        batch: list[Any] = []
        slot_of_seq: dict[int, int] = {}
        with self._lock:
            bulk = self._bulk_records(statements, parameters)
            if bulk is not None:
                self._append(bulk)
        if bulk is not None:
            return self._bulk_done(bulk, len(statements), wait)
        needs_state = False
        with self._lock:
            for n, q in enumerate(statements):
                try:
                    stmt = _statement(q)
                    if not isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch):
                        raise InvalidRequest(
                            "execute_many takes only INSERT, UPDATE, DELETE, BATCH"
                        )
                    records, stateful = self._records(stmt, parameters[n] if parameters else None)
                    needs_state = needs_state or stateful
                except CqlError as e:
                    results.append(e)
                    continue
                for rec in records:
                    slot_of_seq[rec.seq] = len(results)
                batch.extend(records)
                results.append(Rows())
            if batch:
                self._append(batch)
        if batch and (wait or needs_state):
            self._wait(batch[-1].seq)
            for seq, err in self._pipeline_errors(batch[0].seq, batch[-1].seq).items():
                results[slot_of_seq[seq]] = err
        return results

    def _append(self, records: list[Any]) -> None:
        """Make records durable in the ingest log (call with ``self._lock`` held, so seqs
        reach the log in order)."""
        self.ingest.append(records)
        self._pending_seq = records[-1].seq

    def _bulk_done(self, records: list[Any], count: int, wait: bool) -> list[Rows | CqlError]:
        """The results of ``count`` bulk writes: one shared empty result each, once
        committed (``wait``) or durable."""
        if wait:
            self._wait(records[-1].seq)
        return [Rows()] * count

    def _bulk_records(
        self,
        statements: Sequence[str | ast.Statement | PreparedStatement],
        parameters: Sequence[Sequence[Any] | Mapping[str, Any] | None] | None,
    ) -> list[Any] | None:
        """Ingest records for many executions of a few prepared writes of one table, as
        bulk chunks (``cqlcdc.storage.bulk``); None when any of them needs the row path
        (which then runs them one by one and reports each error in its slot)."""
        if parameters is None or len(statements) < BULK_MIN_WRITES:
            return None
        index: dict[int, int] = {}
        prepared: list[PreparedStatement] = []
        for q in statements:
            if not isinstance(q, PreparedStatement):
                return None
            if id(q) not in index:
                index[id(q)] = len(prepared)
                prepared.append(q)
        if len(prepared) > 16:
            return None
        plans = self._bulk_plans(prepared)
        if plans is None:
            return None
        schema, bulk_statements = plans
        if len(prepared) == 1:
            which = np.zeros(len(statements), np.int8)
        else:
            which = np.fromiter(
                map(index.__getitem__, map(id, statements)), np.int8, len(statements)
            )
        tables = []
        for i, plan in enumerate(bulk_statements):
            positions = np.flatnonzero(which == i)
            rows = parameters if len(prepared) == 1 else [parameters[j] for j in positions.tolist()]
            columns = bound_columns(schema, plan, rows)
            if columns is None:
                return None
            columns["_pos"] = pa.array(positions)
            tables.append(pa.table(columns))
        merged = pa.concat_tables(tables, promote_options="default")
        merged = merged.take(pc.sort_indices(merged.column("_pos"))).drop_columns(["_pos"])
        return self._bulk_chunks(schema, bulk_statements, which, merged)

    def _bulk_chunks(
        self,
        schema: TableSchema,
        bulk_statements: tuple[BulkStatement, ...],
        which: np.ndarray[Any, np.dtype[np.int8]],
        merged: pa.Table,
    ) -> list[Any] | None:
        """Timestamps, seeds and seqs for bulk writes, and their chunk records (under
        ``self._lock``); None when a key needs the row path's error."""
        from cqlcdc.pipeline.records import IngestRecord

        if not keys_usable(schema, merged):
            return None
        n = len(which)
        now_us = max(time.time_ns() // 1000, self._last_now_us)
        first_ts = max(time.time_ns() // 1000, self._last_ts + 1)
        timestamps = np.arange(first_ts, first_ts + n, dtype=np.int64)
        for i, plan in enumerate(bulk_statements):
            if plan.timestamp is not None:
                timestamps[which == i] = plan.timestamp
        base_seed = np.uint64(self._seeds.next64())
        with np.errstate(over="ignore"):
            seeds = splitmix64(base_seed + np.arange(n, dtype=np.uint64))
        writes = ChunkWrites(bulk_statements, which, merged, timestamps, seeds)
        chunks = make_chunks(schema, writes, self._next_seq, now_us, self.num_buckets)
        if chunks is None:
            return None
        self._last_now_us = now_us
        self._last_ts = first_ts + n - 1
        self._next_seq += n
        self._last_write_ms[schema.table_id] = now_us // 1000
        return [
            IngestRecord(seq, schema.table_id, schema.schema_version, bucket, token, pk, payload)
            for seq, bucket, token, pk, payload in chunks
        ]

    def execute_arrow(
        self, prepared: PreparedStatement, values: pa.Table, *, wait: bool = True
    ) -> list[Rows | CqlError]:
        """Run a prepared write once per row of ``values`` (its columns bind the markers in
        order), like ``execute_many`` with the values kept as columns.

        A simple write (every key and value a marker of an atomic column) whose values cast
        exactly to the column types goes in bulk chunks without a Python object per value;
        otherwise the rows run one by one and each error is reported in its slot.
        """
        n = values.num_rows
        if n == 0:
            return []
        records = None
        with self._lock:
            plans = self._bulk_plans([prepared])
            if plans is not None:
                schema, (plan,) = plans
                columns = arrow_columns(schema, plan, values)
                if columns is not None:
                    records = self._bulk_chunks(
                        schema, (plan,), np.zeros(n, np.int8), pa.table(columns)
                    )
            if records is not None:
                self._append(records)
        if records is not None:
            return self._bulk_done(records, n, wait)
        # Python objects as pyarrow gives them (datetime, date, Decimal...), which the
        # prepared statement checks and converts like any bound value
        pylists = [column.to_pylist() for column in values.columns]
        rows = list(zip(*pylists, strict=True))
        return self.execute_many([prepared] * n, rows, wait=wait)

    def _bulk_plans(
        self, prepared: list[PreparedStatement]
    ) -> tuple[TableSchema, tuple[BulkStatement, ...]] | None:
        """The bulk forms of prepared writes to one table (None: not all have one)."""
        schema: TableSchema | None = None
        plans = []
        for q in prepared:
            stmt = q.statement
            if not isinstance(stmt, ast.Insert | ast.Update | ast.Delete):
                return None
            try:
                table = self._table(stmt.table)
            except CqlError:
                return None
            if schema is not None and table.table_id != schema.table_id:
                return None
            schema = table
            key = (q.query_string, self.keyspace, table.table_id, table.schema_version)
            if key not in self._bulk_cache:
                self._bulk_cache[key] = self._bulk_plan(table, stmt)
            plan = self._bulk_cache[key]
            if plan is None:
                return None
            plans.append(plan)
        assert schema is not None
        return schema, tuple(plans)

    def _bulk_plan(
        self, schema: TableSchema, stmt: ast.Insert | ast.Update | ast.Delete
    ) -> BulkStatement | None:
        if schema.log_of is not None or schema.keyspace in SYSTEM_KEYSPACES:
            return None
        unset = -(1 << 62)
        try:
            _check_supported(stmt)
            ctx = WriteContext(unset, 0, 0)
            ts, ttl = using_values(
                stmt.using, ctx, _default_ttl(schema), allow_ttl=not isinstance(stmt, ast.Delete)
            )
        except CqlError:
            return None
        return plan_bulk(schema, stmt, None if ts == unset else ts, ttl)

    def _records(
        self,
        stmt: ast.Insert | ast.Update | ast.Delete | ast.Batch,
        parameters: Sequence[Any] | Mapping[str, Any] | None = None,
    ) -> tuple[list[Any], bool]:
        """Validate a write and make its ingest records (one per partition), seqs assigned."""
        from cqlcdc.pipeline.records import IngestRecord

        seed = self._seeds.next64()
        # the write's clock (TTL expiry, list keys, the feed's virtual-timestamp step): made
        # monotonic so virtual timestamps follow the order writes are applied in
        now_us = self._last_now_us = max(time.time_ns() // 1000, self._last_now_us)
        ts = self._timestamp_us()
        statements: Sequence[ast.Insert | ast.Update | ast.Delete]
        if isinstance(stmt, ast.Batch):
            statements = stmt.statements
            if stmt.using.ttl is not None:
                raise InvalidRequest("Global TTL on the BATCH statement is not supported.")
        else:
            statements = (stmt,)
        ctx = WriteContext(ts, now_us, seed, bindings=parameters)
        if isinstance(stmt, ast.Batch) and stmt.using.timestamp is not None:
            from cqlcdc.types import native_type

            bts = native_type("bigint").parse_literal(stmt.using.timestamp, "[timestamp]", ctx)
            ctx.timestamp_us = int(bts)
        mutations: list[Mutation] = []
        schemas: dict[str, TableSchema] = {}
        for s in statements:
            _check_supported(s)
            schema = self._table(s.table)
            if schema.log_of is not None or schema.keyspace in SYSTEM_KEYSPACES:
                raise InvalidRequest(f"Cannot modify table {schema.qualified_name} directly")
            if isinstance(stmt, ast.Batch) and stmt.kind != "COUNTER" and _is_counter(schema):
                raise InvalidRequest("Counter mutations are only allowed in COUNTER batches")
            schemas[schema.table_id] = schema
            self._last_write_ms[schema.table_id] = now_us // 1000
            default_ttl = _default_ttl(schema)
            if isinstance(s, ast.Insert):
                mutations += build_insert(schema, s, ctx, default_ttl)
            elif isinstance(s, ast.Update):
                mutations += build_update(schema, s, ctx, default_ttl)
            else:
                mutations += build_delete(schema, s, ctx)
        records = []
        seq = self._next_seq
        for m in merge_by_partition(mutations):
            schema = schemas[m.table_id]
            pk_bytes = write_key_bytes(schema, m.partition)
            token = murmur3_token(pk_bytes)
            payload = WritePayload(m.partition, tuple(m.list_ops), now_us, seed)
            records.append(
                IngestRecord(
                    seq=seq,
                    table_id=schema.table_id,
                    schema_version=schema.schema_version,
                    bucket=bucket_of(token, self.num_buckets),
                    token=token,
                    pk=pk_bytes,
                    payload=encode_payload(payload),
                )
            )
            seq += 1
        self._next_seq = seq
        return records, any(m.list_ops for m in mutations)

    def _pipeline_errors(self, first: int, last: int) -> dict[int, CqlError]:
        """Errors the pipeline recorded for writes ``first..last`` (e.g. a list index)."""
        snap = self.engine.snapshot()
        if snap.version_of("errors") is None:
            return {}
        errs = snap.read("errors", [("seq", ">=", first), ("seq", "<=", last)])
        out: dict[int, CqlError] = {}
        for row in errs.sort_by("seq").to_pylist():
            cls = CqlError.by_code.get(row["code"], InvalidRequest)
            out[row["seq"]] = cls(row["message"])
        return out

    def _raise_pipeline_errors(self, first: int, last: int) -> None:
        errors = self._pipeline_errors(first, last)
        if errors:
            raise errors[min(errors)]

    def _truncate(self, stmt: ast.Truncate) -> None:
        """Empty the base table (not its CDC log); earlier writes are all committed here."""
        self.catalog.execute(stmt, self.keyspace)
        schema = self._table(stmt.name)
        if schema.log_of is not None:
            raise InvalidRequest(f"Cannot truncate the CDC log table {schema.name}")
        self.processor.truncations.truncate(schema.table_id, self._next_seq - 1)

    def new_cdc_generation(self) -> int:
        """Start a new CDC generation now: later writes go to fresh stream ids.

        Earlier writes keep their streams; clients find both generations through
        ``system_distributed.cdc_generation_timestamps``. Returns its timestamp (ms).
        """
        from cqlcdc.cdc.processor import GENERATIONS_FILE

        with self._lock:
            self.flush()
            ts_ms = max(
                self._timestamp_us() // 1000, self.generations.generations[-1].timestamp_ms + 1
            )
            self.generations.add(ts_ms, int.from_bytes(os.urandom(8), "big"))
            self.generations.save(self.data_dir / GENERATIONS_FILE)
            self._last_ts = max(self._last_ts, ts_ms * 1000)
            return ts_ms

    def sweep_expired(self, now_s: int | None = None) -> int:
        """Report TTL expiry to feeds with ``EXPIRY_EVENTS``: one sweep record per partition
        and expiry second that has passed (the background sweeper calls this every second).

        Returns the number of sweep records appended.
        """
        from cqlcdc.cdc.feeds import table_feeds
        from cqlcdc.cdc.processor import expiry_output
        from cqlcdc.pipeline.records import IngestRecord

        now = int(time.time()) if now_s is None else now_s
        path = self.data_dir / "sweeps.json"
        swept: dict[str, int] = json.loads(path.read_text()) if path.exists() else {}
        swept_before = dict(swept)  # the file is rewritten only when a sweep moved on
        snap = self.engine.snapshot()
        appended = 0
        with self._lock:
            for schema in self.catalog.tables():
                if not any(f.options.ttl_expiry_events for f in table_feeds(schema)):
                    continue
                output = expiry_output(schema.table_id)
                if snap.version_of(output) is None:
                    continue
                since = swept.get(schema.table_id, 0)
                due = snap.read(output, [("expiry_s", ">", since), ("expiry_s", "<=", now)])
                pairs = sorted(
                    set(
                        zip(
                            due["expiry_s"].to_pylist(),
                            due["pk"].to_pylist(),
                            due["token"].to_pylist(),
                            strict=True,
                        )
                    )
                )
                records = []
                for expiry_s, pk_bytes, token in pairs:
                    records.append(
                        IngestRecord(
                            seq=self._next_seq,
                            table_id=schema.table_id,
                            schema_version=schema.schema_version,
                            bucket=bucket_of(token, self.num_buckets),
                            token=token,
                            pk=pk_bytes,
                            payload=encode_payload(SweepRequest(expiry_s)),
                        )
                    )
                    self._next_seq += 1
                if records:
                    self._append(records)
                    appended += len(records)
                    swept[schema.table_id] = now
            if swept != swept_before:
                tmp = path.with_suffix(".tmp")
                tmp.write_text(json.dumps(swept))
                tmp.replace(path)
        return appended

    def tick_idle_feeds(self, now_ms: int | None = None) -> int:
        """Let feeds with BARRIERS_INTERVAL emit barriers while their table is idle: one clock
        tick record per table that had no write for an interval. Returns ticks appended."""
        from cqlcdc.cdc.feeds import table_feeds
        from cqlcdc.cdc.processor import TICK_PK
        from cqlcdc.pipeline.records import IngestRecord
        from cqlcdc.storage.token import MIN_TOKEN

        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        ticks = 0
        with self._lock:
            records = []
            for schema in self.catalog.tables():
                intervals = [
                    f.options.barriers_interval_ms
                    for f in table_feeds(schema)
                    if f.options.barriers_interval_ms
                ]
                if not intervals:
                    continue
                interval = max(min(intervals), 1000)
                last = max(
                    self._last_write_ms.get(schema.table_id, 0),
                    self._last_tick_ms.get(schema.table_id, 0),
                )
                if now - last < interval:
                    continue
                records.append(
                    IngestRecord(
                        seq=self._next_seq,
                        table_id=schema.table_id,
                        schema_version=schema.schema_version,
                        bucket=0,
                        token=MIN_TOKEN,
                        pk=TICK_PK,
                        payload=encode_payload(TickRequest(now)),
                    )
                )
                self._next_seq += 1
                self._last_tick_ms[schema.table_id] = now
            if records:
                self._append(records)
                ticks = len(records)
        return ticks

    def _sweeper(self) -> None:
        while not self._stop.wait(self.sweep_interval_s):
            try:
                self.sweep_expired()
                self.tick_idle_feeds()
            except RuntimeError:  # the catalog changed under us (a DDL): next tick
                continue
            except Exception as e:  # surfaced by the next flush(), never dropped
                self._sweep_error = e
                return

    # -- reads -------------------------------------------------------------------------------

    def table_location(self, table: str) -> Path:
        """The Delta table directory of a CDC log table (``ks.t_scylla_cdc_log``), for
        readers outside the engine (deltalake, DuckDB, Polars, Spark).

        Besides the log table's own columns (types in docs/types.md) it holds the internal
        columns ``_bucket``, ``_pk``, ``_seq`` and ``_expiry_s`` (the second the row's log
        TTL runs out, 0 for never; expired rows are skipped by SELECT and purged later).
        Read it at the committed version (``committed_version``) to see whole writes only.
        """
        ks, _, name = table.rpartition(".")
        schema = self._table(ast.QualifiedName(ks or None, name))
        if schema.log_of is None:
            raise InvalidRequest(f"{schema.qualified_name} is not a CDC log table")
        base = self.catalog.table(schema.keyspace, schema.log_of)
        if base is None:
            raise InvalidRequest(f"the base table of {schema.qualified_name} is gone")
        return self.engine.tables_dir / log_output(base)

    def committed_version(self, table: str) -> int | None:
        """The Delta version of ``table_location(table)`` holding every committed write."""
        self.flush()
        ks, _, name = table.rpartition(".")
        schema = self._table(ast.QualifiedName(ks or None, name))
        base = self.catalog.table(schema.keyspace, schema.log_of or schema.name)
        if base is None:
            return None
        return self.engine.snapshot().version_of(log_output(base))

    def _select(
        self, stmt: ast.Select, parameters: Sequence[Any] | Mapping[str, Any] | None = None
    ) -> ResultSet:
        schema = self._table(stmt.table)
        now_s = time.time_ns() // 1_000_000_000
        now_us = time.time_ns() // 1000
        ctx = WriteContext(now_us, now_us, 0, bindings=parameters)
        res = prepare(schema, stmt, ctx)
        snap = self.engine.snapshot()
        if schema.keyspace in SYSTEM_KEYSPACES:
            cdc_tables = [t for t in self.catalog.tables() if t.cdc.enabled]
            parts = system_rows(schema, self.generations, cdc_tables)
        elif schema.log_of is not None:
            base = self.catalog.table(schema.keyspace, schema.log_of)
            parts = self._log_partitions(schema, base, snap, res, now_s)
        else:
            parts = self._base_partitions(schema, snap, res, now_s)
        return evaluate(schema, stmt, res, parts, now_s, ctx)

    def _base_partitions(
        self, schema: TableSchema, snap: Any, res: Any, now_s: int
    ) -> list[PartitionRows]:
        from cqlcdc.cdc.processor import merge_fragments
        from cqlcdc.storage.token import deserialize_partition_key

        output = base_output(schema)
        if snap.version_of(output) is None:
            return []
        filters: list[tuple[str, str, Any]] | None = None
        if res.partition_keys is not None:
            keys = [serialize_partition_key(schema, pk) for pk in res.partition_keys]
            filters = [("pk", "in", keys)]
        truncated = self.processor.truncations.upto(schema.table_id)
        if truncated:
            filters = [*(filters or []), ("seq", ">", truncated)]
        table = snap.read(output, filters, ["pk", "token", "seq", "fragment"])
        frags: dict[bytes, list[tuple[int, bytes]]] = {}
        tokens: dict[bytes, int] = {}
        for row in table.to_pylist():
            frags.setdefault(row["pk"], []).append((row["seq"], row["fragment"]))
            tokens[row["pk"]] = row["token"]
        view = PartitionView(schema)
        out = []
        for pk_bytes, items in frags.items():
            pk = deserialize_partition_key(schema, pk_bytes)
            part = merge_fragments(pk, [f for _, f in sorted(items)])
            out.append(base_partition_rows(schema, part, tokens[pk_bytes], now_s, view))
        return out

    def _log_partitions(
        self,
        log: TableSchema,
        base: TableSchema | None,
        snap: Any,
        res: Any,
        now_s: int,
    ) -> list[PartitionRows]:
        if base is None:
            return []
        output = log_output(base)
        if snap.version_of(output) is None:
            return []
        table = snap.read(output)
        if res.partition_keys is not None:
            wanted = [pk[0] for pk in res.partition_keys]
            table = table.filter(pc.is_in(table["cdc$stream_id"], value_set=_binary(wanted)))
        expiry = table["_expiry_s"]
        table = table.filter(pc.or_(pc.equal(expiry, 0), pc.greater(expiry, now_s)))
        current = log_table_schema(base)
        by_stream: dict[bytes, list[dict[str, Any]]] = {}
        names = set(table.column_names)
        columns = {c.name: c for c in current.columns if c.name in names}
        for raw in table.to_pylist():
            row = {
                n: (None if raw[n] is None else c.type.from_arrow(raw[n]))
                for n, c in columns.items()
            }
            stream: bytes = raw["cdc$stream_id"]
            by_stream.setdefault(stream, []).append(row)
        time_type = current.column("cdc$time")
        assert time_type is not None
        out = []
        for stream, rows in by_stream.items():
            rows.sort(key=lambda r: (time_type.type.sort_key(r["cdc$time"]), r["cdc$batch_seq_no"]))
            token = int.from_bytes(stream[:8], "big", signed=True)
            out.append(PartitionRows(token, (stream,), rows))
        return out


def _binary(values: list[bytes]) -> Any:
    import pyarrow as pa

    return pa.array(values, type=pa.binary())


def _check_supported(stmt: ast.Insert | ast.Update | ast.Delete) -> None:
    """Forms the parser accepts but the engine does not execute yet fail loudly, never
    silently as an unconditional write."""
    if isinstance(stmt, ast.Insert):
        if stmt.if_not_exists:
            raise InvalidRequest("Conditional statements (IF NOT EXISTS) are not supported yet")
        if stmt.json is not None:
            raise InvalidRequest("INSERT ... JSON is not supported yet")
    elif stmt.if_exists or stmt.conditions:
        raise InvalidRequest("Conditional statements (IF ...) are not supported yet")


def _default_ttl(schema: TableSchema) -> int:
    for name, value in schema.options:
        if name == "default_time_to_live":
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def _is_counter(schema: TableSchema) -> bool:
    return any(c.type.cql_name == "counter" for c in schema.columns)


def connect(
    data_dir: str | Path | None = None,
    master: str = "local[*]",
    keyspace: str | None = None,
    num_buckets: int = DEFAULT_BUCKETS,
    driver_max_rows: int | None = None,
    verbose: bool = False,
) -> Session:
    """Open a session on an embedded engine (Spark in ``master`` mode, data in ``data_dir``).

    Args:
        data_dir: where tables, logs and the ingest log live (default ``./cqlcdc-data``).
        master: any Spark master URL (``local[*]``, ``local-cluster[2,1,1024]``, ``spark://``).
        keyspace: the initial current keyspace.
        num_buckets: token buckets of a new data directory (the unit of parallelism).
        driver_max_rows: micro-batches up to this many writes run the core in the driver,
            larger ones on executors (None: the engine's default; 0: always executors).
        verbose: let Spark's and the JVM's console output through to stderr (default: it
            goes to ``<data_dir>/spark.log``).

    Returns:
        A Session shaped like the cassandra-driver's (``execute()``, ``close()``).
    """
    return Session(
        data_dir or Path.cwd() / "cqlcdc-data",
        master,
        keyspace,
        num_buckets,
        driver_max_rows,
        verbose,
    )
