"""Reading one base or log table of a data directory at a committed snapshot, as Arrow.

What the ``cqlcdc`` Spark data source (``table_source.py``) runs in its planner and its
tasks: no lock, no engine, only the catalog, the manifest and the Delta tables at the
versions a committed batch left them at. Log rows are read column-wise straight from the
files; base rows are merged per partition (TTL and tombstones applied) as CQL reads do.

>>> scan = open_scan("/data", "ks.t_scylla_cdc_log")  # doctest: +SKIP
>>> [f for f in log_files(scan, None)]  # doctest: +SKIP
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from cqlcdc.cdc.data_dir import GENERATIONS_FILE, Truncations
from cqlcdc.cdc.outputs import base_output, log_output
from cqlcdc.cdc.readded import hide_readded
from cqlcdc.cdc.streams import Generation
from cqlcdc.datadir.commit import (
    FilterType,
    Manifest,
    open_table,
    statistics_free_dataset,
    table_dir,
)
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import InvalidRequest, ServerError
from cqlcdc.location import Location
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.schema.physical import column_name
from cqlcdc.schema.physical import conform as physical_conform
from cqlcdc.storage.base_rows import partitions
from cqlcdc.storage.select import base_partition_rows
from cqlcdc.storage.view import PartitionView

# a data source option ``storage.<KEY>`` is the storage option KEY, as delta-rs names it
STORAGE_OPTION_PREFIX = "storage."
# the Delta app transaction id the engine records batch ids under (Engine's default)
APP_ID = "cqlcdc"
# rows per Arrow batch a base read hands Spark (its rows are built in Python)
BASE_BATCH_ROWS = 8192


@dataclass(frozen=True)
class TableScan:
    """One table of a data directory at one snapshot; picklable, so tasks get it whole.

    Attributes:
        data_dir: the data directory (a Location: tasks on other machines open the same
            objects through it, never a path of the driver).
        schema: the table read: a base table or a CDC log table (its current schema).
        base: the base table (the table itself when it is one).
        version: the Delta version of the table's output at the snapshot (None: no rows).
        batch_id: the committed batch the snapshot is at.
        now_s: the clock every task judges TTLs by (fixed once, when the read is planned).
        truncated: base tables: fragments with ``seq`` up to this are gone (TRUNCATE).
        num_buckets: token buckets of the data directory (None: unknown, no pruning).
    """

    data_dir: Location
    schema: TableSchema
    base: TableSchema
    version: int | None
    batch_id: int
    now_s: int
    truncated: int = 0
    num_buckets: int | None = None

    @property
    def is_log(self) -> bool:
        return self.schema.log_of is not None

    @property
    def output(self) -> str:
        return log_output(self.base) if self.is_log else base_output(self.base)

    @property
    def table(self) -> Location:
        """Where the output table read is."""
        return table_dir(self.data_dir / "tables", self.output)

    @property
    def column_names(self) -> list[str]:
        """The columns a read returns, in ``SELECT *`` order."""
        return [c.name for c in self.schema.select_star_columns]

    def stored_schema(self) -> pa.Schema:
        """The Arrow types the columns are kept as (``CqlType.arrow_type()``)."""
        return pa.schema([(c.name, c.type.arrow_type()) for c in self.schema.select_star_columns])


def source_location(options: Mapping[str, str]) -> Location:
    """The data directory a data source's options name: ``path`` (a local path or an
    object-store URI) and any ``storage.<KEY>`` options (``storage.AWS_ENDPOINT_URL``...;
    the standard AWS environment of the driver and the executors fills in the rest).

    Found on the driver, so a relative path is the driver's: the tasks get the Location.

    Raises:
        InvalidRequest: no ``path`` option.
    """
    if "path" not in options:
        raise InvalidRequest("The cqlcdc data sources need the option 'path' (the data directory)")
    storage = {
        key[len(STORAGE_OPTION_PREFIX) :]: value
        for key, value in options.items()
        if key.lower().startswith(STORAGE_OPTION_PREFIX)
    }
    return Location.of(options["path"], storage)


def open_scan(
    data_dir: Location | str | os.PathLike[str], table: str, snapshot: int | None = None
) -> TableScan:
    """Find ``table`` (``ks.t`` or ``ks.t_scylla_cdc_log``) in ``data_dir`` at a snapshot.

    Args:
        data_dir: the data directory, a local path or an object-store URI (read only: no
            lock is taken, no engine started).
        table: the table's qualified name.
        snapshot: a committed batch id (None: the last committed batch).

    Raises:
        InvalidRequest: no such table, or a batch id that is not committed.
    """
    root = Location.of(data_dir)
    keyspace, _, name = table.partition(".")
    if not keyspace or not name:
        raise InvalidRequest(f"A table is named keyspace.table, not {table!r}")
    catalog = Catalog(DocumentDirectory(root))
    schema = catalog.table(keyspace, name)
    if schema is None:
        raise InvalidRequest(f"unconfigured table {name}")
    base = schema if schema.log_of is None else catalog.table(keyspace, schema.log_of)
    if base is None:
        raise InvalidRequest(f"unconfigured table {schema.log_of}")
    manifest = Manifest.load(root)
    output = log_output(base) if schema.log_of is not None else base_output(base)
    tables_dir = root / "tables"
    if snapshot is None or snapshot == manifest.batch_id:
        version = manifest.version_of(output)
        batch_id = manifest.batch_id
        max_seq = manifest.max_seq
    elif not 0 <= snapshot < manifest.batch_id:
        raise InvalidRequest(
            f"Batch {snapshot} is not a committed batch of {root} "
            f"(the last committed batch is {manifest.batch_id})"
        )
    else:
        latest = manifest.version_of(output)
        where = table_dir(tables_dir, output)
        version = None if latest is None else version_at(where, latest, snapshot)
        batch_id = snapshot
        max_seq = -1  # known only if a truncation needs it
    truncated = 0
    if schema.log_of is None:
        truncated = Truncations(DocumentDirectory(root)).upto(base.table_id)
        if truncated and max_seq < 0:
            max_seq = snapshot_max_seq(tables_dir, manifest, snapshot or 0)
        if max_seq <= truncated and batch_id != manifest.batch_id:
            truncated = 0  # the snapshot holds no write after the TRUNCATE: it came later
    return TableScan(
        data_dir=root,
        schema=schema,
        base=base,
        version=version,
        batch_id=batch_id,
        now_s=time.time_ns() // 1_000_000_000,
        truncated=truncated,
        num_buckets=num_buckets(root),
    )


def version_at(where: Location, latest: int, batch_id: int) -> int | None:
    """The newest version of the Delta table at ``where`` (up to ``latest``) that holds no
    batch after ``batch_id``; None when the table's first commit came later.

    A table records the last batch committed into it as its app transaction version, which
    only grows with the table version, so a binary search finds the boundary.
    """

    def batch_of(version: int) -> int:
        committed = open_table(where, version).transaction_version(APP_ID)
        return -1 if committed is None else int(committed)

    if batch_of(latest) <= batch_id:
        return latest
    if batch_of(0) > batch_id:
        return None
    low, high = 0, latest  # batch_of(low) <= batch_id < batch_of(high)
    while high - low > 1:
        middle = (low + high) // 2
        if batch_of(middle) <= batch_id:
            low = middle
        else:
            high = middle
    return low


def snapshot_max_seq(tables_dir: Location, manifest: Manifest, batch_id: int) -> int:
    """The highest ingest seq any output holds as of ``batch_id`` (from file statistics).

    Only a TRUNCATE read at an older snapshot needs it: the truncation shows there once a
    write after it does."""
    highest = 0
    for output, latest in manifest.versions.items():
        where = table_dir(tables_dir, output)
        version = version_at(where, latest, batch_id)
        if version is None:
            continue
        actions = _add_actions(where, version)
        for column in ("max._seq", "max.seq"):
            if column in actions.column_names and actions.num_rows:
                top = pc.max(actions[column]).as_py()
                highest = max(highest, int(top or 0))
    return highest


def _add_actions(where: Location, version: int) -> pa.Table:
    """The table's files at ``version`` with their statistics (``min.<column>``...)."""
    return pa.table(open_table(where, version).get_add_actions(flatten=True))


def num_buckets(data_dir: Location) -> int | None:
    """The data directory's token buckets: one range per bucket in every generation."""
    path = data_dir / GENERATIONS_FILE
    try:
        text = path.read_text()
        if text is None:
            return None
        generations = json.loads(text)
    except (OSError, ValueError) as err:
        raise ServerError(f"Cannot read {path}: {err}") from err
    return Generation.from_json(generations[0]).num_ranges if generations else None


# -- types -----------------------------------------------------------------------------------


def spark_type(arrow: pa.DataType) -> DataType:
    """The Spark type of an Arrow type a CQL type is kept as (docs/types.md).

    ``time`` (``time64[ns]``) becomes its nanoseconds as ``LongType`` (Spark's times stop at
    microseconds); ``timestamp[ms]`` becomes ``TimestampType`` (microseconds); types kept as
    text (``uuid``, ``timeuuid``, ``inet``, ``varint``, ``decimal``) stay ``StringType``.
    """
    simple: dict[pa.DataType, DataType] = {
        pa.int8(): ByteType(),
        pa.int16(): ShortType(),
        pa.int32(): IntegerType(),
        pa.int64(): LongType(),
        pa.float32(): FloatType(),
        pa.float64(): DoubleType(),
        pa.bool_(): BooleanType(),
        pa.string(): StringType(),
        pa.binary(): BinaryType(),
        pa.date32(): DateType(),
    }
    if arrow in simple:
        return simple[arrow]
    if pa.types.is_time64(arrow):
        return LongType()
    if pa.types.is_timestamp(arrow):
        return TimestampType()
    if pa.types.is_map(arrow):
        return MapType(spark_type(arrow.key_type), spark_type(arrow.item_type))
    if pa.types.is_list(arrow):
        return ArrayType(spark_type(arrow.value_type))
    if pa.types.is_struct(arrow):
        return StructType([StructField(f.name, spark_type(f.type)) for f in arrow])
    raise ServerError(f"No Spark type for the Arrow type {arrow}")


def spark_schema(scan: TableScan) -> StructType:
    """The Spark schema of a read: one nullable field per column, in ``SELECT *`` order."""
    return StructType([StructField(f.name, spark_type(f.type)) for f in scan.stored_schema()])


def spark_arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects batches in (as its Python data source worker makes it)."""
    return to_arrow_schema(schema, timezone="UTC")


def conform(data: pa.RecordBatch | pa.Table, scan: TableScan, target: pa.Schema) -> pa.RecordBatch:
    """``data``'s columns of the read, as Spark expects them: in order, cast to ``target``;
    a column the files do not hold yet (added by ALTER TABLE after them) is all null."""
    stored = scan.stored_schema()
    names = set(data.schema.names)
    arrays = []
    for field in stored:
        column = (
            data.column(field.name) if field.name in names else pa.nulls(data.num_rows, field.type)
        )
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        arrays.append(column)
    batch = pa.RecordBatch.from_arrays(arrays, schema=stored)
    try:
        return batch.cast(target)
    except pa.ArrowInvalid as err:  # a timestamp beyond Spark's microsecond range
        raise InvalidRequest(f"A value of {scan.schema.name} has no Spark value: {err}") from err


# -- log tables: column-wise, one task per data file ------------------------------------------


def expiry_condition(now_s: int) -> pc.Expression:
    """Log rows still alive at ``now_s`` (``_expiry_s`` 0: no TTL)."""
    return (pc.field("_expiry_s") == 0) | (pc.field("_expiry_s") > now_s)


def log_files(scan: TableScan, prune: FilterType | None) -> list[str]:
    """The data files of the log at the snapshot whose Delta statistics can match ``prune``
    (paths relative to the table)."""
    if scan.version is None:
        return []
    dataset = statistics_free_dataset(open_table(scan.table, scan.version), prune or None)
    return [fragment.path for fragment in dataset.get_fragments()]


def read_log_file(
    scan: TableScan, path: str, condition: pc.Expression, target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of one log data file that match ``condition``, as Spark's batches."""
    assert scan.version is not None
    full = statistics_free_dataset(open_table(scan.table, scan.version))
    fragment = full.format.make_fragment(path, full.filesystem)
    one = ds.FileSystemDataset([fragment], full.schema, full.format, full.filesystem)
    stored = {column_name(scan.schema, n): n for n in scan.column_names}
    present = [p for p in stored if p in full.schema.names]
    readded = {column_name(scan.schema, n): t for n, t in scan.schema.readded_at().items()}
    if readded:
        # a re-added column's old values are hidden first, so that no filter matches them
        for batch in one.to_batches():
            rows = hide_readded(pa.Table.from_batches([batch]), readded).filter(condition)
            for kept in rows.select(present).to_batches():
                if kept.num_rows:
                    yield conform(_logical(kept, scan, stored), scan, target)
        return
    for batch in one.to_batches(columns=present, filter=condition):
        if batch.num_rows:
            yield conform(_logical(batch, scan, stored), scan, target)


def _logical(batch: pa.RecordBatch, scan: TableScan, stored: dict[str, str]) -> pa.Table:
    """A log file's columns (physical names and types, ``schema.physical``) by CQL name, in
    the types :meth:`TableScan.stored_schema` names."""
    types = scan.stored_schema()
    names = [stored[p] for p in batch.schema.names]
    arrays = [physical_conform(batch.column(i), types.field(n).type) for i, n in enumerate(names)]
    return pa.Table.from_arrays(arrays, names=names)


# -- base tables: merged per partition, one task per bucket -----------------------------------


def base_buckets(scan: TableScan, wanted: Sequence[int] | None) -> list[int]:
    """The buckets the base table has files in at the snapshot (among ``wanted``)."""
    if scan.version is None:
        return []
    actions = _add_actions(scan.table, scan.version)
    if not actions.num_rows:
        return []
    lows = actions["min.bucket"].to_numpy()
    highs = actions["max.bucket"].to_numpy()
    found: set[int] = set()
    for low, high in zip(lows.tolist(), highs.tolist(), strict=True):
        found.update(range(int(low), int(high) + 1))
    return sorted(found if wanted is None else found & set(wanted))


def read_base_bucket(
    scan: TableScan,
    bucket: int,
    condition: pc.Expression | None,
    target: pa.Schema,
    pks: Sequence[bytes] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The live CQL rows of one bucket (of the partitions ``pks`` only, if given), one row
    per CQL row as ``SELECT *`` returns them, filtered by ``condition``."""
    if scan.version is None:
        return
    table = open_table(scan.table, scan.version)
    keep = pc.field("bucket") == bucket
    if scan.truncated:
        keep &= pc.field("seq") > scan.truncated
    if pks is not None:
        keep &= pc.field("pk").isin(pa.array(list(pks), pa.binary()))
    dataset = statistics_free_dataset(table, [("bucket", "=", bucket)])
    frags = dataset.to_table(filter=keep)
    if not frags.num_rows:
        return
    tokens = dict(zip(frags["pk"].to_pylist(), frags["token"].to_pylist(), strict=True))
    merged = partitions(scan.schema, frags)
    view = PartitionView(scan.schema)
    rows: list[dict[str, Any]] = []
    for pk_bytes in sorted(merged, key=lambda k: (tokens[k], k)):
        token = tokens[pk_bytes]
        part = merged[pk_bytes]
        rows.extend(base_partition_rows(scan.schema, part, token, scan.now_s, view).rows)
        if len(rows) >= BASE_BATCH_ROWS:
            yield from _base_batches(scan, rows, condition, target)
            rows = []
    if rows:
        yield from _base_batches(scan, rows, condition, target)


def _base_batches(
    scan: TableScan,
    rows: list[dict[str, Any]],
    condition: pc.Expression | None,
    target: pa.Schema,
) -> Iterator[pa.RecordBatch]:
    arrays = []
    for column in scan.schema.select_star_columns:
        values = [row.get(column.name) for row in rows]
        if not column.type.arrow_as_is:
            values = [column.type.to_arrow(v) for v in values]
        arrays.append(pa.array(values, column.type.arrow_type()))
    table = pa.Table.from_arrays(arrays, schema=scan.stored_schema())
    if condition is not None:
        table = table.filter(condition)
    if table.num_rows:
        yield conform(table, scan, target)
