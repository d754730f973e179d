"""The engine's streaming source: the ingest log as a Spark 4 Python stream source.

Offsets are ingest seqs (``{"seq": N}``: every record with seq <= N). Spark's file stream
source needed a Hadoop filesystem for the ingest directory, which pyspark's wheel has only for
local paths; this source needs none, so the ingest log may live in an object store.

The source learns the log's end from a *tip* file in the engine's local scratch directory,
written by the data directory's one writer after every append (``IngestLog.on_append``), so
polling for new records costs no request to the store. The engine does not scan the frame
the source gives ``foreachBatch``: it takes the batch's end offset from Spark's offset log and
reads the records itself (``Engine.process_batch``), in the driver or in executor tasks. The
frame still holds the batch's records, read here from the store, for anyone who scans it.

>>> register(spark)  # doctest: +SKIP
>>> spark.readStream.format("cqlcdc_ingest").option("start", "0")  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

from cqlcdc.datadir.ingest import list_ingest_files, read_ingest_file
from cqlcdc.datadir.records import INGEST_SCHEMA
from cqlcdc.location import Location

NAME = "cqlcdc_ingest"


def write_tip(tip: Path, seq: int) -> None:
    """Record ``seq`` as the log's last seq for the source (atomic rename; scratch, so no
    fsync: a lost tip is written again by the next append or the next start)."""
    tmp = tip.with_name(f".{tip.name}.{os.getpid()}")
    tmp.write_text(str(seq))
    os.replace(tmp, tip)


def read_tip(tip: str | Path) -> int:
    """The last seq the tip file records (0 when there is none yet)."""
    try:
        return int(Path(tip).read_text() or 0)
    except FileNotFoundError:
        return 0


def batch_end(checkpoint: Path, batch_id: int) -> int | None:
    """The end offset (a seq) Spark logged for micro-batch ``batch_id`` of this source, or
    None when the offset log has no such entry (a frame handed in by a caller)."""
    try:
        lines = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
    except FileNotFoundError:
        return None
    # "v1", the batch metadata, then one offset per source (ours is the only one)
    if len(lines) < 3 or not lines[0].startswith("v"):
        return None
    offset = json.loads(lines[2])
    if isinstance(offset, str):  # a source's JSON may be logged as a JSON string
        offset = json.loads(offset)
    return int(offset["seq"])


class IngestSource(DataSource):
    """``format("cqlcdc_ingest")``. Options: ``tip`` (the tip file), ``start`` (the seq the
    data directory's manifest has committed up to), ``data_dir`` and ``storage_options``
    (JSON) for reading the records, ``maxRecordsPerTrigger`` (0: no limit)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return (
            "seq BIGINT, table_id STRING, schema_version INT, bucket INT, token BIGINT, "
            "pk BINARY, payload BINARY"
        )

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return IngestStreamReader(dict(self.options))


class _SeqRange(InputPartition):
    def __init__(self, first: int, last: int) -> None:
        super().__init__((first, last))
        self.first = first
        self.last = last


class IngestStreamReader(DataSourceStreamReader):
    """Offsets from the tip file; one partition per batch that reads its records."""

    def __init__(self, options: dict[str, str]) -> None:
        self.tip = options["tip"]
        self.start = int(options.get("start", "0"))
        self.max_records = int(options.get("maxRecordsPerTrigger", "0"))
        self.data_dir = options.get("data_dir", "")
        self.storage_options: dict[str, str] = json.loads(options.get("storage_options", "{}"))

    def initialOffset(self) -> dict[str, int]:
        # one seq before the committed end: the query runs a first batch at once, which
        # commits nothing (the engine skips the seqs the manifest has) but pays Spark's
        # first-batch costs (planning this source's reads, the first foreachBatch call,
        # seconds on a loaded machine) while the client starts, not on its first write
        return {"seq": self.start - 1}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_records) if self.max_records > 0 else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        begin = int(start["seq"])
        end = max(read_tip(self.tip), begin)
        if isinstance(limit, ReadMaxRows) and limit.max_rows > 0:
            end = min(end, begin + limit.max_rows)
        return {"seq": end}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [_SeqRange(int(start["seq"]) + 1, int(end["seq"]))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _SeqRange)
        ingest = Location.of(self.data_dir, self.storage_options).child("ingest")
        for file in list_ingest_files(ingest):
            if file.last_seq < partition.first or file.first_seq > partition.last:
                continue
            records = read_ingest_file(file.path)
            seqs = records.column("seq")
            mine = pc.and_(
                pc.greater_equal(seqs, partition.first), pc.less_equal(seqs, partition.last)
            )
            yield from records.filter(mine).cast(INGEST_SCHEMA).to_batches()

    def commit(self, end: dict[str, int]) -> None:
        """Nothing: the engine trims the log once a batch is committed in every output."""


def register(spark: SparkSession) -> None:
    """Make ``format("cqlcdc_ingest")`` available to ``spark``."""
    spark.dataSource.register(IngestSource)


__all__ = ["NAME", "IngestSource", "batch_end", "read_tip", "register", "write_tip"]
