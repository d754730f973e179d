"""A Spark data source for base and CDC log tables (pyspark's Python Data Source API).

Batch: ``spark.read.format("cqlcdc").option("path", data_dir).option("table", "ks.t")
.load()`` reads a table at the last committed batch (or ``option("snapshot", batch_id)``),
with filter pushdown. Streaming: ``spark.readStream`` of a log table; offsets are the
highest committed ingest seq, so a query with a checkpoint sees every log row exactly once.

>>> register(spark)  # doctest: +SKIP
>>> spark.read.format("cqlcdc").option("path", d).option("table", "ks.t_scylla_cdc_log").load()
... # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.types import StructType

from cqlcdc.cdc.outputs import log_arrow_schema
from cqlcdc.cdc.streams import stream_buckets
from cqlcdc.datadir.commit import FilterType, Manifest
from cqlcdc.errors import InvalidRequest
from cqlcdc.pipeline.table_scan import (
    TableScan,
    base_buckets,
    expiry_condition,
    log_files,
    open_scan,
    read_base_bucket,
    read_log_file,
    source_location,
    spark_arrow_schema,
    spark_schema,
)
from cqlcdc.storage.token import bucket_of, murmur3_token, serialize_partition_key

NAME = "cqlcdc"
# Spark refuses a reader with pushFilters unless this is on (it is off by default)
PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
# the most partition keys a filter may name before a base read stops narrowing to them
MAX_KEYS = 1024


# -- filters ----------------------------------------------------------------------------------


def _comparable(kind: pa.DataType) -> bool:
    """Arrow compares values of these types exactly as Spark compares the same values:
    integers, booleans, dates, and text and bytes by their bytes (types kept as text,
    such as uuid or varint, are compared as the text Spark sees). Floats are left to
    Spark: it orders NaN above every number and equal to itself, Arrow does not."""
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_date32(kind)
        or pa.types.is_string(kind)
        or pa.types.is_binary(kind)
    )


def _column(f: Filter, stored: pa.Schema) -> tuple[str, pa.DataType] | None:
    attribute = getattr(f, "attribute", None)
    if attribute is None or len(attribute) != 1 or attribute[0] not in stored.names:
        return None
    name = attribute[0]
    return name, stored.field(name).type


def _scalar(value: Any, kind: pa.DataType) -> pa.Scalar | None:
    if value is None:
        return None
    if isinstance(value, bytearray):
        value = bytes(value)
    try:
        return pa.scalar(value, kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return None


def arrow_filter(f: Filter, stored: pa.Schema) -> pc.Expression | None:
    """``f`` as an Arrow expression that keeps exactly the rows Spark's filter keeps, or
    None when that cannot be said (Spark then applies it itself)."""
    if isinstance(f, Not):
        inner = arrow_filter(f.child, stored)
        if inner is None or isinstance(f.child, (Not, IsNull, IsNotNull, EqualNullSafe)):
            return None
        if isinstance(f.child, In):
            if any(v is None for v in f.child.value):
                return None  # `x NOT IN (1, NULL)` holds for no row
            # isin is false (not null) for a null x, where Spark's NOT IN is null
            column = _column(f.child, stored)
            assert column is not None
            return ~inner & pc.field(column[0]).is_valid()
        return ~inner
    column = _column(f, stored)
    if column is None:
        return None
    name, kind = column
    field = pc.field(name)
    if isinstance(f, IsNull):
        return field.is_null()
    if isinstance(f, IsNotNull):
        return field.is_valid()
    if not _comparable(kind):
        return None
    if isinstance(f, (StringStartsWith, StringEndsWith, StringContains)):
        if not pa.types.is_string(kind) or not isinstance(f.value, str):
            return None
        if isinstance(f, StringStartsWith):
            return pc.starts_with(field, pattern=f.value)
        if isinstance(f, StringEndsWith):
            return pc.ends_with(field, pattern=f.value)
        return pc.match_substring(field, pattern=f.value)
    if isinstance(f, In):
        items = [_scalar(v, kind) for v in f.value if v is not None]
        if any(s is None for s in items):
            return None
        return field.isin(pa.array([s.as_py() for s in items if s is not None], kind))
    target = _scalar(f.value, kind) if hasattr(f, "value") else None
    if isinstance(f, EqualNullSafe) and f.value is None:
        return field.is_null()
    if target is None:
        return None
    if isinstance(f, (EqualTo, EqualNullSafe)):
        return field == target
    if isinstance(f, GreaterThan):
        return field > target
    if isinstance(f, GreaterThanOrEqual):
        return field >= target
    if isinstance(f, LessThan):
        return field < target
    if isinstance(f, LessThanOrEqual):
        return field <= target
    return None


def _equal_values(f: Filter) -> list[Any] | None:
    """The values an EqualTo / In filter allows, or None for other filters."""
    if isinstance(f, EqualTo):
        return [f.value]
    if isinstance(f, In):
        return [v for v in f.value if v is not None]
    return None


_ORDER_OPS: dict[type[Filter], str] = {
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}


def _bytes(value: Any) -> bytes | None:
    return bytes(value) if isinstance(value, (bytes, bytearray)) else None


# -- batch reads ------------------------------------------------------------------------------


class _FilePart(InputPartition):
    """One data file of a log table, by its path relative to the table."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class _BucketPart(InputPartition):
    """One token bucket of a base table."""

    def __init__(self, bucket: int) -> None:
        super().__init__(bucket)
        self.bucket = bucket


class _BatchReader(DataSourceReader):
    """Reads a table at one snapshot. Runs in Spark's planner (``pushFilters``,
    ``partitions``), then pickled to every task (``read``)."""

    def __init__(self, scan: TableScan, schema: StructType) -> None:
        self.scan = scan
        self.target = spark_arrow_schema(schema)
        self.condition: pc.Expression | None = None
        self.prune: FilterType = []  # DNF tuples on integer columns with Delta statistics
        self.buckets: list[int] | None = None  # base tables: only these buckets
        self.pks: list[bytes] | None = None  # base tables: only these partition keys

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Apply every filter Arrow can apply exactly; give the others back to Spark."""
        stored = self.scan.stored_schema()
        if self.scan.is_log:
            # pushed to a log's files, which name and type columns physically: only the
            # columns whose files hold them as Spark sees them (Spark filters the rest)
            physical = log_arrow_schema(self.scan.schema)
            stored = pa.schema(
                [f for f in stored if f.name in physical.names and physical.field(f.name) == f]
            )
        for f in filters:
            expression = arrow_filter(f, stored)
            if expression is None:
                yield f
                continue
            self.condition = expression if self.condition is None else self.condition & expression
            self._narrow(f, stored)
        if not self.scan.is_log:
            self._partition_keys(filters, stored)

    def _narrow(self, f: Filter, stored: pa.Schema) -> None:
        """File pruning for a pushed filter: a stream id picks the log's buckets, and
        comparisons on integer columns use the files' Delta min/max statistics."""
        column = _column(f, stored)
        if column is None or not self.scan.is_log:
            return
        name, kind = column
        values = _equal_values(f)
        if name == "cdc$stream_id" and values is not None and self.scan.num_buckets:
            streams = [b for b in map(_bytes, values) if b is not None]
            buckets = stream_buckets(streams, self.scan.num_buckets)
            if buckets is not None:
                self.prune.append(("_bucket", "in", buckets))
            return
        if not pa.types.is_integer(kind):
            return
        if values is not None:
            self.prune.append((name, "in", values))
            return
        op = _ORDER_OPS.get(type(f))
        if op is not None:
            self.prune.append((name, op, getattr(f, "value")))  # noqa: B009 - any of four

    def _partition_keys(self, filters: list[Filter], stored: pa.Schema) -> None:
        """A base read whose filters fix every partition key column reads only the
        buckets (and partitions) those keys hash to."""
        if not self.scan.num_buckets:
            return
        choices: dict[str, list[Any]] = {}
        for f in filters:
            column = _column(f, stored)
            values = _equal_values(f)
            if column is None or values is None or arrow_filter(f, stored) is None:
                continue
            known = choices.get(column[0])
            choices[column[0]] = values if known is None else [v for v in known if v in values]
        key_columns = self.scan.schema.partition_key
        if not all(c.name in choices for c in key_columns):
            return
        combos = 1
        for c in key_columns:
            combos *= len(choices[c.name])
        if combos > MAX_KEYS:
            return
        keys = []
        for combo in itertools.product(*(choices[c.name] for c in key_columns)):
            key = tuple(
                v if c.type.arrow_as_is else c.type.from_arrow(v)
                for c, v in zip(key_columns, combo, strict=True)
            )
            keys.append(serialize_partition_key(self.scan.schema, key))
        self.pks = keys
        self.buckets = sorted({bucket_of(murmur3_token(k), self.scan.num_buckets) for k in keys})

    def partitions(self) -> Sequence[InputPartition]:
        if self.scan.is_log:
            return [_FilePart(path) for path in log_files(self.scan, self.prune)]
        return [_BucketPart(b) for b in base_buckets(self.scan, self.buckets)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, _FilePart):
            condition = expiry_condition(self.scan.now_s)
            if self.condition is not None:
                condition &= self.condition
            yield from read_log_file(self.scan, partition.path, condition, self.target)
        elif isinstance(partition, _BucketPart):
            yield from read_base_bucket(
                self.scan, partition.bucket, self.condition, self.target, self.pks
            )
        # InputPartition(None): Spark's stand-in when a table has no file at the snapshot


# -- streaming reads of a log table ----------------------------------------------------------


class _SeqRange(InputPartition):
    """One log data file's rows with ``start < _seq <= end``."""

    def __init__(self, path: str, start: int, end: int, scan: TableScan) -> None:
        super().__init__(path)
        self.path = path
        self.start = start
        self.end = end
        self.scan = scan  # at the version the batch was planned at


class _StreamReader(DataSourceStreamReader):
    """Offsets are ``{"seq": s}``: every log row with ``_seq <= s`` is committed.

    Batches commit in seq order, so the rows of a micro-batch ``(start, end]`` never change
    once ``end`` is committed. They are found by their ``_seq`` (files pruned by its
    statistics) at whatever version the planner sees, never as "the files added since a
    version": compaction rewrites files, and their rows would come twice.
    """

    def __init__(self, scan: TableScan, schema: StructType, starting: str) -> None:
        if not scan.is_log:
            raise InvalidRequest(
                f"Only CDC log tables can be streamed; {scan.schema.keyspace}."
                f"{scan.schema.name} is a base table (read it with spark.read)"
            )
        if starting not in ("earliest", "latest"):
            raise InvalidRequest(f"startingOffsets is earliest or latest, not {starting!r}")
        self.scan = scan
        self.target = spark_arrow_schema(schema)
        self.starting = starting

    def _manifest(self) -> Manifest:
        return Manifest.load(self.scan.data_dir)

    def initialOffset(self) -> dict[str, int]:
        return {"seq": self._manifest().max_seq if self.starting == "latest" else 0}

    def latestOffset(self, start: dict[str, int], limit: Any = None) -> dict[str, int]:
        return {"seq": self._manifest().max_seq}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        low, high = int(start["seq"]), int(end["seq"])
        if high <= low:
            return []
        manifest = self._manifest()
        # each batch judges the log's TTL by its own clock: a row that expired before a
        # batch read it is gone, as it is for a CQL read
        scan = replace(
            self.scan,
            version=manifest.version_of(self.scan.output),
            batch_id=manifest.batch_id,
            now_s=time.time_ns() // 1_000_000_000,
        )
        prune: FilterType = [("_seq", ">", low), ("_seq", "<=", high)]
        return [_SeqRange(path, low, high, scan) for path in log_files(scan, prune)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _SeqRange)
        seq = pc.field("_seq")
        condition = (seq > partition.start) & (seq <= partition.end)
        condition &= expiry_condition(partition.scan.now_s)
        return read_log_file(partition.scan, partition.path, condition, self.target)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: committed log rows stay until their TTL or compaction."""


# -- the source -------------------------------------------------------------------------------


class TableDataSource(DataSource):
    """``format("cqlcdc")``: options ``path`` (the data directory: a local path or an
    object-store URI, with ``storage.<KEY>`` options as delta-rs names them), ``table`` (``ks.t`` or
    ``ks.t_scylla_cdc_log``), ``snapshot`` (batch reads: a committed batch id, default the
    last) and ``startingOffsets`` (streaming: ``earliest`` | ``latest``)."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def _scan(self) -> TableScan:
        for option in ("path", "table"):
            if option not in self.options:
                raise InvalidRequest(f'format("{NAME}") needs the option {option!r}')
        snapshot = self.options.get("snapshot")
        try:
            batch = None if snapshot is None else int(snapshot)
        except ValueError:
            raise InvalidRequest(f"snapshot is a batch id, not {snapshot!r}") from None
        return open_scan(source_location(self.options), self.options["table"], batch)

    def schema(self) -> StructType:
        return spark_schema(self._scan())

    def reader(self, schema: StructType) -> DataSourceReader:
        return _BatchReader(self._scan(), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        if "snapshot" in self.options:
            raise InvalidRequest("A stream starts at startingOffsets, not at a snapshot")
        return _StreamReader(self._scan(), schema, self.options.get("startingOffsets", "earliest"))


def register(spark: SparkSession) -> None:
    """Make ``format("cqlcdc")`` available in ``spark``, with filter pushdown on."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(TableDataSource)
