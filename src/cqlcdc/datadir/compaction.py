"""Between-batch maintenance of the output tables: compact small files per bucket, vacuum.

Every micro-batch adds small files to each output: one per run of consecutive buckets (a
small batch: one file of many buckets), or per bucket (a bulk one). The driver, the only
writer, rewrites a bucket's small files into one when more than ``max_small_files`` of them
cover it, as one Delta commit (adds + removes) that touches that bucket only, or the buckets
its files of several buckets cover, which it splits into files of one bucket each; mergeable
outputs (base state) are merged to one row per partition on the way. See docs/pipeline.md,
"Compaction".

>>> CompactionPolicy().max_small_files
8
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from cqlcdc.datadir.commit import (
    BUCKET_COLUMNS,
    ROW_GROUP_ROWS,
    DataFile,
    _delta_stats,
    batch_of_name,
    bucket_column,
    bucket_range,
    buckets_of_name,
    data_file_name,
    statistics_columns,
    table_dir,
)
from cqlcdc.datadir.durable import synced_file
from cqlcdc.datadir.file_runs import BucketRuns
from cqlcdc.datadir.records import BucketProcessor
from cqlcdc.errors import ServerError
from cqlcdc.location import Location


@dataclass(frozen=True, slots=True)
class CompactionPolicy:
    """When and how the engine compacts and vacuums (defaults: see docs/pipeline.md).

    Attributes:
        max_small_files: a bucket of an output with more small files than this is compacted.
        small_file_bytes: files at least this big are never rewritten (nor counted).
        size_ratio: an older file joins a merge of newer ones only while it is at most this
            many times their total size, so each row is rewritten O(log(table/batch)) times.
        alone_rows: a bucket's rows from files of several buckets get a file of their own
            once there are this many (a row group's worth); fewer stay in a shared file of
            consecutive buckets, so compacting a small batch's files costs an object write
            or two, not one per bucket.
        row_group_rows: Parquet row group size of compacted files (pk-sorted base files:
            small groups let state reads skip most of a bucket by the pk statistics).
        vacuum_interval_s: how often ``vacuum`` runs, at most (and on the first batch).
        retention_hours: files removed (or never committed) this long ago are deleted.
    """

    max_small_files: int = 8
    small_file_bytes: int = 64 * 1024 * 1024
    size_ratio: float = 2.0
    row_group_rows: int = ROW_GROUP_ROWS
    alone_rows: int = ROW_GROUP_ROWS
    vacuum_interval_s: float = 3600.0
    retention_hours: int = 1


@dataclass(frozen=True, slots=True)
class _File:
    """A committed data file and the buckets it can hold (``first..last``)."""

    path: str
    size: int
    modification_time: int
    first: int
    last: int

    @property
    def spans(self) -> bool:
        """Whether the file holds several buckets (a micro-batch's run of buckets)."""
        return self.first != self.last

    def covers(self, bucket: int) -> bool:
        return self.first <= bucket <= self.last


def _time_order(f: _File) -> tuple[int, int, str]:
    """Files in the order their rows were committed (compacted ones in their inputs' place)."""
    return f.modification_time, batch_of_name(f.path), f.path


def bucket_of_name(path: str) -> int | None:
    """The bucket of a one-bucket data file name ``part-<batch>-b<bucket>-<uuid>.parquet``
    (None for a file of several buckets, or a name not of ours)."""
    buckets = buckets_of_name(path)
    return buckets[0] if buckets is not None and buckets[0] == buckets[1] else None


class Compactor:
    """Tracks small files per (output, bucket) and compacts the buckets that are due.

    Used by the Engine in the driver, between batches. Counting is incremental (the files
    each batch adds), so checking costs nothing when no bucket is due; a table's files are
    listed only when one of its buckets is compacted (or on first sight of the table).

    A small batch writes a file of several buckets per output (``store.file_runs``); it
    counts as a small file of each bucket it covers. Compacting a bucket splits every small
    file of several buckets that covers it: all its rows go, with those of the other files
    chosen in each bucket it covers, into files of one bucket each, in one Delta commit that
    removes it.

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
            buckets = buckets_of_name(file.path)
            if buckets is not None and file.size < self.policy.small_file_bytes:
                for bucket in range(buckets[0], buckets[1] + 1):
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

    def _files(self, table: DeltaTable) -> list[_File]:
        """The table's files with their buckets: by the statistics of the bucket column, or
        by name where there are none (an output without a bucket column is filed under
        bucket 0); files that say neither are left alone."""
        actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()
        paths: list[str] = actions.get("path", [])
        lows: list[Any] = [None] * len(paths)
        highs: list[Any] = [None] * len(paths)
        for column in BUCKET_COLUMNS:
            if f"min.{column}" in actions:
                lows, highs = actions[f"min.{column}"], actions[f"max.{column}"]
                break
        files: list[_File] = []
        for i, path in enumerate(paths):
            low, high = lows[i], highs[i]
            buckets = (int(low), int(high)) if low is not None else buckets_of_name(path)
            if buckets is None:
                continue
            size, mtime = int(actions["size_bytes"][i]), int(actions["modification_time"][i])
            files.append(_File(path, size, mtime, *buckets))
        return files

    def _count(self, table: DeltaTable) -> dict[int, int]:
        counts: dict[int, int] = {}
        for f in self._files(table):
            if f.size < self.policy.small_file_bytes:
                for bucket in range(f.first, f.last + 1):
                    counts[bucket] = counts.get(bucket, 0) + 1
        return counts

    def choose(self, files: list[_File]) -> list[_File]:
        """The files of one bucket to merge: the newest small ones, oldest first.

        Walking back from the newest file, an older one joins while it is at most
        ``size_ratio`` times the total so far; then older ones join until at most
        ``max_small_files`` small files would remain. Large files are never chosen.
        """
        small = sorted((f for f in files if f.size < self.policy.small_file_bytes), key=_time_order)
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
        """Compact the given buckets of `output`: one Delta commit per bucket, or per group
        of buckets that small files of several buckets tie together.

        Returns:
            The number of commits made.
        """
        table.update_incremental()
        files = self._files(table)
        commits = 0
        for group in self._plan(files, buckets):
            if self._rewrite(output, table, group):
                commits += 1
                table.update_incremental()
        self._small[output] = self._count(table)
        self.compactions += commits
        return commits

    def _plan(self, files: list[_File], due: list[int]) -> list[dict[int, list[_File]]]:
        """What each commit rewrites: per bucket, the files whose rows of that bucket it
        merges into one new file. A due bucket's chosen files (``choose``); each small file
        of several buckets that covers a due bucket, in every bucket it covers, with the
        files chosen there; buckets a file of several buckets ties together commit together.
        """
        small = self.policy.small_file_bytes
        spanning = [f for f in files if f.spans and f.size < small]
        splits = [f for f in spanning if any(f.covers(b) for b in due)]
        # buckets tied by a split file are one group (they cover ranges: merge overlaps)
        groups: list[tuple[int, int, list[_File]]] = []
        for f in sorted(splits, key=lambda f: (f.first, f.last)):
            if groups and f.first <= groups[-1][1]:
                first, last, members = groups[-1]
                groups[-1] = (first, max(last, f.last), [*members, f])
            else:
                groups.append((f.first, f.last, [f]))
        plans: list[dict[int, list[_File]]] = []
        for first, last, members in groups:
            plan: dict[int, list[_File]] = {}
            for bucket in range(first, last + 1):
                covering = [f for f in members if f.covers(bucket)]
                if not covering:
                    continue
                plan[bucket] = [*self._chosen_alone(files, bucket, covering), *covering]
            plans.append(plan)
        for bucket in due:
            if any(first <= bucket <= last for first, last, _ in groups):
                continue
            chosen = self.choose(self._bucket_files(files, bucket, []))
            if chosen:
                plans.append({bucket: chosen})
        return plans

    def _bucket_files(self, files: list[_File], bucket: int, splits: list[_File]) -> list[_File]:
        """The candidates of ``bucket``: its own files, and the files of several buckets
        that cover it, each sized as its share of them (for ``choose``'s size ratio)."""
        out = [f for f in files if not f.spans and f.first == bucket]
        for f in splits:
            out.append(dataclasses.replace(f, size=f.size // (f.last - f.first + 1)))
        return out

    def _chosen_alone(self, files: list[_File], bucket: int, splits: list[_File]) -> list[_File]:
        """The one-bucket files of ``bucket`` that join the rows split into it."""
        chosen = self.choose(self._bucket_files(files, bucket, splits))
        return [f for f in chosen if not f.spans]

    def _rewrite(self, output: str, table: DeltaTable, plan: dict[int, list[_File]]) -> bool:
        """One Delta commit: every file of ``plan`` removed, and per bucket one file of its
        rows from them (merged, for a mergeable output) added."""
        root = table_dir(self.tables_dir, output)
        read: dict[str, pa.Table] = {}

        def rows_of(f: _File, bucket: int) -> pa.Table:
            rows = read.get(f.path)
            if rows is None:
                rows = read[f.path] = _read_parquet(root.child(unquote(f.path)))
            if not f.spans:
                return rows
            column = bucket_column(rows.column_names)
            if column is None:  # statistics said several buckets: the rows must say which
                raise ServerError(
                    f"Compaction of {output} cannot split {f.path}: it holds buckets "
                    f"{f.first}..{f.last} by its name and no bucket column"
                )
            return rows.filter(pc.equal(rows.column(column), bucket))

        now_ms = int(time.time() * 1000)
        adds: list[AddAction | RemoveAction] = []
        removed: dict[str, tuple[_File, bool]] = {}
        taken: dict[str, int] = {}  # rows of each input file rewritten so far
        # a bucket's rows from files of several buckets stay in a shared file (a run of
        # buckets, as a batch writes them) until they fill a row group: a file of one bucket
        # with less would cost an object write per bucket per compaction for nothing a read
        # gains (it prunes by row group)
        runs = BucketRuns(alone_rows=self.policy.alone_rows)
        placed: dict[int, tuple[int, int]] = {}  # bucket -> (batch, mtime) of its inputs

        def add(rows: pa.Table, data_change: bool) -> None:
            span = bucket_range(rows)
            column = bucket_column(rows.column_names)
            held = pc.unique(rows.column(column)).to_pylist() if column is not None else []
            inputs = [placed[b] for b in held if b in placed] or list(placed.values())
            batch = max(b for b, _ in inputs)
            # the newest input's time: the new file takes its inputs' place in time order
            mtime = max(t for _, t in inputs)
            added = self._write(root, rows, batch, span or (0, 0), mtime)
            adds.append(
                AddAction(
                    added.path, added.size, {}, added.modification_time, data_change, added.stats
                )
            )

        changes = False
        for bucket in sorted(plan):
            inputs = sorted(plan[bucket], key=_time_order)  # rows kept in commit order
            shared = [f for f in inputs if f.spans]
            shared_parts = [rows_of(f, bucket) for f in shared]
            stays_shared = bool(shared) and (
                sum(p.num_rows for p in shared_parts) < self.policy.alone_rows
            )
            if stays_shared:
                own = [f for f in inputs if not f.spans]
                if len(own) >= 2:  # the bucket's own small files are still joined (alone)
                    own_rows = pa.concat_tables(
                        [rows_of(f, bucket) for f in own], promote_options="permissive"
                    )
                    for f in own:
                        taken[f.path] = taken.get(f.path, 0) + read[f.path].num_rows
                    joined = self.processor.compact_rows(output, own_rows)
                    for f in own:
                        removed[f.path] = (f, joined is not None)
                    placed[bucket] = (
                        max(batch_of_name(f.path) for f in own),
                        max(f.modification_time for f in own),
                    )
                    add(joined if joined is not None else own_rows, joined is not None)
                inputs, parts = shared, shared_parts
            else:
                parts = [rows_of(f, bucket) for f in inputs]
            for f, part in zip(inputs, parts, strict=True):
                taken[f.path] = taken.get(f.path, 0) + part.num_rows
            rows = pa.concat_tables(parts, promote_options="permissive")
            merged = self.processor.compact_rows(output, rows)
            data_change = merged is not None  # a merge changes rows; joining files does not
            changes = changes or data_change
            if merged is not None:
                rows = merged
            for f in inputs:
                was = removed.get(f.path)
                removed[f.path] = (f, data_change or (was is not None and was[1]))
            if not rows.num_rows:
                continue
            placed[bucket] = (
                max(batch_of_name(f.path) for f in inputs),
                max(f.modification_time for f in inputs),
            )
            if stays_shared:
                for done in runs.add(output, bucket, rows):
                    add(done, changes)
            else:
                add(rows, data_change)
        for _, rows in runs.drain():
            add(rows, changes)
        if not removed:
            return False
        for path, rows in read.items():  # a file is removed only with all of its rows
            if taken[path] != rows.num_rows:
                raise ServerError(
                    f"Compaction of {output} found {rows.num_rows} rows in {path} and "
                    f"rewrote {taken[path]}: its buckets are not what its statistics say"
                )
        actions: list[AddAction | RemoveAction] = [
            *adds,
            *(RemoveAction(f.path, change, now_ms, f.size, {}) for f, change in removed.values()),
        ]
        buckets = sorted(plan)
        span = f"{buckets[0]}" if len(buckets) == 1 else f"{buckets[0]}-{buckets[-1]}"
        table.create_write_transaction(
            actions,
            mode="append",
            schema=table.schema(),
            commit_properties=CommitProperties(
                custom_metadata={"cqlcdc.compaction": f"{output} bucket {span}"}
            ),
        )
        return True

    def _write(
        self,
        root: Location,
        rows: pa.Table,
        batch: int,
        buckets: tuple[int, int],
        modification_time: int,
    ) -> DataFile:
        name = data_file_name(batch, buckets)
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
