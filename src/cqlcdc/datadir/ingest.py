"""The durable, ordered ingest log: one Parquet file per append, named by its seq range.

The log lives in the data directory's ``ingest/``, on a local disk or in an object store
(:class:`cqlcdc.location.Location`): locally an append is a temp file, fsynced and renamed; in
an object store it is one PUT of the whole file under its final name (atomic by the store).

>>> log = IngestLog("/tmp/data/ingest")  # doctest: +SKIP
>>> log.append([IngestRecord(1, "ks.t", 1, 0, 42, b"k", b"m")])  # doctest: +SKIP
>>> log.last_seq()  # doctest: +SKIP
1
"""

from __future__ import annotations

import itertools
import os
import re
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cqlcdc.datadir.durable import synced_file
from cqlcdc.datadir.records import INGEST_SCHEMA, IngestRecord, records_to_arrow
from cqlcdc.errors import CorruptIngestFile, InvalidRequest
from cqlcdc.location import Location, delete_objects, fsync_dir

# Spark's file source ignores names starting with "." or "_": temp files hide behind the dot.
_TMP_PREFIX = ".tmp-"
# remembers the last seq trimmed away, so last_seq() survives trimming every file
_TRIM_MARK = "_trimmed_upto_seq"
_NAME = re.compile(r"^(\d{20})-(\d{20})\.parquet$")


@dataclass(frozen=True, slots=True)
class IngestFile:
    """One ingest file: where it is and the first and last seq its name promises."""

    path: Location
    first_seq: int
    last_seq: int


def ingest_file_name(first_seq: int, last_seq: int) -> str:
    """The file name for records ``first_seq..last_seq``; names sort in seq order."""
    return f"{first_seq:020d}-{last_seq:020d}.parquet"


def parse_ingest_file_name(name: str) -> tuple[int, int] | None:
    """The (first_seq, last_seq) an ingest file name promises, or None if it is not one."""
    match = _NAME.match(name)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def _parse_last(path: Location) -> int:
    seqs = parse_ingest_file_name(path.name)
    return seqs[1] if seqs is not None else 0


def read_ingest_file(
    path: Location | str | Path, share: Callable[[int], bool] | None = None
) -> pa.Table:
    """Read and verify one ingest file, or the share of it a task applies.

    Checks the Parquet footer, every page checksum of what is read, the schema, that the
    seqs are strictly increasing and that the file's seq range (from its row groups'
    statistics when only a share is read) matches the range in the file name.

    Args:
        path: the file.
        share: which buckets to read (None: all). A file written by buckets (see
            :meth:`IngestLog.append`) is read only in the row groups of those buckets; the
            records of other buckets are left out in any case.

    Raises:
        CorruptIngestFile: naming the file, if any check fails.
    """
    path = Location.of(path)
    expected = parse_ingest_file_name(path.name)
    try:
        source = str(path.path) if path.is_local else path.open_input()
        if share is None:
            table = pq.read_table(source, page_checksum_verification=True)
            first_last = _seq_range(table)
        else:
            table, first_last = _read_share(source, share)
    except (OSError, pa.ArrowException) as err:
        raise CorruptIngestFile(f"Corrupt ingest file {path}: {err}") from err
    if not table.schema.equals(INGEST_SCHEMA, check_metadata=False):
        raise CorruptIngestFile(f"Corrupt ingest file {path}: unexpected schema {table.schema}")
    if first_last is None:
        raise CorruptIngestFile(f"Corrupt ingest file {path}: no records")
    seqs: list[int] = table.column("seq").to_pylist()
    if any(a >= b for a, b in itertools.pairwise(seqs)):
        raise CorruptIngestFile(f"Corrupt ingest file {path}: seqs are not strictly increasing")
    if expected is not None and first_last != expected:
        raise CorruptIngestFile(
            f"Corrupt ingest file {path}: holds seqs {first_last[0]}..{first_last[1]}, "
            f"its name promises {expected[0]}..{expected[1]}"
        )
    return table


def _seq_range(table: pa.Table) -> tuple[int, int] | None:
    if table.num_rows == 0:
        return None
    seqs = table.column("seq")
    return int(seqs[0].as_py()), int(seqs[-1].as_py())


def _read_share(
    path: str | pa.NativeFile, share: Callable[[int], bool]
) -> tuple[pa.Table, tuple[int, int] | None]:
    """The records of the buckets in ``share``, reading only the row groups that can hold
    them (a row group of one bucket has equal bucket statistics), and the file's seq range
    from the row groups' statistics."""
    with pq.ParquetFile(path, page_checksum_verification=True) as file:
        meta = file.metadata
        bucket_at = meta.schema.to_arrow_schema().get_field_index("bucket")
        seq_at = meta.schema.to_arrow_schema().get_field_index("seq")
        groups: list[int] = []
        lows: list[int] = []
        highs: list[int] = []
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if group.num_rows == 0:
                continue
            seq_stats = group.column(seq_at).statistics
            buckets = group.column(bucket_at).statistics
            if seq_stats is None or not seq_stats.has_min_max:
                raise pa.ArrowInvalid("no seq statistics")
            lows.append(int(seq_stats.min))
            highs.append(int(seq_stats.max))
            single = buckets is not None and buckets.has_min_max and buckets.min == buckets.max
            if not single or share(int(buckets.min)):
                groups.append(g)
        table = file.read_row_groups(groups) if groups else INGEST_SCHEMA.empty_table()
    mine = pa.array([share(b) for b in table.column("bucket").to_pylist()], pa.bool_())
    return table.filter(mine), (min(lows), max(highs)) if lows else None


def _by_bucket(table: pa.Table) -> list[pa.Table]:
    """The records of an append as row groups: one per bucket when they come bucket by
    bucket (bulk appends do: their seqs are given bucket by bucket), so an executor task
    reads only its buckets' row groups; else one."""
    buckets = table.column("bucket").to_numpy()
    if len(buckets) < 2 or (np.diff(buckets) < 0).any():
        return [table]
    starts = [0, *(np.flatnonzero(np.diff(buckets)) + 1).tolist(), len(buckets)]
    return [table.slice(a, b - a) for a, b in itertools.pairwise(starts)]


class Handoff:
    """The records of a process's latest appends, by file path, held for its engine to take
    instead of reading back the file it was just handed: that read is a copy of every
    payload and a checksum pass on the engine's critical path. Given to the session's
    ``IngestLog`` and to the engine of the same data directory; each entry is taken once.
    Bounded: the oldest are dropped past ``limit_bytes`` (a load far ahead of the engine),
    and the engine reads those from disk like any file another process wrote."""

    def __init__(self, limit_bytes: int = 256 * 1024 * 1024) -> None:
        self.limit_bytes = limit_bytes
        self._tables: dict[str, pa.Table] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, path: Location | str | Path, table: pa.Table) -> None:
        with self._lock:
            self._tables[Location.of(path).uri] = table
            self._bytes += table.nbytes
            while self._bytes > self.limit_bytes and self._tables:
                oldest = next(iter(self._tables))
                self._bytes -= self._tables.pop(oldest).nbytes

    def take(self, path: Location | str | Path) -> pa.Table | None:
        """The records appended as ``path``, if still held (and no longer after)."""
        with self._lock:
            table = self._tables.pop(Location.of(path).uri, None)
            if table is not None:
                self._bytes -= table.nbytes
            return table

    def read(self, path: Location | str | Path) -> pa.Table:
        """The records of ingest file ``path``: as appended if held, else read and verified
        from the file (:func:`read_ingest_file`)."""
        held = self.take(path)
        return held if held is not None else read_ingest_file(path)


# Ingest files have nothing compressed or dictionary-encoded: they live only until their batch
# commits; zstd halved a bulk chunk's bytes but doubled an append's time, and the small
# columns hold one value per row group in a bulk append (a chunk per bucket), where zstd and
# a dictionary per column chunk were half of the append's encoding time and saved nothing.
# Statistics for the small columns only (reads use the seq and bucket ones): every payload is
# distinct and no read filters by it; its statistics cost ~30% of an append.
_SMALL_COLUMNS = [name for name in INGEST_SCHEMA.names if name != "payload"]


class FailedAppends:
    """The seq ranges of appends that failed, with why (the newest ``limit``), so that the
    writers of those records get the error and readers do not wait for them. Ranges that
    follow each other without a successful append between merge into one.

    >>> failed = FailedAppends()
    >>> failed.add(5, 7, OSError(28, "No space left on device"))
    >>> failed.failure_of(6).strerror, failed.failure_of(8), failed.last_before(7)
    ('No space left on device', None, 4)
    """

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._ranges: deque[tuple[int, int, BaseException]] = deque()

    def add(self, first_seq: int, last_seq: int, error: BaseException) -> None:
        if self._ranges and self._ranges[-1][1] + 1 == first_seq:
            first_seq = self._ranges.pop()[0]
        self._ranges.append((first_seq, last_seq, error))
        while len(self._ranges) > self.limit:
            self._ranges.popleft()

    def failure_of(self, seq: int) -> BaseException | None:
        """Why the append of ``seq`` failed, or None."""
        for first, last, error in reversed(self._ranges):
            if first <= seq <= last:
                return error
            if last < seq:
                return None
        return None

    def last_before(self, seq: int) -> int:
        """The highest seq at or below ``seq`` whose append did not fail (0 if none)."""
        for first, last, _ in reversed(self._ranges):
            if first <= seq <= last:
                seq = first - 1
            elif last < seq:
                break
        return max(seq, 0)


def list_ingest_files(directory: Location) -> list[IngestFile]:
    """The ingest files under ``directory``, in seq order (temp files excluded). One LIST
    request in an object store."""
    found: list[IngestFile] = []
    if directory.is_local:
        try:
            entries = list(os.scandir(directory.path))
        except FileNotFoundError:
            return []
        for entry in entries:
            seqs = parse_ingest_file_name(entry.name)
            if seqs is not None and entry.is_file():
                found.append(IngestFile(directory / entry.name, seqs[0], seqs[1]))
    else:
        for name in directory.list_names():
            seqs = parse_ingest_file_name(name)
            if seqs is not None:
                found.append(IngestFile(directory / name, seqs[0], seqs[1]))
    found.sort(key=lambda f: f.first_seq)
    return found


class IngestLog:
    """An append-only log of ingest records under a directory of the data directory.

    Each :meth:`append` writes one Parquet file (page checksums on) named
    ``<first_seq>-<last_seq>.parquet``, durable and visible whole or not at all when it
    returns: on a local disk through a hidden temp file, fsynced, renamed, and the directory
    fsynced; in an object store as one PUT under the final name. Appends are serialized, so
    files appear in seq order.

    Args:
        directory: the ingest directory (created if missing).
        handoff: where appends are also held for the engine of this process (its
            ``IngestFiles.handoff``, in cqlcdc.pipeline.ingest_files), if any.
        on_append: called with the new file after every append (and once with the files
            found at start): how the engine learns of new records without listing the
            directory.
    """

    def __init__(
        self,
        directory: Location | str | Path,
        handoff: Handoff | None = None,
        on_append: Callable[[list[IngestFile]], None] | None = None,
    ) -> None:
        self.directory = Location.of(directory)
        self.handoff = handoff
        self.on_append = on_append
        self.directory.makedirs()
        self._lock = threading.Lock()
        if self.directory.is_local:
            for stale in self.directory.path.glob(f"{_TMP_PREFIX}*"):
                # a temp file was never renamed, so its append never returned: not durable
                stale.unlink()
        files = self.files()
        self._last_seq = self._recover_last_seq(files)
        if on_append is not None:
            on_append(files)

    def _trimmed_upto(self) -> int:
        text = (self.directory / _TRIM_MARK).read_text()
        return int(text) if text else 0

    def _recover_last_seq(self, files: list[IngestFile]) -> int:
        if not files:
            return self._trimmed_upto()
        # the newest file is the one a crash could have hit: read it whole
        read_ingest_file(files[-1].path)
        return files[-1].last_seq

    def files(self) -> list[IngestFile]:
        """The ingest files present, in seq order (temp files excluded)."""
        return list_ingest_files(self.directory)

    def last_seq(self) -> int:
        """The highest seq appended so far (0 for an empty log)."""
        with self._lock:
            return self._last_seq

    def append(self, records: Sequence[IngestRecord]) -> None:
        """Append records durably, as one file.

        Args:
            records: records with strictly increasing seqs, all above :meth:`last_seq`.

        Raises:
            InvalidRequest: if the seqs are not strictly increasing past :meth:`last_seq`.
        """
        if not records:
            return
        with self._lock:
            previous = self._last_seq
            for record in records:
                if record.seq <= previous:
                    raise InvalidRequest(f"Ingest seq {record.seq} does not follow seq {previous}")
                previous = record.seq
            table = records_to_arrow(list(records))
            final = self.directory / ingest_file_name(records[0].seq, records[-1].seq)
            if self.directory.is_local:
                self._write_local(final, table)
            else:
                sink = pa.BufferOutputStream()
                _write_records(sink, table)
                final.write_atomically(sink.getvalue().to_pybytes())
            if self.handoff is not None:
                self.handoff.put(final, table)
            self._last_seq = records[-1].seq
        if self.on_append is not None:
            self.on_append([IngestFile(final, records[0].seq, records[-1].seq)])

    def _write_local(self, final: Location, table: pa.Table) -> None:
        tmp = self.directory.path / f"{_TMP_PREFIX}{uuid.uuid4().hex}.parquet"
        try:
            with synced_file(tmp) as sink:
                _write_records(sink, table)
        except BaseException:
            # a full disk: what was written of the file is given back, so that the next
            # append finds the space the failed one took
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, final.path)
        fsync_dir(self.directory.path)

    def verify(self) -> None:
        """Read every ingest file whole.

        Raises:
            CorruptIngestFile: naming the first damaged file.
        """
        for file in self.files():
            read_ingest_file(file.path)

    def trim(
        self,
        upto_seq: int,
        archive_dir: str | Path | None = None,
        files: list[IngestFile] | None = None,
    ) -> list[Location]:
        """Delete (or move to the local `archive_dir`) files whose records all have seq <=
        `upto_seq`.

        Call it only with a seq whose batch is committed (e.g. ``Snapshot.max_seq``).

        Args:
            upto_seq: the highest committed seq.
            archive_dir: a local directory to move the files to instead.
            files: the log's files, when the caller knows them (the engine's index of its
                own appends): no LIST request then.

        Returns:
            The files removed from the ingest directory.
        """
        removed: list[Location] = []
        archive = Path(archive_dir) if archive_dir is not None else None
        if archive is not None:
            archive.mkdir(parents=True, exist_ok=True)
        with self._lock:
            present = sorted(self.files() if files is None else files, key=lambda f: f.first_seq)
            for file in present:
                if file.last_seq > upto_seq:
                    break
                if archive is not None and file.path.is_local:
                    os.replace(file.path.path, archive / file.path.name)
                elif archive is not None:
                    archive.joinpath(file.path.name).write_bytes(file.path.read_bytes())
                    file.path.delete()
                if self.handoff is not None:  # read by executor tasks, or never: not needed
                    self.handoff.take(file.path)
                removed.append(file.path)
            if archive is None:
                delete_objects(removed)  # one request per 1,000 in an object store
            if removed and len(removed) == len(present):
                # no file left to say where the log ends: the mark says it (written only
                # then, so a busy log pays no write for it)
                trimmed = max(self._trimmed_upto(), _parse_last(removed[-1]))
                (self.directory / _TRIM_MARK).write_atomically(str(trimmed))
                if archive is not None:
                    fsync_dir(archive)
        return removed


def _write_records(sink: pa.NativeFile, table: pa.Table) -> None:
    """One append's Parquet file: uncompressed, page checksums, a row group per bucket run."""
    with pq.ParquetWriter(
        sink,
        table.schema,
        compression="none",
        use_dictionary=False,
        write_statistics=_SMALL_COLUMNS,
        write_page_checksum=True,
    ) as writer:
        for piece in _by_bucket(table):
            writer.write_table(piece, row_group_size=max(piece.num_rows, 1))
