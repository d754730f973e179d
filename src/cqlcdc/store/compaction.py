"""Between-batch maintenance of the output tables: compact small files per bucket, vacuum.

Every micro-batch adds one small file per (output, bucket). The driver, the only writer,
rewrites a bucket's small files into one when it has more than ``max_small_files`` of them,
as one Delta commit (adds + removes) that touches that bucket only; mergeable outputs (base
state) are merged to one row per partition on the way. See docs/pipeline.md, "Compaction".

>>> CompactionPolicy().max_small_files
8
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from cqlcdc.location import Location
from cqlcdc.store.commit import (
    ROW_GROUP_ROWS,
    DataFile,
    _delta_stats,
    statistics_columns,
    table_dir,
)
from cqlcdc.store.durable import synced_file
from cqlcdc.store.records import BucketProcessor

_NAME = re.compile(r"^part-(\d+)-b(\d+)-")
# the bucket column of each kind of output (base/errors: bucket, log: _bucket)
_BUCKET_COLUMNS = ("bucket", "_bucket")


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When and how the engine compacts and vacuums (defaults: see docs/pipeline.md).

    Attributes:
        max_small_files: a bucket of an output with more small files than this is compacted.
        small_file_bytes: files at least this big are never rewritten (nor counted).
        size_ratio: an older file joins a merge of newer ones only while it is at most this
            many times their total size, so each row is rewritten O(log(table/batch)) times.
        row_group_rows: Parquet row group size of compacted files (pk-sorted base files:
            small groups let state reads skip most of a bucket by the pk statistics).
        vacuum_interval_s: how often ``vacuum`` runs, at most (and on the first batch).
        retention_hours: files removed (or never committed) this long ago are deleted.
    """

    max_small_files: int = 8
    small_file_bytes: int = 64 * 1024 * 1024
    size_ratio: float = 2.0
    row_group_rows: int = ROW_GROUP_ROWS
    vacuum_interval_s: float = 3600.0
    retention_hours: int = 1


@dataclass(frozen=True, slots=True)
class _File:
    path: str
    size: int
    modification_time: int


def bucket_of_name(path: str) -> int | None:
    """The bucket in a data file name ``part-<batch>-b<bucket>-<uuid>.parquet``."""
    match = _NAME.match(path)
    return int(match.group(2)) if match else None


def _batch_of_name(path: str) -> int:
    match = _NAME.match(path)
    return int(match.group(1)) if match else 0


class Compactor:
    """Tracks small files per (output, bucket) and compacts the buckets that are due.

    Used by the Engine in the driver, between batches. Counting is incremental (the files
    each batch adds), so checking costs nothing when no bucket is due; a table's files are
    listed only when one of its buckets is compacted (or on first sight of the table).

    Args:
        tables_dir: root of the output tables.
        processor: the core; its ``compact_rows(output, rows)`` merges mergeable
            outputs (None: keep the rows, join the files).
        policy: thresholds.
    """

    def __init__(
        self,
        tables_dir: Location | str | os.PathLike[str],
        processor: BucketProcessor,
        policy: CompactionPolicy,
    ) -> None:
        self.tables_dir = Location.of(tables_dir)
        self.processor = processor
        self.policy = policy
        self._small: dict[str, dict[int, int]] = {}
        self.compactions = 0

    def note_commit(self, output: str, files: Iterable[DataFile], table: DeltaTable) -> None:
        """Count the files a batch committed to `output` (`table` is at that commit)."""
        counts = self._small.get(output)
        if counts is None:  # first sight: count what the table holds (new files included)
            self._small[output] = self._count(table)
            return
        for file in files:
            bucket = bucket_of_name(file.path)
            if bucket is not None and file.size < self.policy.small_file_bytes:
                counts[bucket] = counts.get(bucket, 0) + 1

    def forget(self, output: str) -> None:
        """Recount `output` on its next commit (its files were rewritten elsewhere)."""
        self._small.pop(output, None)

    def due(self) -> dict[str, list[int]]:
        """Buckets with more small files than the policy allows, per output."""
        limit = self.policy.max_small_files
        out: dict[str, list[int]] = {}
        for output, counts in self._small.items():
            buckets = sorted(b for b, n in counts.items() if n > limit)
            if buckets:
                out[output] = buckets
        return out

    def _files_by_bucket(self, table: DeltaTable) -> dict[int, list[_File]]:
        actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()
        paths: list[str] = actions.get("path", [])
        lows: list[Any] = [None] * len(paths)
        highs: list[Any] = [None] * len(paths)
        for column in _BUCKET_COLUMNS:
            if f"min.{column}" in actions:
                lows, highs = actions[f"min.{column}"], actions[f"max.{column}"]
                break
        by_bucket: dict[int, list[_File]] = {}
        for i, path in enumerate(paths):
            low, high = lows[i], highs[i]
            bucket = int(low) if low is not None and low == high else bucket_of_name(path)
            if bucket is None or (low is not None and low != high):
                continue  # a file of several buckets (none of ours): left alone
            by_bucket.setdefault(bucket, []).append(
                _File(path, int(actions["size_bytes"][i]), int(actions["modification_time"][i]))
            )
        return by_bucket

    def _count(self, table: DeltaTable) -> dict[int, int]:
        small = self.policy.small_file_bytes
        return {
            bucket: sum(1 for f in files if f.size < small)
            for bucket, files in self._files_by_bucket(table).items()
        }

    def choose(self, files: list[_File]) -> list[_File]:
        """The files of one bucket to merge: the newest small ones, oldest first.

        Walking back from the newest file, an older one joins while it is at most
        ``size_ratio`` times the total so far; then older ones join until at most
        ``max_small_files`` small files would remain. Large files are never chosen.
        """
        small = sorted(
            (f for f in files if f.size < self.policy.small_file_bytes),
            key=lambda f: (f.modification_time, _batch_of_name(f.path), f.path),
        )
        if len(small) < 2:
            return []
        start = len(small) - 1
        total = small[start].size
        while start > 0 and small[start - 1].size <= self.policy.size_ratio * total:
            start -= 1
            total += small[start].size
        while start > 0 and start + 1 > self.policy.max_small_files:
            start -= 1
        return small[start:] if len(small) - start >= 2 else []

    def compact(self, output: str, table: DeltaTable, buckets: list[int]) -> int:
        """Compact the given buckets of `output`, one Delta commit per bucket.

        Returns:
            The number of commits made.
        """
        table.update_incremental()
        by_bucket = self._files_by_bucket(table)
        counts = self._small.setdefault(output, {})
        commits = 0
        for bucket in buckets:
            files = by_bucket.get(bucket, [])
            chosen = self.choose(files)
            if chosen and self._rewrite(output, table, bucket, chosen):
                commits += 1
                table.update_incremental()
            counts[bucket] = self._count_after(files, chosen, table, bucket)
        self.compactions += commits
        return commits

    def _count_after(
        self, files: list[_File], chosen: list[_File], table: DeltaTable, bucket: int
    ) -> int:
        if not chosen:
            return sum(1 for f in files if f.size < self.policy.small_file_bytes)
        return self._count(table).get(bucket, 0)

    def _rewrite(self, output: str, table: DeltaTable, bucket: int, chosen: list[_File]) -> bool:
        root = table_dir(self.tables_dir, output)
        parts = [_read_parquet(root.child(unquote(f.path))) for f in chosen]
        rows = pa.concat_tables(parts, promote_options="permissive")
        merged = self.processor.compact_rows(output, rows)
        data_change = merged is not None  # a merge changes rows; joining files does not
        if merged is not None:
            rows = merged
        now_ms = int(time.time() * 1000)
        actions: list[AddAction | RemoveAction] = [
            RemoveAction(f.path, data_change, now_ms, f.size, {}) for f in chosen
        ]
        if rows.num_rows:
            batch = max(_batch_of_name(f.path) for f in chosen)
            # the newest input's time: the new file takes its inputs' place in time order
            added = self._write(root, rows, batch, bucket, max(f.modification_time for f in chosen))
            actions.insert(
                0,
                AddAction(
                    added.path, added.size, {}, added.modification_time, data_change, added.stats
                ),
            )
        table.create_write_transaction(
            actions,
            mode="append",
            schema=table.schema(),
            commit_properties=CommitProperties(
                custom_metadata={"cqlcdc.compaction": f"{output} bucket {bucket}"}
            ),
        )
        return True

    def _write(
        self, root: Location, rows: pa.Table, batch: int, bucket: int, modification_time: int
    ) -> DataFile:
        name = f"part-{batch:010d}-b{bucket:05d}-{uuid.uuid4().hex}.parquet"
        # zstd: compacted files are the long-lived ones; no dictionaries and no statistics
        # where no read prunes, as for data files (dictionaries made these files larger
        # and their writes ~50% slower, the next batch waiting for them)
        size = _write_parquet(
            root.child(name),
            rows,
            compression="zstd",
            use_dictionary=False,
            row_group_size=self.policy.row_group_rows,
            write_statistics=statistics_columns(rows.column_names),
        )
        return DataFile(
            output="",
            path=name,
            size=size,
            num_records=rows.num_rows,
            modification_time=modification_time,
            stats=_delta_stats(rows),
            schema=rows.schema.serialize().to_pybytes(),
        )


def _read_parquet(where: Location) -> pa.Table:
    """A whole Parquet file of a table (through this process's filesystem client)."""
    if where.is_local:
        return pq.read_table(where.path)
    return pq.read_table(where.fs_path, filesystem=where.filesystem)


def _write_parquet(where: Location, rows: pa.Table, **options: Any) -> int:
    """Write ``rows`` as a new Parquet file at ``where``, durable when this returns (a
    local file fsynced; an object stored by its upload's completion). Returns its size."""
    if where.is_local:
        with synced_file(where.path) as sink:
            pq.write_table(rows, sink, **options)
        return where.path.stat().st_size
    with where.filesystem.open_output_stream(where.fs_path) as stream:
        pq.write_table(rows, stream, **options)
        return int(stream.tell())


def vacuum(table: DeltaTable, retention_hours: int) -> list[str]:
    """Delete files no version newer than `retention_hours` needs, and orphans that old.

    ``full`` also deletes files never committed (attempts that crashed before their commit);
    the retention keeps files of a running batch and of recent snapshots (readers holding
    an older manifest) safe. Returns the files deleted.
    """
    table.update_incremental()
    return table.vacuum(
        retention_hours=retention_hours,
        dry_run=False,
        enforce_retention_duration=False,
        full=True,
    )
