"""The coordinator of one data directory: the engine, the lock, seqs, clocks, the catalog.

A process opens a data directory once, as one ``Coordinator``; sessions (``cqlcdc.Session``)
are cheap facades over it, one per connection, holding only a current keyspace and their
prepared statements. Every ingest record enters the log through ``Coordinator.append``,
under one lock, so seqs reach the log in order; DDL builds a new catalog and swaps it in
whole, so the sweeper, the micro-batches and reads each see one consistent catalog.

>>> coordinator = Coordinator("/tmp/cqlcdc-demo")  # doctest: +SKIP
>>> session = Session(coordinator, keyspace="ks")  # doctest: +SKIP  (cqlcdc.session)
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cqlcdc.auth import RoleStore
from cqlcdc.cdc.processor import CoreProcessor, base_output, load_generations, log_output
from cqlcdc.cdc.system_local import NodeInfo
from cqlcdc.cdc.system_tables import SYSTEM_CATALOG, SYSTEM_KEYSPACES, system_table
from cqlcdc.changefeed import parse_feed_options
from cqlcdc.cql import ast
from cqlcdc.errors import CqlError, InvalidRequest, ServerError
from cqlcdc.location import Location
from cqlcdc.observe import events
from cqlcdc.observe.cdc_operations import Operation
from cqlcdc.pipeline.admission import admit
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.changes import SchemaEvent, schema_changes
from cqlcdc.schema.describe import describe_statement
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.codec import ScanRequest, SweepRequest, TickRequest, encode_payload
from cqlcdc.storage.select import ResultSet
from cqlcdc.storage.token import bucket_of
from cqlcdc.storage.uuids import SeededBits
from cqlcdc.store.ingest import FailedAppends
from cqlcdc.store.lease import Lease
from cqlcdc.store.records import IngestRecord

log = logging.getLogger(__name__)

DEFAULT_BUCKETS = 16
WRITE_TIMEOUT_S = 120.0
# backpressure: a writer acknowledged at durability waits while the pipeline is this far
# behind (in writes, or in ingest files, each of which a micro-batch reads), so a backlog,
# and the wait of the reads behind it, stays bounded
MAX_UNAPPLIED_WRITES = 1_000_000
# the longest an append to an object store waits for more writes while they keep coming,
# and the gap without a new write that ends the wait: fewer, fuller PUTs under load, a
# lone writer barely delayed (docs/performance.md)
OBJECT_STORE_LINGER_S = 0.15
GROUP_QUIET_S = 0.003
MAX_UNAPPLIED_FILES = 400


@dataclass(frozen=True, slots=True)
class DdlOutcome:
    """What ``Coordinator.run_ddl`` did: DESCRIBE's text, or the schema changes of the DDL
    (every table it created, altered or dropped, its CDC log's included), in the order
    ScyllaDB announces them."""

    text: str | None = None
    changes: tuple[SchemaEvent, ...] = ()


class Coordinator:
    """Owns a data directory in this process (see the module docstring).

    Args:
        data_dir: the data directory (created if missing): a local path or an object-store
            Location (``s3://bucket/prefix``).
        master: any Spark master URL.
        num_buckets: token buckets of a new data directory.
        driver_max_rows: micro-batches up to this many writes run the core in the driver.
        verbose: let Spark's console output through (default: ``<data_dir>/spark.log`` for a
            local data directory, a file in the temp directory for an object store).
        aws_region: ``awsRegion`` of DynamoDB Streams feeds that set no ``AWS_REGION``
            (YDB's server-wide ``SetAwsRegion``).
        lease_ttl_s: the ttl of the data directory's lease (None: ``$CQLCDC_LEASE_TTL``,
            else 30 s; ``cqlcdc.store.lease``).

    Raises:
        DataDirLocked: another process (or another coordinator here) owns ``data_dir``.
    """

    def __init__(
        self,
        data_dir: Location | str | Path,
        master: str = "local[*]",
        num_buckets: int = DEFAULT_BUCKETS,
        driver_max_rows: int | None = None,
        verbose: bool = False,
        aws_region: str = "",
        lease_ttl_s: float | None = None,
    ) -> None:
        self.data_dir = Location.of(data_dir)
        self.aws_region = aws_region
        self.data_dir.makedirs()
        # taken before Spark starts, so a second process is told at once who owns the data
        lock = Lease(self.data_dir, lease_ttl_s)
        lock.acquire()
        try:
            self._open(master, num_buckets, driver_max_rows, lock, verbose)
        except BaseException:
            lock.release()
            raise

    def _open(
        self,
        master: str,
        num_buckets: int,
        driver_max_rows: int | None,
        lock: Lease,
        verbose: bool,
    ) -> None:
        from cqlcdc.pipeline.engine import Engine
        from cqlcdc.pipeline.engine_config import EngineConfig
        from cqlcdc.pipeline.spark import get_spark

        self._catalog = Catalog(self.data_dir)
        self._catalog.admission = admit
        # who may log in and what each role may do (cqlcdc.access checks sessions against it)
        self.roles = RoleStore(self.data_dir / "auth" / "roles.json")
        self.generations = load_generations(
            self.data_dir, num_buckets, int.from_bytes(os.urandom(8), "big")
        )
        self.num_buckets = self.generations.generations[0].num_ranges
        # who this node is to clients (system.local); the server sets where it listens
        self.node = NodeInfo(host_id=_host_id(self.data_dir), data_dir=str(self.data_dir))
        # the core reads schemas through this coordinator: always the current snapshot
        self.processor = CoreProcessor(self.data_dir, self, self.aws_region)
        self.spark = get_spark(master, log_file=None if verbose else self._spark_log())
        config = (
            EngineConfig()
            if driver_max_rows is None
            else EngineConfig(driver_max_rows=driver_max_rows)
        )
        self.engine = Engine(self.data_dir, self.processor, self.spark, config, lease=lock)
        self.engine.start()
        self.ingest = self.engine.open_ingest_log()
        self.lock = threading.Lock()
        self.next_seq = self.ingest.last_seq() + 1
        # group commit: records wait here (in seq order) until one writer appends them all
        self._queue: list[IngestRecord] = []
        self._durable = threading.Condition()
        self._durable_seq = self.ingest.last_seq()
        self._file_ends: deque[int] = deque()  # last seq of each ingest file appended
        self._appending = False
        # group commit in an object store: how many records the next append should wait for
        # (those of the last append, whose writers come back, and those queued meanwhile),
        # and at most how long (a PUT costs per request: fewer, fuller appends)
        self._group_target = 0
        self._queued_writes = 0  # writes (seqs) queued since the last append took the queue
        self.group_linger_s = 0.0 if self.data_dir.is_local else OBJECT_STORE_LINGER_S
        self._failed_appends = FailedAppends()
        # writes of CDC tables held for ScyllaDB's CDC counters until their append settles:
        # (last seq of their records, operation, how many), in seq order (only with metrics)
        self.cdc_operations: deque[tuple[int, Operation, int]] = deque()
        self._last_ts = 0
        self._last_now_us = 0
        # writes durable before this coordinator began (a crash between an append and its
        # commit) are applied once the engine runs: the first read waits for them too
        self._pending_seq = self.ingest.last_seq()
        self._swept: dict[str, int] | None = None  # sweeps.json, once read
        self.closed = False
        self.autoscan = True
        self._scanners: list[threading.Thread] = []
        self.sweep_interval_s = 1.0
        self._sweep_error: Exception | None = None
        # every write's random bits come from its seed (kept in its ingest record); the seeds
        # themselves are a keyed stream, one urandom per coordinator instead of one per write
        self._seeds = SeededBits(int.from_bytes(os.urandom(16), "big"), "write-seeds")
        self.last_write_ms: dict[str, int] = {}
        # bulk forms of prepared writes, by (query, keyspace, table_id, schema_version)
        self.bulk_plans: dict[tuple[str, str | None, str, int], Any] = {}
        self._last_tick_ms: dict[str, int] = {}
        self._stop = threading.Event()
        self._sweep_thread = threading.Thread(target=self._sweeper, name="ttl-sweeper", daemon=True)
        self._sweep_thread.start()

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for acknowledged writes to commit, then stop the engine and the sweeper."""
        if self.closed:
            return
        self.closed = True
        self._stop.set()
        self._sweep_thread.join()
        try:
            for thread in self._scanners:
                thread.join()
            self.flush()
        finally:
            self.engine.stop()

    def kill(self) -> None:
        """Stop without flushing, as a crash would (tests of what survives one)."""
        self.closed = True
        self._stop.set()
        self._sweep_thread.join()
        self.engine.stop()

    def check_open(self) -> None:
        if self.closed:
            raise ServerError("Session is closed")

    # -- the catalog -------------------------------------------------------------------------

    @property
    def catalog(self) -> Catalog:
        """The current catalog: a snapshot no one mutates (DDL swaps in a new one)."""
        return self._catalog

    def table_by_id(self, table_id: str, version: int | None = None) -> TableSchema | None:
        """``SchemaSource`` for the core: a table version from the current snapshot."""
        return self._catalog.table_by_id(table_id, version)

    def table(self, name: ast.QualifiedName, keyspace: str | None) -> TableSchema:
        """The schema a statement names (system tables included), with ScyllaDB's errors."""
        ks = name.keyspace or keyspace
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
        catalog = self._catalog
        if catalog.keyspace(ks) is None:
            raise InvalidRequest(f"Keyspace {ks} does not exist")
        schema = catalog.table(ks, name.name)
        if schema is None:
            raise InvalidRequest(f"unconfigured table {name.name}")
        return schema

    def run_ddl(self, stmt: ast.Statement, keyspace: str | None) -> DdlOutcome:
        """Apply a DDL statement (or DESCRIBE) after every earlier write: a new catalog is
        built from the current one and swapped in whole. Returns DESCRIBE's text, or what
        the statement changed (the server announces it)."""
        self.flush()
        scan: tuple[ast.QualifiedName, str] | None = None
        if isinstance(stmt, ast.AlterTable) and isinstance(stmt.action, ast.AddChangefeed):
            options = parse_feed_options(stmt.action)  # YDB's defaults, limits and messages
            if options.initial_scan:
                scan = (stmt.name, stmt.action.name)
                # the scan appends records of the table: refused with the table's writes
                stopped = self.engine.stopped.get(self.table(stmt.name, keyspace).table_id)
                if stopped is not None:
                    raise stopped.refusal(self.data_dir)
        if isinstance(stmt, ast.AlterTable) and isinstance(stmt.action, ast.DisableChangefeed):
            self._check_not_scanning(stmt.name, stmt.action.name, keyspace)
        if isinstance(stmt, ast.Describe):
            # of the current snapshot (no one mutates it); listings include the system
            # keyspaces and tables, which the catalog does not hold, and they are described
            return DdlOutcome(describe_statement(self._catalog, stmt, keyspace, SYSTEM_CATALOG))
        with self.lock:
            if (
                isinstance(stmt, ast.AlterTable)
                and isinstance(stmt.action, ast.DropColumns)
                and stmt.action.timestamp is None
            ):
                # the drop's timestamp from the writes' clock: every later write is newer
                stmt = replace(stmt, action=replace(stmt.action, timestamp=self.timestamp_us()))
            before = self._catalog
            catalog = before.copy()
            catalog.execute(stmt, keyspace)
            self._catalog = catalog
        outcome = DdlOutcome(changes=schema_changes(before, catalog))
        ttl_on = (
            isinstance(stmt, ast.AlterTable)
            and isinstance(stmt.action, ast.SetTtlColumn)
            and stmt.action.column is not None
        )
        if ttl_on:
            assert isinstance(stmt, ast.AlterTable)
            self._sweep_every_partition(self.table(stmt.name, keyspace))
        if scan is not None:
            # writes validated before the ADD (appended by other connections after the flush
            # above) are not changes of the new feed: commit them so the scan's snapshot holds
            # their partitions
            self.flush()
            scanner = self.start_initial_scan(scan[0], scan[1], keyspace)
            if self.autoscan:
                scanner.run_in_background()
        return outcome

    def _sweep_every_partition(self, schema: TableSchema) -> None:
        """After ``ALTER TABLE ... TTL e``: a sweep of every partition at the next second,
        so rows written before (no write scheduled them) expire as ScyllaDB's scanner
        expires them; each sweep schedules its partition's next expiration."""
        snap = self.engine.snapshot()
        output = base_output(schema)
        if snap.version_of(output) is None:
            return
        truncated = self.processor.truncations.upto(schema.table_id)
        rows = snap.read(output, [("seq", ">", truncated)], ["pk", "token"])
        pks = sorted(set(zip(rows["pk"].to_pylist(), rows["token"].to_pylist(), strict=True)))
        if not pks:
            return
        payload = encode_payload(SweepRequest(int(time.time())))
        with self.lock:
            records = [
                self.record(schema, token, pk, payload, self.next_seq + i)
                for i, (pk, token) in enumerate(pks)
            ]
            self.append(records)
            last = self.next_seq - 1
        self.make_durable(last)

    def _check_not_scanning(
        self, table: ast.QualifiedName, feed: str, keyspace: str | None
    ) -> None:
        """YDB disables only a Ready feed: one whose initial scan is still appending its scan
        records (state Scan) is refused, as YDB refuses it. (Once they are all appended, the
        flush before the DDL has applied them.)"""
        from cqlcdc.cdc.feeds import table_feeds

        schema = self.table(table, keyspace)
        for f in table_feeds(schema):
            scan = self.processor.scans.get(schema.table_id, f.topic)
            if f.name == feed and scan is not None and scan["last_seq"] is None:
                raise InvalidRequest(
                    f"Cannot switch state of changefeed {feed}: from Scan to Disabled "
                    f"(its initial scan is not finished)"
                )

    def truncate(self, stmt: ast.Truncate, keyspace: str | None) -> None:
        """Empty the base table (not its CDC log), after every earlier write."""
        self.flush()
        with self.lock:
            catalog = self._catalog.copy()
            catalog.execute(stmt, keyspace)
            self._catalog = catalog
            schema = self.table(stmt.name, keyspace)
            if schema.log_of is not None:
                raise InvalidRequest(f"Cannot truncate the CDC log table {schema.name}")
            self.processor.truncations.truncate(schema.table_id, self.next_seq - 1)

    def _spark_log(self) -> Path:
        """Where Spark's console output goes: beside a local data directory, else local
        scratch (an object store takes no appends)."""
        if self.data_dir.is_local:
            return self.data_dir.path / "spark.log"
        return Path(tempfile.gettempdir()) / f"cqlcdc-spark-{os.getpid()}.log"

    # -- clocks ------------------------------------------------------------------------------

    def timestamp_us(self) -> int:
        """A monotonic microsecond clock, like the drivers' timestamp generator (call with
        ``lock`` held)."""
        now = time.time_ns() // 1000
        self._last_ts = max(now, self._last_ts + 1)
        return self._last_ts

    def timestamps_us(self, count: int) -> int:
        """The first of ``count`` consecutive write timestamps (call with ``lock`` held)."""
        first = max(time.time_ns() // 1000, self._last_ts + 1)
        self._last_ts = first + count - 1
        return first

    def now_us(self) -> int:
        """A write's clock (TTL expiry, list keys, a feed's virtual-timestamp step), made
        monotonic so virtual timestamps follow the order writes are applied in (call with
        ``lock`` held)."""
        self._last_now_us = max(time.time_ns() // 1000, self._last_now_us)
        return self._last_now_us

    def next_seed(self) -> int:
        """The seed of a write's random bits (call with ``lock`` held)."""
        return self._seeds.next64()

    # -- the one way into the ingest log ----------------------------------------------------

    def record(
        self, schema: TableSchema, token: int, pk: bytes, payload: bytes, seq: int
    ) -> IngestRecord:
        """An ingest record of ``schema``'s partition ``pk`` (its bucket from its token).

        Raises:
            ServerError: the table is stopped (a write of it could not be applied): a new
                write would only be held, after being acknowledged on some paths.
        """
        stopped = self.engine.stopped.get(schema.table_id)
        if stopped is not None:
            raise stopped.refusal(self.data_dir)
        return IngestRecord(
            seq=seq,
            table_id=schema.table_id,
            schema_version=schema.schema_version,
            bucket=bucket_of(token, self.num_buckets),
            token=token,
            pk=pk,
            payload=payload,
        )

    def append(self, records: Sequence[IngestRecord]) -> None:
        """Queue records for the ingest log: the one way in (call with ``lock`` held; seqs
        from ``next_seq`` on, increasing). They are durable once ``make_durable`` (or
        ``wait``) returns for their last seq. A bulk chunk record stands for several writes
        and carries its last write's seq, so the next seq follows the last record."""
        if not records:
            return
        if records[0].seq < self.next_seq:
            raise ServerError(f"ingest seq {records[0].seq} reused (next is {self.next_seq})")
        self._queue.extend(records)
        # writes, not records nor calls: a bulk chunk stands for many writes, and the
        # linger waits for as many writers as the last append held (``_linger``)
        self._queued_writes += records[-1].seq + 1 - self.next_seq
        self.next_seq = records[-1].seq + 1
        self._pending_seq = records[-1].seq

    def make_durable(self, seq: int) -> None:
        """Return once every record up to ``seq`` is durable in the ingest log (call without
        ``lock`` held).

        Group commit: the first caller to find records queued appends all of them as one
        file while later callers wait for it, so concurrent writers share one append (and
        the micro-batch reads one file instead of one per write).

        An append that fails (a full disk) fails the writes it held, and only them: they
        were never acknowledged, so their seqs stay a gap in the log (the pipeline goes by
        seq order and needs no seq to be there), and the next append, once one succeeds,
        takes the writes after them.

        Raises:
            ServerError: the append holding ``seq`` failed.
        """
        while True:
            with self._durable:
                while True:
                    failure = self._failed_appends.failure_of(seq)
                    if failure is not None:
                        raise ServerError(f"Ingest append failed: {failure}") from failure
                    if self._durable_seq >= seq:
                        return
                    if not self._appending:
                        break
                    self._durable.wait()
                self._appending = True
            error: BaseException | None = None
            self._linger()
            with self.lock:
                batch, self._queue = self._queue, []
                writes, self._queued_writes = self._queued_writes, 0
            if not batch or batch[-1].seq < seq:
                with self.lock:
                    self._queue[:0] = batch  # put back: seq was never handed out
                    self._queued_writes += writes
                with self._durable:
                    self._appending = False
                    self._durable.notify_all()
                raise ServerError(f"ingest seq {seq} was never queued")
            try:
                self.ingest.append(batch)
            except BaseException as e:
                error = e
            with self._durable:
                self._appending = False
                if error is not None:
                    self._failed_appends.add(batch[0].seq, batch[-1].seq, error)
                else:
                    self._durable_seq = batch[-1].seq
                    self._file_ends.append(batch[-1].seq)
                    with self.lock:
                        self._group_target = writes + self._queued_writes
                    events.group_committed(len(batch))
                self._durable.notify_all()
            self._settle_cdc_operations(batch[-1].seq, failed=error is not None)
            if error is not None:
                log.error(
                    "ingest append of writes %d..%d failed (they are refused): %s",
                    batch[0].seq,
                    batch[-1].seq,
                    error,
                )
                raise ServerError(f"Ingest append failed: {error}") from error

    def _settle_cdc_operations(self, upto_seq: int, failed: bool) -> None:
        """Count the held CDC operations whose records an append up to ``upto_seq`` took."""
        if not self.cdc_operations:
            return
        settled = []
        with self.lock:
            while self.cdc_operations and self.cdc_operations[0][0] <= upto_seq:
                settled.append(self.cdc_operations.popleft())
        for _, op, times in settled:
            events.cdc_operation(op, times, failed)

    def _linger(self) -> None:
        """Before an append to an object store, let the queue fill: wait until as many
        writes are queued as there were writers at the last append (its own writers,
        acknowledged and coming back, and those that queued behind it) and no new write
        has come for ``GROUP_QUIET_S``, or at most ``group_linger_s``. A PUT costs per
        request, so under load an append carries what arrived in up to that window (as
        WarpStream batches produce requests into timed object writes); a lone writer
        waits only the quiet gap. Without it concurrent writers split into cohorts that
        alternate, each append part full. A local disk's append is cheap and never waits."""
        if self.group_linger_s <= 0:
            return
        started = time.monotonic()
        deadline = started + self.group_linger_s
        count, changed = -1, started
        while True:
            with self.lock:
                queued = self._queued_writes
            now = time.monotonic()
            if queued != count:
                count, changed = queued, now
            if now >= deadline:
                return
            if queued >= self._group_target and now - changed >= GROUP_QUIET_S:
                return
            time.sleep(0.001)

    # -- waiting -----------------------------------------------------------------------------

    def flush(self) -> None:
        """Wait until every write acknowledged to the ingest log is committed. A write whose
        append failed was never acknowledged and is not waited for, so reads of committed
        data go on while the disk is full."""
        if self._sweep_error is not None:
            err, self._sweep_error = self._sweep_error, None
            raise ServerError(f"TTL sweeper failed: {err}") from err
        while True:
            with self._durable:
                target = self._failed_appends.last_before(self._pending_seq)
            if target <= 0:
                return
            try:
                self.wait(target)
                return
            except ServerError:
                with self._durable:
                    if self._failed_appends.failure_of(target) is None:
                        raise
                # the append this flush made for writes in flight failed: they are refused,
                # so wait for the writes before them instead

    def acknowledge(self, seq: int) -> None:
        """Return once the write with ``seq`` may be acknowledged: durable in the ingest log
        (its outcome fixed, a crash replays it), and the pipeline no further behind than
        ``MAX_UNAPPLIED_WRITES`` writes or ``MAX_UNAPPLIED_FILES`` ingest files.

        Raises:
            WriteTimeout: the pipeline did not catch up within ``WRITE_TIMEOUT_S``.
        """
        self.make_durable(seq)
        committed = self.engine.committed_seq()
        with self._durable:
            while self._file_ends and self._file_ends[0] <= committed:
                self._file_ends.popleft()
            behind = len(self._file_ends)
            target = 0
            if behind > MAX_UNAPPLIED_FILES:  # wait until half of them are applied
                target = self._file_ends[behind - MAX_UNAPPLIED_FILES // 2]
        if seq - committed > MAX_UNAPPLIED_WRITES:
            target = max(target, seq - MAX_UNAPPLIED_WRITES // 2)
        if target:
            self.engine.wait_for(target, WRITE_TIMEOUT_S)

    def wait(self, seq: int) -> None:
        """Return once the write with ``seq`` is committed (durable first, then applied)."""
        self.make_durable(seq)
        self.engine.wait_for(seq, WRITE_TIMEOUT_S)

    def pipeline_errors(self, first: int, last: int) -> dict[int, CqlError]:
        """Errors the pipeline recorded for writes ``first..last`` (e.g. a list index)."""
        snap = self.engine.snapshot()
        if snap.version_of("errors") is None:
            return {}
        window: list[tuple[str, str, Any]] = [("seq", ">=", first), ("seq", "<=", last)]
        errs = snap.read("errors", window, prune=window)  # files by their seq statistics
        out: dict[int, CqlError] = {}
        for row in errs.sort_by("seq").to_pylist():
            cls = CqlError.by_code.get(row["code"], InvalidRequest)
            out[row["seq"]] = cls(row["message"])
        return out

    def conditional_result(self, stmt: ast.Statement, seq: int, keyspace: str | None) -> ResultSet:
        """The result set of the conditional write committed as ``seq``: ScyllaDB's
        ``[applied]`` and the old row's columns, one row per statement
        (``cqlcdc.storage.conditions``)."""
        from cqlcdc.cdc.processor import OUTCOMES
        from cqlcdc.storage.conditions import result_columns
        from cqlcdc.types import native_type

        statements = stmt.statements if isinstance(stmt, ast.Batch) else (stmt,)
        writes = [s for s in statements if isinstance(s, ast.Insert | ast.Update | ast.Delete)]
        schema = self.table(writes[0].table, keyspace)
        names = list(result_columns(schema, writes, isinstance(stmt, ast.Batch)))
        types = [c.type.frozen() for n in names if (c := schema.column(n)) is not None]
        snap = self.engine.snapshot()
        if snap.version_of(OUTCOMES) is None:
            raise ServerError(f"The outcome of conditional write seq={seq} was not recorded")
        window: list[tuple[str, str, Any]] = [("seq", ">=", seq), ("seq", "<=", seq)]
        found = snap.read(OUTCOMES, window, prune=window).to_pylist()
        if not found:
            raise ServerError(f"The outcome of conditional write seq={seq} was not recorded")
        outcome = found[0]
        rows = [
            (
                outcome["applied"],
                *(
                    None if cell is None else ctype.deserialize(cell)
                    for cell, ctype in zip(row, types, strict=True)
                ),
            )
            for row in outcome["rows"]
        ]
        return ResultSet(["[applied]", *names], [native_type("boolean"), *types], rows)

    # -- CDC generations, initial scans, TTL sweeps, clock ticks -----------------------------

    def new_cdc_generation(self) -> int:
        """Start a new CDC generation now: later writes go to fresh stream ids.

        Earlier writes keep their streams; clients find both generations through
        ``system_distributed.cdc_generation_timestamps``. Returns its timestamp (ms).
        """
        from cqlcdc.cdc.processor import GENERATIONS_FILE

        self.flush()
        with self.lock:
            ts_ms = max(
                self.timestamp_us() // 1000, self.generations.generations[-1].timestamp_ms + 1
            )
            self.generations.add(ts_ms, int.from_bytes(os.urandom(8), "big"))
            self.generations.save(self.data_dir / GENERATIONS_FILE)
            self._last_ts = max(self._last_ts, ts_ms * 1000)
            return ts_ms

    def start_initial_scan(
        self, table: ast.QualifiedName, feed: str, keyspace: str | None = None
    ) -> InitialScan:
        """Begin exporting the rows a new feed's table holds now (YDB's initial scan).

        Scan records, one per base partition, enter the ingest log in chunks while other
        writes go on; ``InitialScan.step()`` appends the next chunk (the background thread
        calls it until done).
        """
        from cqlcdc.cdc.feeds import table_feeds

        schema = self.table(table, keyspace)
        topic = next(f.topic for f in table_feeds(schema) if f.name == feed)
        snap = self.engine.snapshot()
        pks: list[tuple[bytes, int]] = []
        output = base_output(schema)
        if snap.version_of(output) is not None:
            truncated = self.processor.truncations.upto(schema.table_id)
            rows = snap.read(output, [("seq", ">", truncated)], ["pk", "token"])
            pks = sorted(set(zip(rows["pk"].to_pylist(), rows["token"].to_pylist(), strict=True)))
        with self.lock:
            step = self.timestamp_us() // 1000
            tx_id = self.next_seq - 1
            self.processor.scans.put(
                schema.table_id,
                topic,
                first_seq=self.next_seq,
                last_seq=None,
                step=step,
                tx_id=tx_id,
            )
        return InitialScan(self, schema, topic, pks, step, tx_id)

    def sweep_expired(self, now_s: int | None = None) -> int:
        """Report TTL expiry to feeds with ``EXPIRY_EVENTS``: one sweep record per partition
        and expiry second that has passed (the background sweeper calls this every second).

        Returns the number of sweep records appended.
        """
        from cqlcdc.cdc.feeds import active_feeds
        from cqlcdc.cdc.processor import expiry_output

        now = int(time.time()) if now_s is None else now_s
        path = self.data_dir / "sweeps.json"
        if self._swept is None:  # read once: this process is the file's one writer
            text = path.read_text()
            self._swept = json.loads(text) if text else {}
        swept = dict(self._swept)
        swept_before = dict(swept)  # the file is rewritten only when a sweep moved on
        snap = self.engine.snapshot()
        appended = 0
        with self.lock:
            for schema in self._catalog.tables():
                # feeds with EXPIRY_EVENTS, and per-row TTL tables (their expiration deletes)
                if schema.ttl_column is None and not any(
                    f.options.ttl_expiry_events for f in active_feeds(schema)
                ):
                    continue
                if schema.table_id in self.engine.stopped:
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
                records = [
                    self.record(
                        schema, token, pk, encode_payload(SweepRequest(expiry_s)), self.next_seq + i
                    )
                    for i, (expiry_s, pk, token) in enumerate(pairs)
                ]
                if records:
                    self.append(records)
                    appended += len(records)
                    swept[schema.table_id] = now
            last = self.next_seq - 1
        if appended:
            self.make_durable(last)
        if swept != swept_before:
            path.write_atomically(json.dumps(swept))
            self._swept = swept
        return appended

    def tick_idle_feeds(self, now_ms: int | None = None) -> int:
        """Let feeds with BARRIERS_INTERVAL emit barriers while their table is idle: one clock
        tick record per table that had no write for an interval. Returns ticks appended."""
        from cqlcdc.cdc.feeds import active_feeds
        from cqlcdc.cdc.processor import TICK_PK
        from cqlcdc.storage.token import MIN_TOKEN

        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        with self.lock:
            records: list[IngestRecord] = []
            for schema in self._catalog.tables():
                intervals = [
                    f.options.barriers_interval_ms
                    for f in active_feeds(schema)
                    if f.options.barriers_interval_ms
                ]
                if not intervals or schema.table_id in self.engine.stopped:
                    continue
                interval = max(min(intervals), 1000)
                last = max(
                    self.last_write_ms.get(schema.table_id, 0),
                    self._last_tick_ms.get(schema.table_id, 0),
                )
                if now - last < interval:
                    continue
                payload = encode_payload(TickRequest(now))
                tick = self.record(
                    schema, MIN_TOKEN, TICK_PK, payload, self.next_seq + len(records)
                )
                records.append(tick)
                self._last_tick_ms[schema.table_id] = now
            self.append(records)
        if records:
            self.make_durable(records[-1].seq)
        return len(records)

    def _sweeper(self) -> None:
        while not self._stop.wait(self.sweep_interval_s):
            try:
                self.sweep_expired()
                self.tick_idle_feeds()
            except Exception as e:
                if isinstance(e, OSError) or isinstance(e.__cause__, OSError):
                    # the disk (full): nothing was written, the next interval tries again
                    log.warning("TTL sweep not written, tried again in %gs: %s",
                                self.sweep_interval_s, e)  # fmt: skip
                    continue
                self._sweep_error = e  # surfaced by the next flush(), never dropped
                return

    # -- reads -------------------------------------------------------------------------------

    def table_location(self, table: str, keyspace: str | None = None) -> Location:
        """The Delta table directory of a CDC log table (``ks.t_scylla_cdc_log``), for
        readers outside the engine (deltalake, DuckDB, Polars, Spark).

        Besides the log table's own columns (types in docs/types.md) it holds the internal
        columns ``_bucket``, ``_pk``, ``_seq`` and ``_expiry_s`` (the second the row's log
        TTL runs out, 0 for never; expired rows are skipped by SELECT and purged later).
        Read it at the committed version (``committed_version``) to see whole writes only.
        """
        ks, _, name = table.rpartition(".")
        schema = self.table(ast.QualifiedName(ks or None, name), keyspace)
        if schema.log_of is None:
            raise InvalidRequest(f"{schema.qualified_name} is not a CDC log table")
        base = self._catalog.table(schema.keyspace, schema.log_of)
        if base is None:
            raise InvalidRequest(f"the base table of {schema.qualified_name} is gone")
        return self.engine.tables_dir / log_output(base)

    def committed_version(self, table: str, keyspace: str | None = None) -> int | None:
        """The Delta version of ``table_location(table)`` holding every committed write."""
        self.flush()
        ks, _, name = table.rpartition(".")
        schema = self.table(ast.QualifiedName(ks or None, name), keyspace)
        base = self._catalog.table(schema.keyspace, schema.log_of or schema.name)
        if base is None:
            return None
        return self.engine.snapshot().version_of(log_output(base))


class InitialScan:
    """Appends the scan records of one feed's initial scan, a chunk at a time (``feed`` is
    the topic of the feed's incarnation)."""

    def __init__(
        self,
        coordinator: Coordinator,
        schema: TableSchema,
        feed: str,
        partitions: list[tuple[bytes, int]],
        step: int,
        tx_id: int,
        chunk: int = 256,
    ) -> None:
        self.coordinator = coordinator
        self.schema = schema
        self.feed = feed
        self.pending = list(partitions)
        self.step_ms = step
        self.tx_id = tx_id
        self.chunk = chunk
        self.done = False

    def step(self, count: int | None = None) -> int:
        """Append scan records for the next ``count`` partitions (default: one chunk)."""
        c = self.coordinator
        take = self.pending[: count or self.chunk]
        del self.pending[: len(take)]
        with c.lock:
            payload = encode_payload(ScanRequest(self.feed, self.step_ms, self.tx_id, self.step_ms))
            records = [
                c.record(self.schema, token, pk, payload, c.next_seq + i)
                for i, (pk, token) in enumerate(take)
            ]
            c.append(records)
            if not self.pending and not self.done:
                self.done = True
                scans = c.processor.scans
                entry = scans.get(self.schema.table_id, self.feed) or {}
                scans.put(
                    self.schema.table_id,
                    self.feed,
                    first_seq=int(entry.get("first_seq") or c.next_seq),
                    last_seq=c.next_seq - 1,
                    step=self.step_ms,
                    tx_id=self.tx_id,
                )
        if records:
            c.make_durable(records[-1].seq)
        return len(take)

    def run(self) -> None:
        while not self.done:
            self.step()

    def run_in_background(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name=f"initial-scan-{self.feed}", daemon=True)
        thread.start()
        self.coordinator._scanners.append(thread)
        return thread


def _host_id(data_dir: Location) -> uuid.UUID:
    """The data directory's host id: made once, the same on every restart."""
    path = data_dir / "host_id"
    text = path.read_text()
    if text:
        return uuid.UUID(text.strip())
    host_id = uuid.uuid4()
    path.write_atomically(str(host_id))
    return host_id


__all__ = ["DEFAULT_BUCKETS", "WRITE_TIMEOUT_S", "Coordinator", "DdlOutcome", "InitialScan"]
