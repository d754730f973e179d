"""A Spark data source for changefeed topics (pyspark's Python Data Source API).

Batch: ``spark.read.format("cqlcdc_changefeed").option("path", data_dir)
.option("feed", "ks.t/name").load()``. Streaming: ``spark.readStream`` with the same options;
offsets are the per-partition next offsets of the topic, so a Spark query with a checkpoint
consumes each record exactly once (the topic's records never change once committed).

>>> register(spark)  # doctest: +SKIP
>>> spark.readStream.format("cqlcdc_changefeed").option("path", d).option("feed", f).load()
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)

if TYPE_CHECKING:
    from cqlcdc.location import Location

SCHEMA = "partition INT, offset BIGINT, key STRING, value STRING"


class _Range(InputPartition):
    """Offsets ``[start, end)`` of one topic partition."""

    def __init__(self, partition: int, start: int, end: int) -> None:
        super().__init__(partition)
        self.partition = partition
        self.start = start
        self.end = end


def _rows(path: Location, feed: str, part: _Range) -> Iterator[tuple[Any, ...]]:
    import json

    from cqlcdc.feed_reader import FeedReader

    reader = FeedReader(path, feed)
    for msg in reader.read(part.partition, part.start, on_gap="error"):
        if msg.offset >= part.end:
            break
        key = None if msg.key is None else json.dumps(msg.key)
        yield (msg.partition, msg.offset, key, json.dumps(msg.value))


class _BatchReader(DataSourceReader):
    """Pickled into the tasks with the data directory as a Location (never a driver path)."""

    def __init__(self, path: Location, feed: str) -> None:
        self.path = path
        self.feed = feed

    def partitions(self) -> Sequence[InputPartition]:
        from cqlcdc.feed_reader import FeedReader

        reader = FeedReader(self.path, self.feed)
        start = reader.earliest_offsets()
        end = reader.next_offsets()
        return [_Range(p, start[p], end[p]) for p in range(reader.partitions)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _Range)
        return _rows(self.path, self.feed, partition)


class _StreamReader(DataSourceStreamReader):
    """Offsets are ``{"<partition>": next_offset}``; a batch reads ``[start, end)``."""

    def __init__(self, path: Location, feed: str, starting: str) -> None:
        self.path = path
        self.feed = feed
        self.starting = starting

    def _reader(self) -> Any:
        from cqlcdc.feed_reader import FeedReader

        return FeedReader(self.path, self.feed)

    def initialOffset(self) -> dict[str, int]:
        reader = self._reader()
        offsets = reader.next_offsets() if self.starting == "latest" else reader.earliest_offsets()
        return {str(p): o for p, o in offsets.items()}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:
        return {str(p): o for p, o in self._reader().next_offsets().items()}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [
            _Range(int(p), int(start.get(p, 0)), int(end[p]))
            for p in sorted(end, key=int)
            if int(end[p]) > int(start.get(p, 0))
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, _Range)
        return _rows(self.path, self.feed, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: topics are immutable until retention removes records."""


class ChangefeedDataSource(DataSource):
    """``format("cqlcdc_changefeed")``: options ``path`` (the data directory: a local path or
    an object-store URI, with ``storage.<KEY>`` options as delta-rs names them), ``feed``
    (``ks.table/feed``) and, for streaming, ``startingOffsets`` (earliest | latest)."""

    @classmethod
    def name(cls) -> str:
        return "cqlcdc_changefeed"

    def schema(self) -> str:
        return SCHEMA

    def _location(self) -> Location:
        from cqlcdc.pipeline.table_scan import source_location

        return source_location(self.options)

    def reader(self, schema: Any) -> DataSourceReader:
        return _BatchReader(self._location(), self.options["feed"])

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _StreamReader(
            self._location(),
            self.options["feed"],
            self.options.get("startingOffsets", "earliest"),
        )


def register(spark: SparkSession) -> None:
    """Make ``format("cqlcdc_changefeed")`` available in ``spark``."""
    spark.dataSource.register(ChangefeedDataSource)
