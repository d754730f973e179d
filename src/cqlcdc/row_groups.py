"""Parquet row groups of a table's data files, picked by one integer column's statistics and
kept decoded: the read a CDC consumer repeats for every stream, all the time.

A stream's ``cdc$time`` window touches a row group or two of each file it names (the
files' Delta statistics pick them by bucket, the row groups' ``_ticks`` statistics by
time). Through a pyarrow dataset each such read paid the scanner's fixed cost per file and
decoded every column of every row group again. Here the footers are read once per file,
and decoded row groups stay in a cache bounded by bytes: data files never change (a
compaction writes new ones), so an entry is never stale, and a consumer's next window
reads mostly the row groups its last one did.

>>> RowGroupCache(limit_bytes=1 << 20).limit_bytes
1048576
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from pyarrow import acero

# decoded row groups kept per process (CQLCDC_ROW_GROUP_CACHE_MB; 0 turns the cache off)
DEFAULT_CACHE_MB = 256


class RowGroupCache:
    """Decoded row groups by (file, row group), least recently used evicted past
    ``limit_bytes``; footers by file. Thread-safe: the server reads on many threads."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self._groups: OrderedDict[tuple[str, int], pa.Table] = OrderedDict()
        self._footers: OrderedDict[str, pq.FileMetaData] = OrderedDict()
        self._bounds: dict[tuple[str, str], tuple[npt.NDArray[Any], npt.NDArray[Any]]] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def footer(self, table: str, fragment: ds.ParquetFileFragment) -> pq.FileMetaData:
        """The file's Parquet footer, read once (``table``: where the file's table is)."""
        key = f"{table}/{fragment.path}"
        with self._lock:
            known = self._footers.get(key)
            if known is not None:
                self._footers.move_to_end(key)
                return known
        with fragment.filesystem.open_input_file(fragment.path) as f:
            footer = pq.ParquetFile(f).metadata
        with self._lock:
            self._footers[key] = footer
            while len(self._footers) > 4096:
                self._footers.popitem(last=False)
        return footer

    def bounds(
        self, table: str, fragment: ds.ParquetFileFragment, column: str
    ) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
        """The lowest and highest value of ``column`` in each row group of the file, as
        far as its statistics tell (a group that may hold a null, or has no statistics,
        is bounded by the int64 range)."""
        key = (f"{table}/{fragment.path}", column)
        with self._lock:
            known = self._bounds.get(key)
        if known is not None:
            return known
        found = row_group_bounds(self.footer(table, fragment), column)
        with self._lock:
            if len(self._bounds) > 4 * 4096:
                self._bounds.clear()
            self._bounds[key] = found
        return found

    def row_group(self, table: str, fragment: ds.ParquetFileFragment, index: int) -> pa.Table:
        """Row group ``index`` of the file, every column, decoded once while it is kept."""
        key = (f"{table}/{fragment.path}", index)
        with self._lock:
            known = self._groups.get(key)
            if known is not None:
                self._groups.move_to_end(key)
                return known
        footer = self.footer(table, fragment)
        with fragment.filesystem.open_input_file(fragment.path) as f:
            group = pq.ParquetFile(f, metadata=footer).read_row_group(index, use_threads=False)
        size = group.nbytes
        if size <= self.limit_bytes:
            with self._lock:
                if key not in self._groups:
                    self._groups[key] = group
                    self._bytes += size
                while self._bytes > self.limit_bytes:
                    _, dropped = self._groups.popitem(last=False)
                    self._bytes -= dropped.nbytes
        return group

    def clear(self) -> None:
        with self._lock:
            self._groups.clear()
            self._footers.clear()
            self._bytes = 0


def _cache_bytes() -> int:
    return int(float(os.environ.get("CQLCDC_ROW_GROUP_CACHE_MB", DEFAULT_CACHE_MB)) * (1 << 20))


CACHE = RowGroupCache(_cache_bytes())


def row_group_bounds(
    footer: pq.FileMetaData, column: str
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """Each row group's lowest and highest ``column`` value by its statistics; a group
    without them for it (or without the column), or that may hold a null, gets the whole
    int64 range: it is always read."""
    lows = np.full(footer.num_row_groups, np.iinfo(np.int64).min, np.int64)
    highs = np.full(footer.num_row_groups, np.iinfo(np.int64).max, np.int64)
    # by leaf: a collection or UDT column has several, so top-level names do not index them
    leaves = footer.schema
    at = next((j for j in range(footer.num_columns) if leaves.column(j).path == column), None)
    if at is None:
        return lows, highs
    for i in range(footer.num_row_groups):
        stats = footer.row_group(i).column(at).statistics
        if stats is not None and stats.has_min_max and not stats.null_count:
            lows[i], highs[i] = stats.min, stats.max
    return lows, highs


def read_in_range(
    table: str,
    dataset: ds.FileSystemDataset,
    column: str,
    low: int,
    high: int,
    condition: ds.Expression,
    columns: Sequence[str] | None = None,
    cache: RowGroupCache | None = None,
) -> pa.Table:
    """The rows of ``dataset`` matching ``condition`` from the row groups whose ``column``
    statistics overlap ``[low, high]`` (``condition`` should say that range too: the row
    groups only narrow what is read). Columns a file lacks come as nulls, in the dataset's
    schema, as a dataset scan gives them.

    Args:
        table: where the files' table is (its location's URI): with a file's path, the
            key of what is cached of it. Data file names hold a uuid, and a file never
            changes once written.
        dataset: the files (already picked by their Delta statistics).
        column: an integer column whose row-group statistics bound the read.
        low: the lowest value wanted.
        high: the highest value wanted.
        condition: the rows kept.
        columns: the columns returned (all of the dataset's schema if None).
        cache: where decoded row groups are kept (the process's cache if None).
    """
    cache = CACHE if cache is None else cache
    schema = dataset.schema
    groups: list[pa.Table] = []
    inside: list[pa.Array] = []
    for fragment in dataset.get_fragments():
        lows, highs = cache.bounds(table, fragment, column)
        for index in np.flatnonzero((highs >= low) & (lows <= high)).tolist():
            # a column the file lacks is null, as the dataset scan reads it
            group = as_schema(cache.row_group(table, fragment, index), schema)
            groups.append(group)
            inside.append(_in_range(group[column], low, high))
    if not groups:
        return schema.empty_table() if columns is None else schema.empty_table().select(columns)
    # the range in numpy first, one filter over all the groups (no copy until then), then
    # the condition once on the few rows left: an Acero filter per row group cost more
    # than the rows it read
    out = pa.concat_tables(groups).filter(pa.chunked_array(inside, pa.bool_()))
    out = _filtered(out.combine_chunks(), condition) if out.num_rows else out
    if columns is not None:
        out = out.select(list(columns))
    return out


def _filtered(table: pa.Table, condition: ds.Expression) -> pa.Table:
    """``table.filter(condition)`` on the calling thread: the rows are few, and handing
    them to Acero's thread pool cost more (milliseconds on a busy machine) than the test."""
    plan = acero.Declaration.from_sequence(
        [
            acero.Declaration("table_source", acero.TableSourceNodeOptions(table)),
            acero.Declaration("filter", acero.FilterNodeOptions(condition)),
        ]
    )
    return plan.to_table(use_threads=False)


def _in_range(values: pa.ChunkedArray, low: int, high: int) -> pa.Array:
    """Which values lie in ``[low, high]``; nulls are kept (the condition decides them)."""
    numbers = values.fill_null(low) if values.null_count else values
    at = numbers.to_numpy()
    return pa.array((at >= low) & (at <= high))


def as_schema(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A file's rows in the table version's schema: a column the file lacks is null (an
    older file, before the column was added), as a dataset scan reads it."""
    if table.schema.equals(schema):
        return table
    columns: list[Any] = []
    for field in schema:
        if field.name in table.column_names:
            column = table[field.name]
            columns.append(column if column.type == field.type else column.cast(field.type))
        else:
            columns.append(pa.nulls(table.num_rows, field.type))
    return pa.table(columns, schema=schema)


__all__ = ["CACHE", "RowGroupCache", "as_schema", "read_in_range", "row_group_bounds"]
