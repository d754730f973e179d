"""The bucket tasks of a micro-batch: the core run on each (table, bucket) group, and where.

A batch runs in the driver (``process_groups`` on the records it holds) unless it is costly
(``runs_on_executors``): then one Spark task per slice of the buckets reads the batch's
ingest files itself and runs the same ``process_groups`` (``FileTask``, ``run_on_executors``).
Both write the outputs' data files; the engine commits them. Nothing here keeps state
between batches, so a replayed batch does the same.

>>> files = process_groups(records, processor, tables_dir, versions, batch_id)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from pyspark.sql import SparkSession

from cqlcdc.bucket_groups import BucketGroup
from cqlcdc.datadir.commit import (
    DATA_FILE_SCHEMA,
    DataFile,
    VersionedReader,
    data_files_from_arrow,
    data_files_to_arrow,
    write_data_file,
)
from cqlcdc.datadir.containment import failures_of_output, one_line, table_tag
from cqlcdc.datadir.file_runs import BucketRuns
from cqlcdc.datadir.ingest import read_ingest_file
from cqlcdc.datadir.records import BucketProcessor
from cqlcdc.errors import UnappliedWrite
from cqlcdc.failure_text import cannot_apply
from cqlcdc.location import Location
from cqlcdc.pipeline.spark import is_cluster

# DATA_FILE_SCHEMA as Spark sees it (the mapInArrow result)
DATA_FILE_DDL = (
    "output STRING, path STRING, size BIGINT, num_records BIGINT, modification_time BIGINT, "
    "stats STRING, schema BINARY"
)
# on a cluster, a batch with this much ingest payload runs on the executors
# (``$CQLCDC_EXECUTOR_MIN_BYTES`` overrides it): below it, a Spark job's fixed cost
# (~0.3 s) outweighs what the executors would share
EXECUTOR_MIN_BYTES = 4 * 1024 * 1024
# buckets processed at once by process_groups
_BUCKET_THREADS = 2


def process_groups(
    records: pa.Table,
    processor: BucketProcessor,
    tables_dir: Location | str,
    versions: dict[str, int],
    batch_id: int,
    tables: dict[str, DeltaTable] | None = None,
    staged: dict[str, list[pa.Table]] | None = None,
    share: Callable[[int], bool] | None = None,
) -> list[DataFile]:
    """Run the core on every (table_id, bucket) group of `records` and write its outputs.

    The same function runs in the driver (small batches) and in executors (large ones).

    Args:
        records: ingest rows, in any order.
        processor: the core.
        tables_dir: root of the output tables.
        versions: the output versions the core's state reads see (the manifest's).
        batch_id: the micro-batch id, used in data file names.
        tables: open table handles to reuse for state reads (the driver's cache).
        staged: where the driver keeps the staged outputs (``processor.is_staged``) in memory
            for ``finalize_batch`` instead of writing them as files to read back.
        share: the buckets to process (an executor task's); None: all.

    Returns:
        The data files written: per output with rows, files of consecutive buckets.
    """
    if records.num_rows == 0:
        return []
    groups = processor.bucket_groups(records)
    if share is not None:
        groups = [g for g in groups if share(g.bucket)]
    state = VersionedReader(tables_dir, versions, tables)

    def run(group: BucketGroup) -> tuple[int, dict[str, pa.Table]]:
        table_id, bucket = group.table_id, group.bucket
        try:
            return bucket, processor.process_bucket(group, state)
        except (OSError, MemoryError):
            raise  # the machine, not the table (a full disk): not contained
        except UnappliedWrite as err:  # the failure is the table's: tagged for containment
            raise UnappliedWrite(f"{table_tag(table_id)} {one_line(err.message)}") from err
        except Exception as err:  # the core could not say which record: name them all
            raise UnappliedWrite(
                f"{table_tag(table_id)} "
                + cannot_apply(
                    group.first_seq,
                    group.last_seq,
                    f"table id {table_id}, bucket {bucket}",
                    f"{type(err).__name__}: {one_line(str(err))}",
                )
            ) from err

    # Buckets are independent (each reads the state at the manifest's versions and writes
    # its own outputs), so two run at once: most of a bucket's time is in Arrow, numpy and
    # Parquet, which release the GIL. Their outputs are taken in group order, so the files
    # and the staged rows come out as a sequential run makes them. An output's consecutive
    # buckets share a file until it is big enough (``BucketRuns``); files are written by a
    # small pool while the next buckets are processed.
    runs = BucketRuns()
    with (
        ThreadPoolExecutor(
            max_workers=_BUCKET_THREADS, thread_name_prefix="cqlcdc-bucket"
        ) as cores,
        ThreadPoolExecutor(max_workers=2, thread_name_prefix="cqlcdc-write") as pool,
    ):
        pending: list[Future[DataFile]] = []
        running: deque[Future[tuple[int, dict[str, pa.Table]]]] = deque()
        next_group = 0
        while next_group < len(groups) or running:
            while next_group < len(groups) and len(running) < _BUCKET_THREADS + 1:
                running.append(cores.submit(run, groups[next_group]))
                next_group += 1
            bucket, outputs = running.popleft().result()
            for output in sorted(outputs):
                rows = outputs[output]
                if rows.num_rows and staged is not None and processor.is_staged(output):
                    staged.setdefault(output, []).append(rows)
                elif rows.num_rows:
                    for done in runs.add(output, bucket, rows):
                        pending.append(
                            pool.submit(_write_output, tables_dir, output, done, batch_id)
                        )
        for output, rows in runs.drain():
            pending.append(pool.submit(_write_output, tables_dir, output, rows, batch_id))
        return [f.result() for f in pending]


def _write_output(
    tables_dir: Location | str, output: str, rows: pa.Table, batch_id: int
) -> DataFile:
    """``write_data_file``, with a failure that is about the rows (not the disk) tagged with
    the output's table, so the engine stops that table alone."""
    with failures_of_output(output, "write"):
        return write_data_file(tables_dir, output, rows, batch_id)


class FileTask:
    """The mapInArrow function of large batches: task ``part`` reads the micro-batch's ingest
    files itself from the data directory (a local path shared by local executors, or an
    object store), only the row groups of its buckets where a file is written by bucket, and
    runs the core on the buckets with ``bucket % parts == part``. Spark schedules the tasks;
    no record passes through it. Picklable; runs on executors, which need nothing of the
    driver's disk.
    """

    def __init__(
        self,
        processor: BucketProcessor,
        tables_dir: Location,
        versions: dict[str, int],
        batch_id: int,
        paths: list[Location],
        seqs: tuple[int, int],
        parts: int,
        skipped: list[int],
        held_tables: list[str],
    ) -> None:
        self.processor = processor
        self.tables_dir = tables_dir
        self.versions = versions
        self.batch_id = batch_id
        self.paths = paths
        self.seqs = seqs  # the batch's records: first..last seq (a file may hold more)
        self.parts = parts
        self.skipped = skipped  # seqs of records to drop (the driver reports them)
        self.held_tables = held_tables  # stopped tables: the driver holds their records

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for part in batch.column(0).to_pylist():

                def share(bucket: int, part: int = part) -> bool:
                    return bucket % self.parts == part

                # records spanning buckets (negative) are read by every task, which
                # processes its buckets' share of them
                records = in_range(
                    pa.concat_tables(
                        [read_ingest_file(p, lambda b: b < 0 or share(b)) for p in self.paths]
                    ),
                    *self.seqs,
                )
                if self.skipped:
                    kept = pc.invert(pc.is_in(records.column("seq"), pa.array(self.skipped)))
                    records = records.filter(kept)
                if self.held_tables:
                    held = pc.is_in(records.column("table_id"), pa.array(self.held_tables))
                    records = records.filter(pc.invert(held))
                files = process_groups(
                    records,
                    self.processor,
                    self.tables_dir,
                    self.versions,
                    self.batch_id,
                    share=share,
                )
                yield from data_files_to_arrow(files).to_batches()


def in_range(records: pa.Table, first: int, last: int | None) -> pa.Table:
    """The records with ``first <= seq <= last`` (no upper bound when `last` is None)."""
    seqs = records.column("seq")
    if records.num_rows == 0 or (
        pc.min(seqs).as_py() >= first and (last is None or pc.max(seqs).as_py() <= last)
    ):
        return records
    keep = pc.greater_equal(seqs, first)
    if last is not None:
        keep = pc.and_(keep, pc.less_equal(seqs, last))
    return records.filter(keep)


def executor_min_bytes(spark: SparkSession) -> int | None:
    """The payload from which a batch runs on the executors: ``EXECUTOR_MIN_BYTES`` (or
    ``$CQLCDC_EXECUTOR_MIN_BYTES``) on a cluster; None in local mode, where the executors
    share the driver's machine and a batch's size alone never sends it to them."""
    if not is_cluster(spark.sparkContext.master or "local"):
        return None
    return int(os.environ.get("CQLCDC_EXECUTOR_MIN_BYTES", EXECUTOR_MIN_BYTES))


def runs_on_executors(
    processor: BucketProcessor,
    records: pa.Table,
    driver_max_rows: int,
    min_bytes: int | None,
) -> bool:
    """Whether a batch runs as Spark tasks: when the writes the core applies one by one
    are many (``driver_max_rows``), or, on a cluster, when the batch holds data enough
    to matter (``min_bytes`` of payload: the executors then read it from the store
    themselves, in parallel, instead of the driver alone)."""
    if processor.driver_cost(records) > driver_max_rows:
        return True
    if min_bytes is None:
        return False
    return bool(records.column("payload").nbytes >= min_bytes)


def run_on_executors(spark: SparkSession, task: FileTask) -> list[DataFile]:
    """A costly batch: one Spark task per slice of the buckets (``task.parts``), each
    reading the batch's files and writing its outputs' data files. Raises what Spark
    raises (the engine tells a damaged ingest file from the rest)."""
    parts = task.parts
    result = spark.range(parts, numPartitions=parts).mapInArrow(task, DATA_FILE_DDL).toArrow()
    return data_files_from_arrow(result.cast(DATA_FILE_SCHEMA))
