"""Maintenance of the output tables between micro-batches: compaction, vacuum, purge.

Runs in the driver, the only writer, after a batch's commit is published (its writes are
acknowledged already), so it never races a commit. Each step touches only what is due: the
buckets whose small files are many (compaction), the outputs when the vacuum interval has
passed, the rows past their CDC log TTL on the purge interval; then the manifest moves to
the new versions (the same data, new files). The outputs of a stopped table are left alone:
they may hold a failed batch's commit past the manifest (``cqlcdc recover`` undoes it).

>>> maintenance.after_batch()  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from deltalake import DeltaTable

from cqlcdc.datadir.commit import DataFile, Manifest
from cqlcdc.datadir.compaction import CompactionPolicy, Compactor, vacuum
from cqlcdc.datadir.records import BucketProcessor
from cqlcdc.location import Location
from cqlcdc.observe import events


class Maintenance:
    """Compaction, vacuum and the purge of expired rows, for one engine.

    Args:
        data_dir: the data directory (its manifest).
        tables_dir: root of the output tables.
        processor: the core (which outputs have an expiry column, how to compact them).
        policy: when to compact small files and vacuum (None: never).
        purge_interval_s: how often expired rows are deleted, at most.
        clock: seconds since the epoch (injectable for tests).
        tables: the driver's handles of the output tables, shared with the engine's
            commits (kept at their latest version).
        output_stopped: whether an output belongs to a stopped table (left alone).
        publish: tells the engine's readers of a new manifest.
    """

    def __init__(
        self,
        data_dir: Location,
        tables_dir: Location,
        processor: BucketProcessor,
        policy: CompactionPolicy | None,
        purge_interval_s: float,
        clock: Callable[[], float],
        tables: dict[str, DeltaTable],
        output_stopped: Callable[[str], bool],
        publish: Callable[[Manifest], None],
    ) -> None:
        self.data_dir = data_dir
        self.tables_dir = tables_dir
        self.processor = processor
        self.policy = policy
        self.compactor = Compactor(tables_dir, processor, policy) if policy is not None else None
        self.purge_interval_s = purge_interval_s
        self.clock = clock
        self._tables = tables
        self.output_stopped = output_stopped
        self._publish = publish
        self._last_purge = clock()
        self._last_vacuum: float | None = None  # None: vacuum on the first batch

    def note_commit(self, output: str, files: list[DataFile], table: DeltaTable) -> None:
        """A batch committed ``files`` to ``output``: counted toward its compaction."""
        if self.compactor is not None:
            self.compactor.note_commit(output, files, table)

    def after_batch(self) -> None:
        """What is due after a batch: compaction and vacuum, and the purge on its interval."""
        self.maintain()
        if self.clock() - self._last_purge >= self.purge_interval_s:
            self.purge_expired()

    def maintain(self, force_vacuum: bool = False) -> int:
        """Compact the buckets that are due, and vacuum when its interval has passed.

        Runs between batches in the driver, the only writer (like ``purge_expired``). Costs
        nothing when no bucket is due and touches only the buckets that are: each is one Delta
        commit (the new file added, its inputs removed; the same rows, or merged state), then
        the manifest moves to the new versions. Returns the compaction commits made.
        """
        compactor, policy = self.compactor, self.policy
        if compactor is None or policy is None:
            return 0
        commits = 0
        touched: list[str] = []
        for output, buckets in sorted(compactor.due().items()):
            if self.output_stopped(output):
                continue
            made = compactor.compact(output, self._table(output), buckets)
            if made:
                events.compacted(output, made)
                commits += made
                touched.append(output)
        now = self.clock()
        if (
            force_vacuum
            or self._last_vacuum is None
            or now - self._last_vacuum >= policy.vacuum_interval_s
        ):
            self._last_vacuum = now
            for output in sorted(Manifest.load(self.data_dir).versions):
                if self.output_stopped(output):
                    continue
                table = self._table(output)
                before = table.version()
                vacuum(table, policy.retention_hours)
                if table.version() != before:
                    touched.append(output)
        if touched:
            self._move_manifest(touched)
        return commits

    def _table(self, output: str) -> DeltaTable:
        """The driver's handle of `output`, at its latest version."""
        table = self._tables.get(output)
        if table is None:
            table = self._tables[output] = DeltaTable(str(self.tables_dir / output))
        table.update_incremental()
        return table

    def _move_manifest(self, outputs: list[str]) -> None:
        """Point the manifest at the latest versions of `outputs` (same data, new files)."""
        manifest = Manifest.load(self.data_dir)
        versions = dict(manifest.versions)
        for output in outputs:
            versions[output] = self._tables[output].version()
        if versions != manifest.versions:
            updated = dataclasses.replace(manifest, versions=versions)
            updated.save(self.data_dir)
            self._publish(updated)

    def purge_expired(self) -> int:
        """Delete expired rows (CDC log TTL) from the outputs that have an expiry column.

        Runs between batches in the driver, the only writer, so it never races a commit.
        SELECT already hides expired rows; this reclaims their space. Returns rows deleted.
        """
        self._last_purge = self.clock()
        expiry_column = self.processor.expiry_column
        now = int(self.clock())
        manifest = Manifest.load(self.data_dir)
        versions = dict(manifest.versions)
        deleted = 0
        for output in sorted(versions):
            column = expiry_column(output)
            if column is None or self.output_stopped(output):
                continue
            table = self._tables.get(output) or DeltaTable(str(self.tables_dir / output))
            table.update_incremental()
            metrics = table.delete(f"{column} > 0 AND {column} <= {now}")
            deleted += int(metrics.get("num_deleted_rows", 0) or 0)
            self._tables[output] = table
            if self.compactor is not None:  # the delete rewrote files: recount them
                self.compactor.forget(output)
            versions[output] = table.version()
        if versions != manifest.versions:
            updated = Manifest(manifest.batch_id, manifest.max_seq, versions, manifest.extra)
            updated.save(self.data_dir)
            self._publish(updated)
        return deleted
