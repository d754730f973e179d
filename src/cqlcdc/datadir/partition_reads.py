"""A base table's rows of a few named partitions, read without a dataset scan: the read a
``SELECT ... WHERE pk = ?`` makes, the one a client repeats most.

A pyarrow dataset scan of the bucket's files paid, every time, the scanner's fixed cost per
file, a file system reached through Python callbacks (deltalake's handler), and the decode
of every row group whose token statistics overlap the key's token: one per data file of
the bucket, though only one file holds the partition (the micro-batches of a load each
write a file per bucket, all spanning the bucket's token range). Here:

- a table version's files are known by their Delta statistics (bucket, token and seq
  ranges), found once per version;
- a data file's ``token`` column is read once (files never change: a compaction writes new
  ones) and kept sorted, so a key's rows are found by a binary search, and a file that does
  not hold the token costs no decode at all;
- the row groups that do hold it are decoded through ``cqlcdc.row_groups``'s cache (the
  one the CDC window reads use), over pyarrow's own file system.

So a partition read decodes only the row group its rows are in, and nothing it decoded
before while the cache keeps it.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from cqlcdc.datadir.commit import open_table, statistics_free_dataset, table_dir
from cqlcdc.location import Location
from cqlcdc.row_groups import CACHE, RowGroupCache, as_schema

_INT64_MIN = np.iinfo(np.int64).min
_INT64_MAX = np.iinfo(np.int64).max
# token indexes kept per process, by bytes (a file's: 8 bytes a row, 12 if its rows are not
# in token order); past it, least recently used first
TOKEN_INDEX_BYTES = 64 << 20
# table versions whose file lists are kept (each: a few hundred bytes a file)
KEPT_VERSIONS = 64


@dataclass(frozen=True, slots=True)
class _DataFile:
    """A data file of a table version, with its Delta statistics (int64 extremes where it
    has none: it may hold anything)."""

    fragment: ds.ParquetFileFragment
    buckets: tuple[int, int]
    tokens: tuple[int, int]
    max_seq: int


@dataclass(frozen=True, slots=True)
class _TokenIndex:
    """A file's tokens in ascending order, the row each came from (None: the file's rows
    are in token order), and where each row group starts (rows numbered through the
    file)."""

    tokens: npt.NDArray[np.int64]
    rows: npt.NDArray[np.int32] | None
    group_starts: npt.NDArray[np.int64]

    @property
    def nbytes(self) -> int:
        rows = 0 if self.rows is None else self.rows.nbytes
        return int(self.tokens.nbytes + rows + self.group_starts.nbytes)

    def rows_of(self, wanted: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The rows (numbered through the file) holding one of the ``wanted`` tokens (sorted,
        distinct), ascending."""
        lefts = np.searchsorted(self.tokens, wanted, side="left")
        rights = np.searchsorted(self.tokens, wanted, side="right")
        runs = [
            np.arange(a, b, dtype=np.int64) for a, b in zip(lefts, rights, strict=True) if b > a
        ]
        if not runs:
            return np.empty(0, np.int64)
        at = np.concatenate(runs)
        return at if self.rows is None else np.sort(self.rows[at].astype(np.int64))


class _Files:
    """What is kept of tables' files: each version's files, each file's token index."""

    def __init__(self) -> None:
        self._versions: OrderedDict[tuple[str, int], tuple[pa.Schema, list[_DataFile]]] = (
            OrderedDict()
        )
        self._indexes: OrderedDict[str, _TokenIndex] = OrderedDict()
        self._index_bytes = 0
        self._lock = threading.Lock()

    def version(self, where: Location, version: int) -> tuple[pa.Schema, list[_DataFile]]:
        """The schema a dataset scan of the version reads with, and its files."""
        key = (where.uri, version)
        with self._lock:
            known = self._versions.get(key)
            if known is not None:
                self._versions.move_to_end(key)
                return known
        table = open_table(where, version)
        schema = statistics_free_dataset(table).schema
        actions = pa.table(table.get_add_actions(flatten=True))
        n = actions.num_rows
        paths = actions.column("path").to_pylist()
        stats = {
            name: _column_or(actions, name, n, default)
            for name, default in (
                ("min.bucket", _INT64_MIN),
                ("max.bucket", _INT64_MAX),
                ("min.token", _INT64_MIN),
                ("max.token", _INT64_MAX),
                ("max.seq", _INT64_MAX),
            )
        }
        filesystem = where.filesystem
        parquet = ds.ParquetFileFormat()
        files = [
            _DataFile(
                parquet.make_fragment(where.child(unquote(path)).fs_path, filesystem),
                (int(stats["min.bucket"][i]), int(stats["max.bucket"][i])),
                (int(stats["min.token"][i]), int(stats["max.token"][i])),
                int(stats["max.seq"][i]),
            )
            for i, path in enumerate(paths)
        ]
        found = (schema, files)
        with self._lock:
            self._versions[key] = found
            while len(self._versions) > KEPT_VERSIONS:
                self._versions.popitem(last=False)
        return found

    def token_index(self, where: Location, fragment: ds.ParquetFileFragment) -> _TokenIndex:
        """The file's tokens, sorted, read once while kept."""
        key = fragment.path
        with self._lock:
            known = self._indexes.get(key)
            if known is not None:
                self._indexes.move_to_end(key)
                return known
        footer = CACHE.footer(where.uri, fragment)
        with fragment.filesystem.open_input_file(fragment.path) as f:
            column = pq.ParquetFile(f, metadata=footer).read(columns=["token"], use_threads=False)
        tokens = column.column("token").to_numpy().astype(np.int64, copy=False)
        rows = None
        if len(tokens) > 1 and not (tokens[1:] >= tokens[:-1]).all():
            rows = np.argsort(tokens, kind="stable").astype(np.int32)
            tokens = tokens[rows]
        sizes = [footer.row_group(i).num_rows for i in range(footer.num_row_groups)]
        starts = np.concatenate(([0], np.cumsum(sizes, dtype=np.int64)))
        index = _TokenIndex(tokens, rows, starts)
        with self._lock:
            if key not in self._indexes:
                self._indexes[key] = index
                self._index_bytes += index.nbytes
            while self._index_bytes > TOKEN_INDEX_BYTES and len(self._indexes) > 1:
                _, dropped = self._indexes.popitem(last=False)
                self._index_bytes -= dropped.nbytes
        return index


def _column_or(actions: pa.Table, name: str, n: int, default: int) -> npt.NDArray[np.int64]:
    """A statistics column of the add actions, ``default`` where a file has none."""
    if name not in actions.column_names:
        return np.full(n, default, np.int64)
    column = actions.column(name).cast(pa.int64())
    return np.asarray(pc.fill_null(column, default).to_numpy(zero_copy_only=False), np.int64)


FILES = _Files()


def read_partitions(
    tables_dir: Location | str | os.PathLike[str],
    output: str,
    version: int,
    keys: Sequence[bytes],
    tokens: Sequence[int],
    buckets: Sequence[int],
    after_seq: int = 0,
    cache: RowGroupCache | None = None,
) -> pa.Table:
    """The rows of base table ``output`` at ``version`` whose partition key is one of
    ``keys`` (serialized; ``tokens`` their tokens, ``buckets`` the buckets those fall in)
    and whose seq is above ``after_seq`` (a TRUNCATE's), in the schema and with the rows a
    dataset scan filtered the same way gives, in file order (the caller orders them by seq).

    Args:
        tables_dir: where the output tables are.
        output: the base output's name (``base/<table id>``).
        version: its Delta version in the snapshot read.
        keys: the serialized partition keys wanted.
        tokens: their tokens (any order).
        buckets: the buckets of those tokens.
        after_seq: only rows written after this seq.
        cache: where decoded row groups are kept (the process's if None).
    """
    cache = CACHE if cache is None else cache
    where = table_dir(tables_dir, output)
    schema, files = FILES.version(where, version)
    wanted = np.unique(np.asarray(tokens, np.int64))
    low, high = int(wanted[0]), int(wanted[-1])
    chosen = set(buckets)
    pieces: list[pa.Table] = []
    for file in files:
        if file.max_seq <= after_seq or file.tokens[1] < low or file.tokens[0] > high:
            continue
        if not any(file.buckets[0] <= b <= file.buckets[1] for b in chosen):
            continue
        index = FILES.token_index(where, file.fragment)
        rows = index.rows_of(wanted)
        if not len(rows):
            continue
        groups = np.searchsorted(index.group_starts, rows, side="right") - 1
        for group in np.unique(groups).tolist():
            decoded = cache.row_group(where.uri, file.fragment, group)
            within = rows[groups == group] - index.group_starts[group]
            pieces.append(as_schema(decoded.take(pa.array(within)), schema))
    if not pieces:
        return schema.empty_table()
    table = pa.concat_tables(pieces)
    key_type = schema.field("pk").type
    keep = pc.is_in(table["pk"], pa.array(list(keys), key_type))
    if after_seq:
        keep = pc.and_(keep, pc.greater(table["seq"], after_seq))
    return table.filter(keep)


__all__ = ["FILES", "read_partitions"]
