"""The coordinator of one data directory: the engine, the lease, the lock, the catalog.

A process opens a data directory once, as one ``Coordinator``; sessions (``cqlcdc.Session``)
are cheap facades over it, one per connection, holding only a current keyspace and their
prepared statements. Every ingest record enters the log through ``Coordinator.append``,
under one lock, so seqs reach the log in order; DDL builds a new catalog and swaps it in
whole, so the sweeper, the micro-batches and reads each see one consistent catalog. Its
parts: the write clocks (``clocks``), the group commit of ingest appends
(``group_commit``), the writes no client sent (``background``).

>>> coordinator = Coordinator("/tmp/cqlcdc-demo")  # doctest: +SKIP
>>> session = Session(coordinator, keyspace="ks")  # doctest: +SKIP  (cqlcdc.session)
"""

from __future__ import annotations

import os
import tempfile
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cqlcdc.auth import RoleStore
from cqlcdc.cdc.data_dir import load_generations
from cqlcdc.cdc.outputs import log_output
from cqlcdc.cdc.processor import CoreProcessor
from cqlcdc.changefeed import parse_feed_options
from cqlcdc.coordinator.background import BackgroundWrites
from cqlcdc.coordinator.clocks import WriteClocks
from cqlcdc.coordinator.group_commit import OBJECT_STORE_LINGER_S, GroupCommit
from cqlcdc.cql import ast
from cqlcdc.datadir.lease import Lease
from cqlcdc.datadir.records import IngestRecord
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import InvalidRequest, ServerError
from cqlcdc.location import Location
from cqlcdc.pipeline.admission import admit
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.changes import SchemaEvent, schema_changes
from cqlcdc.schema.describe import describe_statement
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.token import bucket_of
from cqlcdc.system.local import NodeInfo
from cqlcdc.system.tables import SYSTEM_CATALOG, SYSTEM_KEYSPACES, system_table

DEFAULT_BUCKETS = 16
WRITE_TIMEOUT_S = 120.0


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
            else 30 s; ``cqlcdc.datadir.lease``).

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

        self._catalog = Catalog(DocumentDirectory(self.data_dir))
        self._catalog.admission = admit
        # who may log in and what each role may do (cqlcdc.access checks sessions against it)
        self.roles = RoleStore(self.data_dir / "auth" / "roles.json")
        self.generations = load_generations(
            DocumentDirectory(self.data_dir), num_buckets, int.from_bytes(os.urandom(8), "big")
        )
        self.num_buckets = self.generations.generations[0].num_ranges
        # who this node is to clients (system.local); the server sets where it listens
        self.node = NodeInfo(host_id=_host_id(self.data_dir), data_dir=str(self.data_dir))
        # the core reads schemas through this coordinator: always the current snapshot
        self.processor = CoreProcessor(DocumentDirectory(self.data_dir), self, self.aws_region)
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
        # the queue of records on their way into the ingest log, appended a group at a time
        linger_s = 0.0 if self.data_dir.is_local else OBJECT_STORE_LINGER_S
        self.group_commit = GroupCommit(self.ingest, self.lock, linger_s)
        self.cdc_operations = self.group_commit.cdc_operations  # counted once appended
        self.closed = False
        # the background writes' knobs: run a new feed's initial scan by itself, and how
        # often the sweeper sweeps expired partitions and ticks idle feeds
        self.autoscan = True
        self.sweep_interval_s = 1.0
        # write timestamps, the write clock and the seeds (call with ``lock`` held)
        self.clocks = WriteClocks(int.from_bytes(os.urandom(16), "big"))
        self.last_write_ms: dict[str, int] = {}
        # bulk forms of prepared writes, by (query, keyspace, table_id, schema_version)
        self.bulk_plans: dict[tuple[str, str | None, str, int], Any] = {}
        self.background = BackgroundWrites(self)
        self.background.start()

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Wait for acknowledged writes to commit, then stop the engine and the sweeper."""
        if self.closed:
            return
        self.closed = True
        self.group_commit.close()
        self.background.stop()
        try:
            self.background.join_scans()
            self.flush()
        finally:
            self.engine.stop()

    def kill(self) -> None:
        """Stop without flushing, as a crash would (tests of what survives one)."""
        self.closed = True
        self.group_commit.close()
        self.background.stop()
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
        return self._catalog.existing_table(name, keyspace)

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
            self.background.check_not_scanning(stmt.name, stmt.action.name, keyspace)
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
                stmt = replace(
                    stmt, action=replace(stmt.action, timestamp=self.clocks.timestamp_us())
                )
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
            self.background.sweep_every_partition(self.table(stmt.name, keyspace))
        if scan is not None:
            # writes validated before the ADD (appended by other connections after the flush
            # above) are not changes of the new feed: commit them so the scan's snapshot holds
            # their partitions
            self.flush()
            scanner = self.background.start_initial_scan(scan[0], scan[1], keyspace)
            if self.autoscan:
                self.background.run_in_background(scanner)
        return outcome

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

    # -- the one way into the ingest log ----------------------------------------------------

    def record(
        self,
        schema: TableSchema,
        token: int,
        pk: bytes,
        payload: bytes,
        seq: int,
        bucket: int | None = None,
    ) -> IngestRecord:
        """An ingest record of ``schema``'s partition ``pk``: its bucket from its token, or
        ``bucket`` as given (a bulk chunk's, which may span buckets).

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
            bucket=bucket_of(token, self.num_buckets) if bucket is None else bucket,
            token=token,
            pk=pk,
            payload=payload,
        )

    @property
    def next_seq(self) -> int:
        """The seq of the next write (read with ``lock`` held)."""
        return self.group_commit.next_seq

    def append(self, records: Sequence[IngestRecord]) -> None:
        """Queue records for the ingest log: the one way in (call with ``lock`` held; seqs
        from ``next_seq`` on, increasing). They are durable once ``make_durable`` (or
        ``wait``) returns for their last seq (``GroupCommit.append``)."""
        self.group_commit.append(records)

    def make_durable(self, seq: int) -> None:
        """Return once every record up to ``seq`` is durable in the ingest log (call without
        ``lock`` held); concurrent writers share one append (``GroupCommit.make_durable``).

        Raises:
            ServerError: the append holding ``seq`` failed.
        """
        self.group_commit.make_durable(seq)

    # -- waiting -----------------------------------------------------------------------------

    def flush(self) -> None:
        """Wait until every write acknowledged to the ingest log is committed. A write whose
        append failed was never acknowledged and is not waited for, so reads of committed
        data go on while the disk is full."""
        self.background.raise_failure()
        while True:
            target = self.group_commit.flush_target()
            if target <= 0:
                return
            try:
                self.wait(target)
                return
            except ServerError:
                if not self.group_commit.failed(target):
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
        target = self.group_commit.backlog_target(seq, self.engine.committed_seq())
        if target:
            self.engine.wait_for(target, WRITE_TIMEOUT_S)

    def wait(self, seq: int) -> None:
        """Return once the write with ``seq`` is committed (durable first, then applied)."""
        self.make_durable(seq)
        self.engine.wait_for(seq, WRITE_TIMEOUT_S)

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


def _host_id(data_dir: Location) -> uuid.UUID:
    """The data directory's host id: made once, the same on every restart."""
    path = data_dir / "host_id"
    text = path.read_text()
    if text:
        return uuid.UUID(text.strip())
    host_id = uuid.uuid4()
    path.write_atomically(str(host_id))
    return host_id


__all__ = ["DEFAULT_BUCKETS", "WRITE_TIMEOUT_S", "Coordinator", "DdlOutcome"]
