"""Writes no client sent: TTL sweeps, clock ticks, initial scans and new CDC generations.

They enter the ingest log as every write does (``record``, ``append`` and ``make_durable``
of the coordinator, under its lock), so the pipeline orders them among the clients' writes.
The sweeper thread sweeps expired partitions and ticks idle feeds once a second; an initial
scan appends its records a chunk at a time from a thread of its own. They name what they
need of the coordinator as ``WritePath``, never the coordinator itself, so it can own them
without an import circle.

>>> background = BackgroundWrites(coordinator)  # doctest: +SKIP
>>> background.sweep_expired(now_s=int(time.time()) + 60)  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Protocol

from cqlcdc.cdc.data_dir import GENERATIONS_FILE
from cqlcdc.cdc.outputs import base_output, expiry_output
from cqlcdc.cdc.processor import TICK_PK
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import InvalidRequest, ServerError
from cqlcdc.storage.codec import ScanRequest, SweepRequest, TickRequest, encode_payload
from cqlcdc.storage.token import MIN_TOKEN

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cqlcdc.cdc.processor import CoreProcessor
    from cqlcdc.cdc.streams import Generations
    from cqlcdc.coordinator.clocks import WriteClocks
    from cqlcdc.cql import ast
    from cqlcdc.datadir.records import IngestRecord
    from cqlcdc.location import Location
    from cqlcdc.pipeline.engine import Engine
    from cqlcdc.schema.catalog import Catalog
    from cqlcdc.schema.model import TableSchema

log = logging.getLogger(__name__)


class WritePath(Protocol):
    """What background writes need of the coordinator (``owner.Coordinator``): its way into
    the ingest log, its clocks, the catalog, the engine's snapshot and the sweeper's knobs."""

    lock: threading.Lock
    data_dir: Location
    engine: Engine
    processor: CoreProcessor
    generations: Generations
    clocks: WriteClocks
    last_write_ms: dict[str, int]
    sweep_interval_s: float

    @property
    def next_seq(self) -> int: ...

    @property
    def catalog(self) -> Catalog: ...

    def table(self, name: ast.QualifiedName, keyspace: str | None) -> TableSchema: ...

    def record(
        self, schema: TableSchema, token: int, pk: bytes, payload: bytes, seq: int
    ) -> IngestRecord: ...

    def append(self, records: Sequence[IngestRecord]) -> None: ...

    def make_durable(self, seq: int) -> None: ...

    def flush(self) -> None: ...


class BackgroundWrites:
    """The writes of one coordinator that no client sent, and the threads that make them
    (see the module docstring). ``start`` starts the sweeper; ``stop`` ends it."""

    __slots__ = ("_c", "_last_tick_ms", "_scanners", "_stop", "_sweep_error", "_swept", "_thread")

    def __init__(self, coordinator: WritePath) -> None:
        self._c = coordinator
        self._swept: dict[str, int] | None = None  # sweeps.json, once read
        self._last_tick_ms: dict[str, int] = {}
        self._scanners: list[threading.Thread] = []
        self._sweep_error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sweeper, name="ttl-sweeper", daemon=True)

    # -- the threads -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the sweeper: sweeps and ticks every ``sweep_interval_s``."""
        self._thread.start()

    def stop(self) -> None:
        """Stop the sweeper (a sweep under way ends first); initial scans go on."""
        self._stop.set()
        self._thread.join()

    def join_scans(self) -> None:
        """Return once every initial scan running in the background has appended its
        records (closing waits for them before its flush)."""
        for thread in list(self._scanners):
            thread.join()

    def raise_failure(self) -> None:
        """Raise, once, why the sweeper stopped (a flush surfaces it, so it is never lost).

        Raises:
            ServerError: the sweeper failed.
        """
        if self._sweep_error is not None:
            err, self._sweep_error = self._sweep_error, None
            raise ServerError(f"TTL sweeper failed: {err}") from err

    def _sweeper(self) -> None:
        c = self._c
        while not self._stop.wait(c.sweep_interval_s):
            try:
                self.sweep_expired()
                self.tick_idle_feeds()
            except Exception as e:
                if isinstance(e, OSError) or isinstance(e.__cause__, OSError):
                    # the disk (full): nothing was written, the next interval tries again
                    log.warning("TTL sweep not written, tried again in %gs: %s",
                                c.sweep_interval_s, e)  # fmt: skip
                    continue
                self._sweep_error = e  # surfaced by the next flush(), never dropped
                return

    # -- CDC generations ---------------------------------------------------------------------

    def new_cdc_generation(self) -> int:
        """Start a new CDC generation now: later writes go to fresh stream ids.

        Earlier writes keep their streams; clients find both generations through
        ``system_distributed.cdc_generation_timestamps``. Returns its timestamp (ms).
        """
        c = self._c
        c.flush()
        with c.lock:
            ts_ms = max(
                c.clocks.timestamp_us() // 1000, c.generations.generations[-1].timestamp_ms + 1
            )
            c.generations.add(ts_ms, int.from_bytes(os.urandom(8), "big"))
            c.generations.save(DocumentDirectory(c.data_dir).document(GENERATIONS_FILE))
            c.clocks.advance_to(ts_ms * 1000)
            return ts_ms

    # -- initial scans -----------------------------------------------------------------------

    def start_initial_scan(
        self, table: ast.QualifiedName, feed: str, keyspace: str | None = None
    ) -> InitialScan:
        """Begin exporting the rows a new feed's table holds now (YDB's initial scan).

        Scan records, one per base partition, enter the ingest log in chunks while other
        writes go on; ``InitialScan.step()`` appends the next chunk (``run_in_background``
        calls it until done).
        """
        from cqlcdc.cdc.feeds import table_feeds

        c = self._c
        schema = c.table(table, keyspace)
        topic = next(f.topic for f in table_feeds(schema) if f.name == feed)
        pks = self._live_partitions(schema)
        with c.lock:
            step = c.clocks.timestamp_us() // 1000
            tx_id = c.next_seq - 1
            c.processor.scans.put(
                schema.table_id,
                topic,
                first_seq=c.next_seq,
                last_seq=None,
                step=step,
                tx_id=tx_id,
            )
        return InitialScan(c, schema, topic, pks, step, tx_id)

    def run_in_background(self, scan: InitialScan) -> threading.Thread:
        """Run ``scan`` to its end in a thread of its own (``join_scans`` waits for it)."""
        thread = threading.Thread(target=scan.run, name=f"initial-scan-{scan.feed}", daemon=True)
        thread.start()
        self._scanners.append(thread)
        return thread

    def check_not_scanning(self, table: ast.QualifiedName, feed: str, keyspace: str | None) -> None:
        """YDB disables only a Ready feed: one whose initial scan is still appending its scan
        records (state Scan) is refused, as YDB refuses it. (Once they are all appended, the
        flush before the DDL has applied them.)

        Raises:
            InvalidRequest: the feed's initial scan is not finished.
        """
        from cqlcdc.cdc.feeds import table_feeds

        c = self._c
        schema = c.table(table, keyspace)
        for f in table_feeds(schema):
            scan = c.processor.scans.get(schema.table_id, f.topic)
            if f.name == feed and scan is not None and scan["last_seq"] is None:
                raise InvalidRequest(
                    f"Cannot switch state of changefeed {feed}: from Scan to Disabled "
                    f"(its initial scan is not finished)"
                )

    def _live_partitions(self, schema: TableSchema) -> list[tuple[bytes, int]]:
        """Every partition of ``schema``'s base table written since its last truncation,
        as (pk, token), in order."""
        c = self._c
        snap = c.engine.snapshot()
        output = base_output(schema)
        if snap.version_of(output) is None:
            return []
        truncated = c.processor.truncations.upto(schema.table_id)
        rows = snap.read(output, [("seq", ">", truncated)], ["pk", "token"])
        return sorted(set(zip(rows["pk"].to_pylist(), rows["token"].to_pylist(), strict=True)))

    # -- TTL sweeps --------------------------------------------------------------------------

    def sweep_every_partition(self, schema: TableSchema) -> None:
        """After ``ALTER TABLE ... TTL e``: a sweep of every partition at the next second,
        so rows written before (no write scheduled them) expire as ScyllaDB's scanner
        expires them; each sweep schedules its partition's next expiration."""
        c = self._c
        pks = self._live_partitions(schema)
        if not pks:
            return
        payload = encode_payload(SweepRequest(int(time.time())))
        with c.lock:
            records = [
                c.record(schema, token, pk, payload, c.next_seq + i)
                for i, (pk, token) in enumerate(pks)
            ]
            c.append(records)
            last = c.next_seq - 1
        c.make_durable(last)

    def sweep_expired(self, now_s: int | None = None) -> int:
        """Report TTL expiry to feeds with ``EXPIRY_EVENTS``: one sweep record per partition
        and expiry second that has passed (the sweeper calls this every second).

        Returns the number of sweep records appended.
        """
        from cqlcdc.cdc.feeds import active_feeds

        c = self._c
        now = int(time.time()) if now_s is None else now_s
        path = c.data_dir / "sweeps.json"
        if self._swept is None:  # read once: this process is the file's one writer
            text = path.read_text()
            self._swept = json.loads(text) if text else {}
        swept = dict(self._swept)
        swept_before = dict(swept)  # the file is rewritten only when a sweep moved on
        snap = c.engine.snapshot()
        appended = 0
        with c.lock:
            for schema in c.catalog.tables():
                # feeds with EXPIRY_EVENTS, and per-row TTL tables (their expiration deletes)
                if schema.ttl_column is None and not any(
                    f.options.ttl_expiry_events for f in active_feeds(schema)
                ):
                    continue
                if schema.table_id in c.engine.stopped:
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
                    c.record(
                        schema, token, pk, encode_payload(SweepRequest(expiry_s)), c.next_seq + i
                    )
                    for i, (expiry_s, pk, token) in enumerate(pairs)
                ]
                if records:
                    c.append(records)
                    appended += len(records)
                    swept[schema.table_id] = now
            last = c.next_seq - 1
        if appended:
            c.make_durable(last)
        if swept != swept_before:
            path.write_atomically(json.dumps(swept))
            self._swept = swept
        return appended

    # -- clock ticks -------------------------------------------------------------------------

    def tick_idle_feeds(self, now_ms: int | None = None) -> int:
        """Let feeds with BARRIERS_INTERVAL emit barriers while their table is idle: one clock
        tick record per table that had no write for an interval. Returns ticks appended."""
        from cqlcdc.cdc.feeds import active_feeds

        c = self._c
        now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        with c.lock:
            records: list[IngestRecord] = []
            for schema in c.catalog.tables():
                intervals = [
                    f.options.barriers_interval_ms
                    for f in active_feeds(schema)
                    if f.options.barriers_interval_ms
                ]
                if not intervals or schema.table_id in c.engine.stopped:
                    continue
                interval = max(min(intervals), 1000)
                last = max(
                    c.last_write_ms.get(schema.table_id, 0),
                    self._last_tick_ms.get(schema.table_id, 0),
                )
                if now - last < interval:
                    continue
                payload = encode_payload(TickRequest(now))
                tick = c.record(schema, MIN_TOKEN, TICK_PK, payload, c.next_seq + len(records))
                records.append(tick)
                self._last_tick_ms[schema.table_id] = now
            c.append(records)
        if records:
            c.make_durable(records[-1].seq)
        return len(records)


class InitialScan:
    """Appends the scan records of one feed's initial scan, a chunk at a time (``feed`` is
    the topic of the feed's incarnation)."""

    def __init__(
        self,
        coordinator: WritePath,
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


__all__ = ["BackgroundWrites", "InitialScan", "WritePath"]
