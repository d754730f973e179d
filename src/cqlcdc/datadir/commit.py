"""Output tables: data files written anywhere, committed by the driver, read at a manifest.

Executors (or the driver) write Parquet files into a Delta table's directory and describe
them as :class:`DataFile`; the driver commits them with the batch id as the Delta app
transaction version, so a replayed batch is recognised and not committed twice.

>>> Manifest(batch_id=-1, max_seq=0, versions={}).version_of("base/ks.t") is None
True
"""

from __future__ import annotations

import functools
import json
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Field, Schema, Transaction
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions

from cqlcdc.datadir.durable import synced_file
from cqlcdc.errors import ServerError
from cqlcdc.location import Location
from cqlcdc.schema.log_table import TICKS
from cqlcdc.storage.vectorized import timeuuid_ticks

MANIFEST_NAME = "manifest.json"
#: The data directory format this version reads and writes, kept in the manifest: base rows
#: (``cqlcdc.storage.base_rows``: typed rows, residual ``CQP1`` partitions), ingest payloads
#: (``CQW1`` row-path writes, ``CQB1`` chunks), the ingest files' and outputs' schemas.
#: Format 1 held row-path records as pickles (``CQM1``), format 2 base state as encoded
#: fragments (``CQP1``, ``CQA1``); a directory of another format is refused rather than
#: misread; ``tests/unit/datadir/golden_formats.json`` pins the bytes.
FORMAT = 3
_OLD_FORMATS = {1: "row-path writes as pickles", 2: "base state as encoded fragments"}

# Small commits are frequent: a Delta checkpoint every 20 commits keeps table loads cheap.
TABLE_CONFIGURATION: dict[str, str | None] = {"delta.checkpointInterval": "20"}
# Base tables have a column per CQL column, most of them structs of several leaves, and no
# read prunes files by them: file statistics of the few that do (the bucket picks files; the
# others help a reader of the Delta log), so a table load parses ~3 columns of statistics per
# file, not every leaf (a single write's batch spent ~40% more in its commits without this).
BASE_CONFIGURATION: dict[str, str | None] = {
    **TABLE_CONFIGURATION,
    "delta.dataSkippingStatsColumns": "bucket,token,seq",
}


def table_configuration(output: str) -> dict[str, str | None]:
    """The Delta table properties an output table is created with."""
    return BASE_CONFIGURATION if output.startswith("base/") else TABLE_CONFIGURATION


# Arrow schema of the file descriptions executors send back to the driver.
DATA_FILE_SCHEMA = pa.schema(
    [
        pa.field("output", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("num_records", pa.int64(), nullable=False),
        pa.field("modification_time", pa.int64(), nullable=False),
        pa.field("stats", pa.string(), nullable=False),
        pa.field("schema", pa.binary(), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class DataFile:
    """A Parquet file written into an output table's directory, not yet committed.

    Attributes:
        output: the output table name, e.g. ``base/ks.t``.
        path: the file path relative to the table root.
        size: bytes.
        num_records: rows.
        modification_time: ms since the epoch.
        stats: Delta statistics JSON (numRecords, min/max of integer columns, null counts).
        schema: the file's Arrow schema, IPC-serialized.
    """

    output: str
    path: str
    size: int
    num_records: int
    modification_time: int
    stats: str
    schema: bytes

    def arrow_schema(self) -> pa.Schema:
        """The file's Arrow schema."""
        return _read_schema(self.schema)


@functools.lru_cache(maxsize=1024)
def _read_schema(data: bytes) -> pa.Schema:
    # a batch commits files of each output (one per bucket of a bulk batch), all of one
    # schema: read it once
    return pa.ipc.read_schema(pa.py_buffer(data))


def _unified(files: Sequence[DataFile]) -> pa.Schema:
    """The schema of files to commit together (most often one schema, read once)."""
    distinct = list(dict.fromkeys(f.schema for f in files))
    if len(distinct) == 1:
        return _read_schema(distinct[0])
    return pa.unify_schemas([_read_schema(d) for d in distinct])


def data_files_to_arrow(files: Iterable[DataFile]) -> pa.Table:
    """Pack file descriptions as rows of :data:`DATA_FILE_SCHEMA`."""
    rows = list(files)
    return pa.Table.from_pydict(
        {name: [getattr(f, name) for f in rows] for name in DATA_FILE_SCHEMA.names},
        schema=DATA_FILE_SCHEMA,
    )


def data_files_from_arrow(table: pa.Table) -> list[DataFile]:
    """Unpack rows of :data:`DATA_FILE_SCHEMA`."""
    return [DataFile(**row) for row in table.to_pylist()]


def table_dir(tables_dir: Location | str | os.PathLike[str], output: str) -> Location:
    """The directory of output table `output` (names like ``log/ks.t`` nest)."""
    return Location.of(tables_dir).child(output)


def _delta_stats(table: pa.Table) -> str:
    # Delta file statistics let readers skip files (e.g. by bucket). Min/max only for integer
    # columns, where they are exact; Delta's truncation rules for strings are not needed here.
    mins: dict[str, Any] = {}
    maxs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name, column in zip(table.column_names, table.columns):
        kind = column.type
        if pa.types.is_nested(kind):
            continue
        nulls[name] = column.null_count
        if pa.types.is_integer(kind) and column.null_count < len(column):
            bounds = pc.min_max(column)
            mins[name] = bounds["min"].as_py()
            maxs[name] = bounds["max"].as_py()
    return json.dumps(
        {"numRecords": table.num_rows, "minValues": mins, "maxValues": maxs, "nullCount": nulls}
    )


def with_time_ticks(rows: pa.Table) -> pa.Table:
    """Log rows with ``_ticks`` (``TICKS``), from their ``cdc$time`` where the core did
    not give it."""
    if TICKS in rows.column_names:
        return rows
    return rows.append_column(TICKS, pa.array(timeuuid_ticks(rows["cdc$time"]), pa.int64()))


# columns no read prunes by (a base fragment, a log row's cdc$time text, whose order is not
# time order: `_ticks` prunes time windows): their min/max cost write time and file size
_NO_STATISTICS = frozenset({"fragment", "cdc$time"})


def statistics_columns(names: Iterable[str]) -> list[str]:
    """The columns of a data file that get Parquet statistics: all but ``_NO_STATISTICS``."""
    return [n for n in names if n not in _NO_STATISTICS]


# columns written uncompressed: a log row's cdc$time text (a timeuuid: snappy gained ~1.6x on
# it for ~3x its write time, a quarter of a log file's write; compaction rewrites with zstd)
_UNCOMPRESSED = frozenset({"cdc$time"})


@functools.lru_cache(maxsize=256)
def _compression(schema: pa.Schema) -> dict[str, str]:
    """The codec of every Parquet leaf column of ``schema`` (a codec per column must name
    the leaves: a nested column's are ``name.list.element`` and the like, and a leaf left
    out is written uncompressed), as Parquet names them for an empty file of it."""
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    leaves = pq.read_metadata(pa.BufferReader(sink.getvalue())).schema
    paths = [leaves.column(i).path for i in range(len(leaves))]
    return {p: "none" if p.split(".")[0] in _UNCOMPRESSED else "snappy" for p in paths}


# small row groups: their statistics let a read skip most of a file (a partition's token,
# a log's seqs); compaction writes the same size
ROW_GROUP_ROWS = 4096


# the column holding each row's bucket: ``bucket`` (base, errors, held...), ``_bucket`` (log)
BUCKET_COLUMNS = ("bucket", "_bucket")
# ``part-<batch>-b<first bucket>[-<last bucket>]-<uuid>.parquet``: the buckets a file holds
_DATA_FILE_NAME = re.compile(r"^part-(\d+)-b(\d+)(?:-(\d+))?-[0-9a-f]{32}\.parquet$")


def bucket_column(names: Iterable[str]) -> str | None:
    """The bucket column among a file's column names (None: an output not kept by bucket)."""
    return next((c for c in BUCKET_COLUMNS if c in names), None)


def bucket_range(rows: pa.Table) -> tuple[int, int] | None:
    """The lowest and highest bucket of ``rows`` (None: no bucket column, or no rows)."""
    column = bucket_column(rows.column_names)
    if column is None or rows.num_rows == 0 or rows.column(column).null_count == rows.num_rows:
        return None
    bounds = pc.min_max(rows.column(column))
    return int(bounds["min"].as_py()), int(bounds["max"].as_py())


def data_file_name(batch_id: int, buckets: tuple[int, int] | None) -> str:
    """A new data file's name: the batch, the buckets it holds, a fresh uuid.

    A file of one bucket is ``part-<batch>-b<bucket>-<uuid>.parquet``; one of several
    consecutive buckets ``part-<batch>-b<first>-<last>-<uuid>.parquet``, so a listing shows
    what each holds (the Delta statistics ``min/max.bucket`` say it too, and are what
    reads and compaction go by). An output without a bucket column is filed under bucket 0.

    >>> data_file_name(7, (3, 3))[:23], data_file_name(7, (3, 9))[:29]
    ('part-0000000007-b00003-', 'part-0000000007-b00003-00009-')
    """
    first, last = buckets if buckets is not None else (0, 0)
    span = f"b{first:05d}" if first == last else f"b{first:05d}-{last:05d}"
    return f"part-{batch_id:010d}-{span}-{uuid.uuid4().hex}.parquet"


def buckets_of_name(name: str) -> tuple[int, int] | None:
    """The (first, last) bucket in a data file's name (None: not a name of ours)."""
    match = _DATA_FILE_NAME.match(os.path.basename(unquote(name)))
    if match is None:
        return None
    first = int(match.group(2))
    return first, int(match.group(3)) if match.group(3) is not None else first


def batch_of_name(name: str) -> int:
    """The batch in a data file's name (0: not a name of ours)."""
    match = _DATA_FILE_NAME.match(os.path.basename(unquote(name)))
    return int(match.group(1)) if match else 0


def write_data_file(
    tables_dir: Location | str | Path, output: str, rows: pa.Table, batch_id: int
) -> DataFile:
    """Write `rows` as one new Parquet file into the table directory of `output`: on a
    local disk fsynced, in an object store one PUT of the whole file.

    The rows may be of several buckets (``cqlcdc.datadir.file_runs``), in bucket order; the
    name says which (``data_file_name``). It is unique per attempt, so a replay never
    overwrites a committed file; files of an attempt that is not committed are never
    referenced and can be deleted.
    """
    root = table_dir(tables_dir, output)
    root.makedirs()
    name = data_file_name(batch_id, bucket_range(rows))
    path = root / name
    if output.startswith("log/") and "cdc$time" in rows.column_names:
        rows = with_time_ticks(rows)
    if output.startswith("base/") and rows.num_rows > ROW_GROUP_ROWS:
        # a partition read filters by token: sorted, the row groups' token statistics
        # skip all but the one that holds it (the core emits a bucket's rows in token
        # order already, and buckets are ascending token ranges, so a run of buckets in
        # bucket order is in token order too: this is mostly a check)
        tokens = rows["token"].to_numpy()
        if not (tokens[1:] >= tokens[:-1]).all():
            rows = rows.take(pa.array(np.argsort(tokens, kind="stable")))

    # no dictionaries: most columns are near unique (times, keys, fragments), where
    # dictionary encoding doubles the write time. Snappy, the Delta/Spark default, but for
    # `_UNCOMPRESSED`: zstd made files ~45% smaller but cost ~75% more write time on the
    # batch's critical path, no compression at all 2.5x the bytes; file compaction rewrites
    # what it merges with zstd
    def write(sink: pa.NativeFile) -> None:
        pq.write_table(
            rows,
            sink,
            compression=_compression(rows.schema),
            use_dictionary=False,
            row_group_size=ROW_GROUP_ROWS,
            write_statistics=statistics_columns(rows.column_names),
        )

    if path.is_local:
        with synced_file(path.path) as sink:
            write(sink)
        size = path.path.stat().st_size
    else:
        buffer = pa.BufferOutputStream()
        write(buffer)
        body = buffer.getvalue()
        path.write_atomically(body)
        size = body.size
    return DataFile(
        output=output,
        path=name,
        size=size,
        num_records=rows.num_rows,
        modification_time=int(time.time() * 1000),
        stats=_delta_stats(rows),
        schema=rows.schema.serialize().to_pybytes(),
    )


def _transaction(app_id: str, batch_id: int) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction(app_id, batch_id)])


def commit_output(
    tables_dir: Location | str | Path,
    output: str,
    files: list[DataFile],
    app_id: str,
    batch_id: int,
    table: DeltaTable | None = None,
) -> DeltaTable:
    """Commit `files` to output table `output` as one Delta commit, exactly once per batch.

    If the table already records app transaction ``app_id`` at version >= `batch_id`, this
    batch (a replay) already landed: the new files are deleted instead of committed.

    Args:
        tables_dir: root of the output tables.
        output: the output table name.
        files: the data files to add (written into the table's directory).
        app_id: the Delta app transaction id.
        batch_id: the micro-batch id, recorded as the app transaction version.
        table: a cached handle of the table, brought up to date before the commit.

    Returns:
        The table handle, at the version holding this batch.
    """
    root = table_dir(tables_dir, output)
    uri, options = root.delta_uri, root.delta_options()
    schema = _unified(files)
    actions: list[AddAction | RemoveAction] = [
        AddAction(f.path, f.size, {}, f.modification_time, True, f.stats) for f in files
    ]
    if table is None:
        if not DeltaTable.is_deltatable(uri, storage_options=options):
            create_table_with_add_actions(
                uri,
                Schema.from_arrow(schema),
                [a for a in actions if isinstance(a, AddAction)],
                mode="error",
                configuration=table_configuration(output),
                storage_options=options,
                commit_properties=_transaction(app_id, batch_id),
            )
            return DeltaTable(uri, storage_options=options)
        table = DeltaTable(uri, storage_options=options)
    else:
        table.update_incremental()
    committed = table.transaction_version(app_id)
    if committed is not None and committed >= batch_id:
        for f in files:
            (root / f.path).delete()
        return table
    _add_new_columns(table, schema)
    table.create_write_transaction(
        actions, mode="append", schema=schema, commit_properties=_transaction(app_id, batch_id)
    )
    table.update_incremental()
    return table


def _add_new_columns(table: DeltaTable, schema: pa.Schema) -> None:
    """Schema evolution: columns the new files have and the table lacks are added first.

    An ALTER TABLE ADD on a CDC table adds a log column; older files read it as null. Adding
    is idempotent across a replay (a column added by a crashed attempt is simply there).
    """
    current = set(table.schema().to_arrow().names)
    missing = [f.with_nullable(True) for f in schema if f.name not in current]
    if missing:
        table.alter.add_columns([Field.from_arrow(f) for f in missing])
        table.update_incremental()


@dataclass(frozen=True, slots=True)
class Manifest:
    """The last batch committed in every output table, and each table's version after it.

    Attributes:
        batch_id: the streaming batch id (-1 before the first batch).
        max_seq: the highest ingest seq applied by that batch or any earlier one.
        versions: Delta version of every output table, as of that batch.
    """

    batch_id: int
    max_seq: int
    versions: dict[str, int] = field(default_factory=dict)
    # the processor's own state that must advance exactly with the commits (feed offsets)
    extra: dict[str, Any] = field(default_factory=dict)

    def version_of(self, output: str) -> int | None:
        """The version of `output` in this manifest, or None if the table did not exist."""
        return self.versions.get(output)

    @classmethod
    def load(cls, data_dir: Location | str | os.PathLike[str]) -> Manifest:
        """Read the manifest of `data_dir` (an empty one if no batch committed yet)."""
        root = Location.of(data_dir)
        path = root / MANIFEST_NAME
        try:
            text = path.read_text()
            if text is None:
                return cls(batch_id=-1, max_seq=0)
            raw = json.loads(text)
        except (OSError, ValueError) as err:
            raise ServerError(f"Cannot read manifest {path}: {err}") from err
        written = int(raw.get("format", 1))
        if written > FORMAT:
            raise ServerError(
                f"Data directory {root} has format {written} (written by a newer "
                f"cqlcdc); this version reads format {FORMAT}: open it with the version that "
                f"wrote it"
            )
        if written < FORMAT:
            held = _OLD_FORMATS.get(written, "another layout")
            raise ServerError(
                f"Data directory {root} has format {written} (written by an older "
                f"cqlcdc, which stored {held}); this version reads format "
                f"{FORMAT} and does not migrate it: open it with the version that wrote it, or "
                f"export its tables and load them into a new directory"
            )
        return cls(
            batch_id=int(raw["batch_id"]),
            max_seq=int(raw["max_seq"]),
            versions={str(k): int(v) for k, v in raw["versions"].items()},
            extra=dict(raw.get("extra", {})),
        )

    def save(self, data_dir: Location | str | os.PathLike[str]) -> None:
        """Write atomically (``Location.write_atomically``: on a disk a temp file, fsync,
        rename over the old one, fsync the directory; in an object store one PUT)."""
        body = {
            "format": FORMAT,
            "batch_id": self.batch_id,
            "max_seq": self.max_seq,
            "versions": self.versions,
            "extra": self.extra,
        }
        (Location.of(data_dir) / MANIFEST_NAME).write_atomically(json.dumps(body, sort_keys=True))


FilterType = list[tuple[str, str, Any]]


def open_table(where: Location | str | os.PathLike[str], version: int) -> DeltaTable:
    """The Delta table at ``where`` (a local path or an object-store URI) as of
    ``version``, opened once per process: a version never changes, and opening one replays
    its log (milliseconds a read would otherwise pay each time; requests in an object
    store)."""
    return _open_table(Location.of(where), version)


@functools.lru_cache(maxsize=128)
def _open_table(where: Location, version: int) -> DeltaTable:
    return DeltaTable(where.delta_uri, version=version, storage_options=where.delta_options())


def statistics_free_dataset(table: DeltaTable, prune: FilterType | None = None) -> ds.Dataset:
    """The table's files (those ``prune`` selects by their Delta statistics) as a pyarrow
    dataset that trusts only the Parquet files themselves.

    ``DeltaTable.to_pyarrow_dataset`` gives each file a guarantee built from its Delta
    statistics, and where a column has none (our commits record no string bounds) that
    guarantee says ``col >= null``: pyarrow then drops the file for any filter on the
    column, so ``name = 'x'`` would find nothing. Parquet's own row-group statistics still
    skip what they can."""
    key = (table.table_uri, table.version(), repr(prune))
    with _DATASETS_LOCK:
        known = _DATASETS.get(key)
        if known is not None:
            _DATASETS.move_to_end(key)
            return known
    described = table.to_pyarrow_dataset(file_pruning_predicate=prune)
    fragments = [
        described.format.make_fragment(fragment.path, described.filesystem)
        for fragment in described.get_fragments()
    ]
    dataset = ds.FileSystemDataset(
        fragments, described.schema, described.format, described.filesystem
    )
    with _DATASETS_LOCK:
        _DATASETS[key] = dataset
        while len(_DATASETS) > 256:
            _DATASETS.popitem(last=False)
    return dataset


class BucketFiles:
    """A table version's files by the buckets they can hold (their Delta statistics of the
    ``bucket`` column; a file without them can hold any), as datasets of those files.

    What ``to_pyarrow_dataset(file_pruning_predicate=[("bucket", "=", b)])`` selects, but
    with the statistics read once per table version instead of once per bucket, and with
    the guarantees of ``statistics_free_dataset``."""

    def __init__(self, table: DeltaTable) -> None:
        self._whole = statistics_free_dataset(table)
        self._fragments = list(self._whole.get_fragments())
        actions = pa.table(table.get_add_actions(flatten=True))
        names = [os.path.basename(unquote(p)) for p in actions.column("path").to_pylist()]
        lowest, highest = np.iinfo(np.int64).min, np.iinfo(np.int64).max
        lows = np.full(len(names), lowest, np.int64)
        highs = np.full(len(names), highest, np.int64)
        if "min.bucket" in actions.column_names and "max.bucket" in actions.column_names:
            low, high = actions.column("min.bucket"), actions.column("max.bucket")
            known = pc.and_(pc.is_valid(low), pc.is_valid(high)).to_numpy(zero_copy_only=False)
            lows[known] = low.to_numpy(zero_copy_only=False)[known]
            highs[known] = high.to_numpy(zero_copy_only=False)[known]
        at = {name: i for i, name in enumerate(names)}
        # per fragment of the dataset, its file's bucket range (any bucket if not found)
        self._lows = np.full(len(self._fragments), lowest, np.int64)
        self._highs = np.full(len(self._fragments), highest, np.int64)
        for f, fragment in enumerate(self._fragments):
            i = at.get(os.path.basename(fragment.path))
            if i is not None:
                self._lows[f], self._highs[f] = lows[i], highs[i]

    def dataset(self, bucket: int) -> ds.Dataset:
        """The files that can hold rows of ``bucket``."""
        chosen = np.flatnonzero((self._lows <= bucket) & (self._highs >= bucket)).tolist()
        whole = self._whole
        return ds.FileSystemDataset(
            [self._fragments[i] for i in chosen], whole.schema, whole.format, whole.filesystem
        )


# datasets by (table, version, pruning): a table version never changes, and a dataset keeps
# the Parquet footers it has read, so a repeated read does not parse them again
_DATASETS: OrderedDict[tuple[str, int, str], ds.FileSystemDataset] = OrderedDict()
_DATASETS_LOCK = threading.Lock()


class VersionedReader:
    """Reads output tables at fixed versions; picklable, so executors can use it too.

    This is the :class:`~cqlcdc.datadir.records.StateReader` handed to the core: it reads at
    the versions of the last complete batch (the manifest).
    """

    def __init__(
        self,
        tables_dir: Location | str | os.PathLike[str],
        versions: dict[str, int],
        tables: dict[str, DeltaTable] | None = None,
    ) -> None:
        # a Location, not a path: the reader is pickled into executors on other machines
        self.tables_dir = Location.of(tables_dir)
        self.versions = dict(versions)
        # handles already open at the wanted version (the driver's cache); never pickled
        self._tables: dict[str, DeltaTable] = {
            name: table
            for name, table in (tables or {}).items()
            if versions.get(name) == table.version()
        }
        # each output's files by bucket, found once per batch (not once per bucket read)
        self._buckets: dict[str, BucketFiles] = {}
        # the engine reads for two buckets at once: one thread opens a handle and plans a
        # dataset at a time (cheap); the reads themselves run in parallel
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"tables_dir": self.tables_dir, "versions": self.versions}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.tables_dir = state["tables_dir"]
        self.versions = state["versions"]
        self._tables = {}
        self._buckets = {}
        self._lock = threading.Lock()

    def _table(self, output: str) -> DeltaTable | None:
        version = self.versions.get(output)
        if version is None:
            return None
        table = self._tables.get(output)
        if table is None:
            table = open_table(table_dir(self.tables_dir, output), version)
            self._tables[output] = table
        return table

    def read(
        self,
        output: str,
        bucket: int,
        pks: Sequence[bytes] | pa.Array,
        columns: list[str] | None = None,
        tokens: Sequence[int] | pa.Array | None = None,
    ) -> pa.Table:
        """Rows of `output` with this `bucket` and a `pk` in `pks` (see StateReader)."""
        with self._lock:
            table = self._table(output)
            if table is None:
                return pa.table({})
            files = self._buckets.get(output)
            if files is None:
                files = self._buckets[output] = BucketFiles(table)
        dataset = files.dataset(bucket)
        key_type = dataset.schema.field("pk").type
        wanted = pks.cast(key_type) if isinstance(pks, pa.Array) else pa.array(pks, key_type)
        condition = (ds.field("bucket") == bucket) & ds.field("pk").isin(wanted)
        if tokens is not None and len(tokens) and "token" in dataset.schema.names:
            # a range, not the set: as cheap for a bulk batch's thousands of tokens as for a
            # single write's one, whose row group it picks (the pks are matched exactly)
            values = tokens if isinstance(tokens, pa.Array) else pa.array(tokens, pa.int64())
            bounds = pc.min_max(values)
            token = ds.field("token")
            condition &= (token >= bounds["min"].as_py()) & (token <= bounds["max"].as_py())
        return dataset.to_table(filter=condition, columns=columns)

    def scan(
        self,
        output: str,
        filters: FilterType | ds.Expression | None = None,
        columns: list[str] | None = None,
        prune: FilterType | None = None,
    ) -> pa.Table:
        """All rows of `output` at its version matching `filters` (tuples or an expression);
        ``prune`` (tuples) skips the files whose statistics cannot match it."""
        with self._lock:
            table = self._table(output)
            if table is None:
                return pa.table({})
            dataset = statistics_free_dataset(table, prune)
        if filters is not None and not isinstance(filters, ds.Expression):
            filters = pq.filters_to_expression(filters)
        return dataset.to_table(filter=filters, columns=columns)


class Snapshot:
    """A consistent view of every output table: all as of one committed batch.

    Attributes:
        tables_dir: where the output tables are (a local path or an object-store URI).
        manifest: the batch the view is at.
        batch_id: the batch the view is at (-1: nothing committed yet).
        max_seq: every ingest record with seq <= this is visible, none above.
    """

    __slots__ = ("manifest", "tables_dir")

    def __init__(self, tables_dir: Location | str | os.PathLike[str], manifest: Manifest) -> None:
        self.tables_dir = Location.of(tables_dir)
        self.manifest = manifest

    def __repr__(self) -> str:
        return f"Snapshot({self.tables_dir.uri!r}, batch_id={self.batch_id})"

    @property
    def batch_id(self) -> int:
        return self.manifest.batch_id

    @property
    def max_seq(self) -> int:
        return self.manifest.max_seq

    def outputs(self) -> list[str]:
        """The output tables in this snapshot, sorted."""
        return sorted(self.manifest.versions)

    def version_of(self, output: str) -> int | None:
        """The Delta version of `output` in this snapshot, or None if it does not exist yet."""
        return self.manifest.version_of(output)

    def schema(self, output: str) -> pa.Schema:
        """The Arrow schema of `output` at this snapshot's version (empty if it does not
        exist)."""
        version = self.manifest.version_of(output)
        if version is None:
            return pa.schema([])
        table = open_table(table_dir(self.tables_dir, output), version)
        return statistics_free_dataset(table).schema

    def count(self, output: str, condition: ds.Expression, prune: FilterType | None = None) -> int:
        """How many rows of `output` at this snapshot's version match `condition`, without
        reading columns the condition does not need (0 if `output` does not exist)."""
        version = self.manifest.version_of(output)
        if version is None:
            return 0
        table = open_table(table_dir(self.tables_dir, output), version)
        return int(statistics_free_dataset(table, prune).count_rows(filter=condition))

    def read(
        self,
        output: str,
        filters: FilterType | ds.Expression | None = None,
        columns: list[str] | None = None,
        prune: FilterType | None = None,
    ) -> pa.Table:
        """Rows of `output` at this snapshot's version (an empty table if it does not exist).

        Args:
            output: the output table name.
            filters: DNF tuples as for ``DeltaTable.to_pyarrow_table`` or a pyarrow expression.
            columns: the columns to read (all if None).
            prune: DNF tuples selecting files by their statistics (e.g. the bucket).
        """
        return VersionedReader(self.tables_dir, self.manifest.versions).scan(
            output, filters, columns, prune
        )
