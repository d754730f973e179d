"""The streaming engine: ingest files -> micro-batches -> the core per bucket -> Delta commits.

The data directory is a :class:`~cqlcdc.location.Location` (a local path or ``s3://...``);
everything durable is there, and the engine keeps only scratch locally (Spark's checkpoint,
thrown away at every start, and the tip file of the streaming source). Exactly once is
anchored on the data directory alone: the manifest says which batch and seq are committed
everywhere, ``batch.json`` says which seqs the batch being committed covers, and every output
records the batch id it holds. So a driver restarted anywhere, with no local state, resumes.

>>> engine = Engine("/tmp/data", processor, get_spark())  # doctest: +SKIP
>>> engine.start(); engine.open_ingest_log().append(records); engine.wait_for(seq, 5.0)
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from cqlcdc.datadir.commit import DataFile, Manifest, Snapshot, commit_output
from cqlcdc.datadir.containment import StoppedTable, failures_of_output, one_line, output_table_id
from cqlcdc.datadir.ingest import IngestLog
from cqlcdc.datadir.intent import BatchIntent
from cqlcdc.datadir.lease import Lease
from cqlcdc.datadir.records import INGEST_SCHEMA, BucketProcessor
from cqlcdc.errors import ServerError, WriteTimeout
from cqlcdc.location import Location
from cqlcdc.observe import events
from cqlcdc.pipeline import ingest_source, tip_pacing
from cqlcdc.pipeline.batch_timings import BatchTimings
from cqlcdc.pipeline.bucket_tasks import (
    FileTask,
    executor_min_bytes,
    in_range,
    process_groups,
    run_on_executors,
    runs_on_executors,
)
from cqlcdc.pipeline.containment import Containment
from cqlcdc.pipeline.engine_config import EngineConfig
from cqlcdc.pipeline.ingest_files import IngestFiles
from cqlcdc.pipeline.maintenance import Maintenance
from cqlcdc.pipeline.scratch import new_scratch_dir
from cqlcdc.pipeline.staged_outputs import finalize_staged
from cqlcdc.pipeline.supervision import Supervisor, retry_batch
from cqlcdc.pipeline.tip_pacing import TipPacer

# INGEST_SCHEMA as Spark sees it: how a caller reads ingest files into the frame it hands
# to ``process_batch`` (the streaming query hands over its source's frame)
INGEST_DDL = (
    "seq BIGINT NOT NULL, table_id STRING NOT NULL, schema_version INT NOT NULL, "
    "bucket INT NOT NULL, token BIGINT NOT NULL, pk BINARY NOT NULL, payload BINARY NOT NULL"
)


class Engine:
    """Runs the streaming query that turns ingest files into committed output tables.

    Layout of `data_dir`: ``ingest/`` (the ingest log), ``tables/<output>`` (Delta tables),
    ``manifest.json`` (last complete batch), ``batch.json`` (the seqs of the batch being
    committed). Local scratch, created at start and removed at stop: Spark's checkpoint (a
    fresh one at every start: the manifest is what a restart resumes from) and the source's
    tip file. One Engine per data_dir at a time (its lease enforces it).

    Args:
        data_dir: the data directory: a local path or an object-store Location.
        processor: the core (picklable).
        spark: the session to run on.
        config: how it runs (``EngineConfig``; default: its defaults).
        lease: the data directory's lease, when the caller took it already (start() takes
            it otherwise; stop() releases it).
    """

    def __init__(
        self,
        data_dir: Location | str | Path,
        processor: BucketProcessor,
        spark: SparkSession,
        config: EngineConfig | None = None,
        *,
        lease: Lease | None = None,
    ) -> None:
        self.config = config = config or EngineConfig()
        self.data_dir = Location.of(data_dir)
        self.ingest_dir = self.data_dir / "ingest"
        self.tables_dir = self.data_dir / "tables"
        for directory in (self.data_dir, self.ingest_dir, self.tables_dir):
            directory.makedirs()
        self._own_scratch = config.scratch_dir is None
        self.scratch_dir = Path(config.scratch_dir or new_scratch_dir())
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoint_dir = self.scratch_dir / "checkpoint"
        self.tip = self.scratch_dir / "tip"
        self.pacer = TipPacer(
            self.tip, tip_pacing.batch_interval_s(self.data_dir, config.batch_interval_s)
        )
        self._ran_batch = threading.Event()  # the query has run a batch since start
        self.processor = processor
        self.spark = spark
        self.num_partitions = config.num_partitions or spark.sparkContext.defaultParallelism
        # on a cluster, batches with this much payload run on the executors (None: local)
        self.executor_min_bytes = executor_min_bytes(spark)
        self._cond = threading.Condition()
        self._manifest = Manifest.load(self.data_dir)
        self._failure: BaseException | None = None
        self._query: StreamingQuery | None = None
        # between start() and stop(): a query that dies meanwhile is restarted, not reported
        self._running = False
        self._halt = threading.Event()  # stop() was called: no retry, no restart
        self._query_lock = threading.Lock()  # a restart and stop() never interleave
        # starts the query, and restarts it after a failure that is not the data's
        self._supervisor = Supervisor(
            self._start_query,
            lambda: self._query,
            lambda: self.committed_batch() + 1,
            self._fail,
            lambda: self._failure is not None,
            self._note_retry,
            self._halt,
            self._query_lock,
        )
        # the failure being retried, one line (a waiter whose wait times out is told it)
        self._retrying: str | None = None
        self._lease = lease or Lease(self.data_dir)
        # stopped tables and skipped records: the writes a batch does not apply
        self.containment = Containment(self.data_dir, self.tables_dir, processor)
        self._batch_id = self._manifest.batch_id + 1  # the batch being applied
        # batch.json as last read or written (read once per start: this process is its writer)
        self._intent = BatchIntent.load(self.data_dir)
        # driver-side handles of the output tables, kept at their latest committed version
        self._tables: dict[str, DeltaTable] = {}
        # the ingest files a batch reads, indexed as appends report them (no listing)
        self.ingest_files = IngestFiles(self.ingest_dir, self.pacer.show)
        self.maintenance = Maintenance(
            self.data_dir,
            self.tables_dir,
            processor,
            config.compaction,
            config.purge_interval_s,
            config.clock,
            self._tables,
            self.containment.output_stopped,
            self._publish,
        )
        self.batch_timings = BatchTimings()  # the last batches' phases, bounded

    # --- lifecycle ------------------------------------------------------------------------

    def open_ingest_log(self) -> IngestLog:
        """An IngestLog that appends for this engine: the way in for writes of this process
        (the one that owns the data directory). Its appends reach the engine as they return
        (``IngestFiles.note_appended``) and are held for it (``handoff``), so no batch lists
        the log."""
        return self.ingest_files.open_log()

    def start(self) -> None:
        """Start the streaming query, from the seq the manifest has committed up to.

        Raises:
            DataDirLocked: another process holds this data_dir.
        """
        if self._running:
            return
        self._lease.acquire()
        self.containment.load()
        with self._cond:
            self._failure = None
            self._retrying = None
        self._halt.clear()
        try:
            self._supervisor.first_start()
        except BaseException:
            self._lease.release()
            raise
        self._running = True
        self._supervisor.watch()

    def _start_query(self) -> None:
        """Start a streaming query from the seq the manifest has committed up to, with a
        fresh checkpoint (at the first start, and at each restart after a failure that is
        not the data's: ``Supervisor``). Called with ``_query_lock`` held."""
        self.scratch_dir.mkdir(parents=True, exist_ok=True)
        # Spark's checkpoint is scratch: the manifest (and batch.json) say where to resume
        shutil.rmtree(self.checkpoint_dir, ignore_errors=True)
        with self._cond:
            self._manifest = Manifest.load(self.data_dir)
        self._intent = BatchIntent.load(self.data_dir)
        self.pacer.reset(self._manifest.max_seq)
        self.ingest_files.reindex()
        self.pacer.show(self._manifest.max_seq, now=True)  # what a restart finds goes at once
        ingest_source.register(self.spark)
        self._ran_batch.clear()
        stream = (
            self.spark.readStream.format(ingest_source.NAME)
            .option("tip", str(self.tip))
            .option("start", str(self._manifest.max_seq))
            .option("maxRecordsPerTrigger", str(self.config.max_records_per_trigger))
            .option("data_dir", self.data_dir.uri)
            .option("storage_options", json.dumps(dict(self.data_dir.options)))
            .load()
        )
        self._query = (
            stream.writeStream.queryName(f"cqlcdc-{self.data_dir.name}")
            .foreachBatch(self.process_batch)
            .option("checkpointLocation", str(self.checkpoint_dir))
            .trigger(processingTime=self.config.trigger_interval)
            .start()
        )
        # the source starts one seq back, so a first batch runs now, in the background
        # (with nothing to commit, or what a restart finds): Spark's first-batch costs
        # (~3 s idle, planning this source's reads) overlap the client's start instead of
        # delaying its first write's wait; start itself does not wait for it

    def _fail(self, failure: BaseException) -> None:
        """The pipeline stops at `failure`: every waiting writer is told it."""
        with self._cond:
            self._failure = failure
            self._cond.notify_all()

    def _note_retry(self, error: BaseException) -> None:
        with self._cond:
            self._retrying = f"{type(error).__name__}: {one_line(str(error))}"
            self._cond.notify_all()

    def stop(self) -> None:
        """Stop the query (a batch in progress is finished or replayed on the next start)."""
        self._halt.set()  # a retry in progress gives up: the next start replays the batch
        self._running = False
        with self._query_lock:
            query, self._query = self._query, None
        if query is not None:
            query.stop()
        self._supervisor.join()
        self.pacer.stop()
        if self._own_scratch:
            shutil.rmtree(self.scratch_dir, ignore_errors=True)
        self._lease.release()
        with self._cond:
            self._cond.notify_all()

    def __enter__(self) -> Engine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def stopped(self) -> dict[str, StoppedTable]:
        """The stopped tables, by table id (``Containment``): their writes are held."""
        return self.containment.stopped

    @property
    def query(self) -> StreamingQuery | None:
        """The running streaming query, if started."""
        return self._query

    # --- waiting and reading --------------------------------------------------------------

    def committed_batch(self) -> int:
        """The id of the last batch committed in every output."""
        with self._cond:
            return self._manifest.batch_id

    def committed_seq(self) -> int:
        """The highest ingest seq whose batch is committed in every output."""
        with self._cond:
            return self._manifest.max_seq

    def maintain(self, force_vacuum: bool = False) -> int:
        """Compact the buckets that are due, and vacuum when its interval has passed (or
        ``force_vacuum``): ``Maintenance.maintain``. Returns the compaction commits made."""
        return self.maintenance.maintain(force_vacuum)

    def purge_expired(self) -> int:
        """Delete the expired rows (CDC log TTL) now: ``Maintenance.purge_expired``.
        Returns the rows deleted."""
        return self.maintenance.purge_expired()

    def snapshot(self) -> Snapshot:
        """A consistent view of all outputs as of the last complete batch."""
        with self._cond:
            return Snapshot(self.tables_dir, self._manifest)

    def wait_for(self, seq: int, timeout: float) -> None:
        """Block until the batch holding ingest record `seq` is committed in every output.

        While the pipeline retries a failure that is not the data's (a full disk, a Python
        worker that did not start), this waits on: the write is durable and will be applied.

        Raises:
            WriteTimeout: not committed within `timeout` seconds (the message says which
                failure the pipeline is retrying, if one).
            ServerError: the pipeline stopped at a failure that is the data's (UnappliedWrite;
                CorruptIngestFile if an ingest file is damaged), or it is not running.
        """
        deadline = time.monotonic() + timeout
        self.pacer.want(seq)  # someone waits: the source sees the log now, not on the interval
        while True:
            with self._cond:
                if self._manifest.max_seq >= seq:
                    return
                self._raise_if_failed()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    retrying = self._retrying
                    reason = f" (the pipeline is retrying after {retrying})" if retrying else ""
                    raise WriteTimeout(
                        f"Write seq {seq} not committed within {timeout:g} s{reason}"
                    )
                # bounded wait: the tip may need writing again (its disk was full)
                self._cond.wait(min(remaining, 0.5))
            self.pacer.want(seq)

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            if isinstance(self._failure, ServerError):
                raise self._failure
            raise ServerError(f"Pipeline failed: {self._failure}") from self._failure
        if not self._running:
            raise ServerError("Pipeline is not running")
        # a query that died of anything else is being restarted (``Supervisor``)

    # --- one micro-batch ------------------------------------------------------------------

    def process_batch(self, df: DataFrame, batch_id: int) -> None:
        """The foreachBatch function: commit the records of Spark's micro-batch `batch_id`
        exactly once.

        Runs in the driver. Spark's batch ids start again at every start (its checkpoint is
        scratch); the engine numbers its batches itself, from the manifest, and takes from
        Spark only the end of the seqs to apply (its offset log; a frame handed in by a
        caller is read instead). Records at or below the manifest's seq are committed
        already and skipped, so a replay is harmless.

        A failure is retried here from the last committed batch, by its kind
        (``supervision.retry_batch``); one that repeats on the same batch beyond that is
        the data's: the table it is attributed to stops alone and the batch runs again at
        once with its records held (``Containment.contain``); a failure no table can be
        blamed for stops the query.
        """
        end = ingest_source.batch_end(self.checkpoint_dir, batch_id)
        self.pacer.hold()
        try:
            retry_batch(
                lambda: self._process_batch(df, end),
                lambda: self._batch_id,
                self.containment.contain,
                self._note_retry,
                self._halt,
            )
            self._ran_batch.set()
            if self._retrying is not None:
                with self._cond:
                    self._retrying = None
        except Exception as err:
            if self._halt.is_set():
                raise
            failure = self.containment.stopped_at(err, self._batch_id)
            events.pipeline_failed(self._batch_id, failure)
            self._fail(failure)
            raise failure from err
        except BaseException as err:
            self._fail(err)
            raise
        finally:
            self.pacer.release()

    def _process_batch(self, df: DataFrame, end: int | None) -> None:
        """Commit the records up to seq `end` (None: those of `df`) past the manifest's.

        If ``batch.json`` shows that an earlier attempt of the next batch covered other
        seqs (a driver restarted, with a fresh Spark checkpoint, after some outputs
        committed it), that batch is committed first, exactly as it was, then the rest."""
        manifest = Manifest.load(self.data_dir)
        frame: pa.Table | None = None
        if end is None:  # called with a frame of its own (not by the streaming query)
            try:
                frame = df.toArrow().cast(INGEST_SCHEMA)
            except Exception as err:
                raise self.ingest_files.read_failure(
                    manifest.max_seq, manifest.batch_id + 1, err
                ) from err
            frame = in_range(frame, manifest.max_seq + 1, None)
            end = _max_seq(frame)
        if end <= manifest.max_seq:
            # committed everywhere already (a replay, or crash after the manifest)
            self._publish(manifest)
            return
        pending = self._intent
        if (
            pending is not None
            and pending.batch_id == manifest.batch_id + 1
            and pending.from_seq == manifest.max_seq
            and pending.to_seq != end
        ):
            self._apply(manifest, pending.to_seq, None)
            manifest = Manifest.load(self.data_dir)
            if end <= manifest.max_seq:
                return
        self._apply(manifest, end, frame)

    def _apply(self, manifest: Manifest, to_seq: int, frame: pa.Table | None) -> None:
        """Commit the records ``manifest.max_seq + 1 .. to_seq`` as the next batch: from
        `frame` when given, else from the ingest files that hold them."""
        started = time.perf_counter()
        batch_id = self._batch_id = manifest.batch_id + 1
        first = manifest.max_seq + 1
        intent = BatchIntent(batch_id, manifest.max_seq, to_seq)
        self._check_lease()
        if self._intent != intent:
            intent.save(self.data_dir)  # before any output commits this batch
            self._intent = intent
        paths: list[Location] | None = None
        if frame is not None:
            batch = in_range(frame, first, to_seq)
        else:
            paths = self.ingest_files.covering(first, to_seq)
            batch = self.ingest_files.read(paths, first, to_seq)
        # every record of the batch is done with once it commits: applied, skipped or held
        max_seq = max(manifest.max_seq, to_seq)
        records, set_aside = self.containment.set_aside(batch, batch_id)
        on_executors = runs_on_executors(
            self.processor, records, self.config.driver_max_rows, self.executor_min_bytes
        )
        if paths is None or not on_executors:
            in_driver: pa.Table | None = records
        else:
            in_driver = None
        planned = time.perf_counter()
        staged: dict[str, list[pa.Table]] = {}  # staged outputs of a batch run here
        num_rows = records.num_rows
        if in_driver is not None:
            files = process_groups(
                in_driver,
                self.processor,
                self.tables_dir,
                manifest.versions,
                batch_id,
                self._tables,
                staged,
            )
        else:
            assert paths is not None
            files = self._run_on_files(paths, (first, to_seq), manifest, batch_id)
        files += set_aside
        extra = manifest.extra
        files, extra = finalize_staged(
            self.processor, self.tables_dir, files, manifest, batch_id, max_seq, staged
        )
        processed = time.perf_counter()
        by_output: dict[str, list[DataFile]] = {}
        for file in files:
            by_output.setdefault(file.output, []).append(file)
        versions = dict(manifest.versions)
        # the tables' own outputs first, the shared ones (errors, held...) last: a table's
        # failed commit then leaves nothing of the batch in them, and its rerun (with the
        # table held) commits them whole
        for output in sorted(by_output, key=lambda o: (output_table_id(o) is None, o)):
            table = self._commit(output, by_output[output], batch_id)
            self._tables[output] = table
            versions[output] = table.version()
            self.maintenance.note_commit(output, by_output[output], table)
        new_manifest = Manifest(batch_id=batch_id, max_seq=max_seq, versions=versions, extra=extra)
        self._check_lease()
        new_manifest.save(self.data_dir)
        self._publish(new_manifest)
        self.ingest_files.trim(manifest.max_seq)
        committed = time.perf_counter()
        # maintenance after the publish: this batch's writes are acknowledged already
        self.maintenance.after_batch()
        maintained = time.perf_counter()
        timing = {
            "batch_id": float(batch_id),
            "rows": float(num_rows),
            "plan_s": planned - started,
            "process_s": processed - planned,
            "commit_s": committed - processed,
            "maintain_s": maintained - committed,
        }
        self.batch_timings.record(timing)
        events.batch_finished(timing)

    def _check_lease(self) -> None:
        """Raise LeaseLost when this process no longer owns the data directory (its lease
        ran out or was taken over): it must not commit. Checked by the running query before
        a batch's first write and before its manifest (a caller handing a frame to
        ``process_batch`` without ``start`` owns the directory by other means)."""
        if self._query is not None:
            self._lease.check()

    def _commit(self, output: str, files: list[DataFile], batch_id: int) -> DeltaTable:
        """``commit_output``, with a refusal of a table's output (a schema delta-rs does
        not take...) tagged with that table; the disk's errors are not."""
        with failures_of_output(output, "commit"):
            return commit_output(
                self.tables_dir,
                output,
                files,
                self.config.app_id,
                batch_id,
                self._tables.get(output),
            )

    def _run_on_files(
        self, paths: list[Location], seqs: tuple[int, int], manifest: Manifest, batch_id: int
    ) -> list[DataFile]:
        """A costly batch: one Spark task per slice of the buckets, each reading the files."""
        task = FileTask(
            self.processor,
            self.tables_dir,
            manifest.versions,
            batch_id,
            paths,
            seqs,
            self.num_partitions,
            sorted(self.containment.skipped),
            sorted(self.containment.stopped),
        )
        try:
            return run_on_executors(self.spark, task)
        except Exception as err:
            raise self.ingest_files.read_failure(manifest.max_seq, batch_id, err) from err

    def _publish(self, manifest: Manifest) -> None:
        with self._cond:
            self._manifest = manifest
            self._cond.notify_all()


def _max_seq(records: pa.Table) -> int:
    if records.num_rows == 0:
        return 0
    value = pc.max(records.column("seq")).as_py()
    return int(value) if value is not None else 0
