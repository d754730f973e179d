"""The ingest files an engine's batches read: an index the appends keep, and the trim.

A batch finds the files holding its seqs here, without listing the log (a request per batch
in an object store): every append of this process reports its file as it returns
(``note_appended``), and the records it appended are held in memory for the batch that
takes them (``Handoff``). Files whose records are all committed are deleted (``trim``).

>>> files = IngestFiles(data_dir / "ingest", pacer.show)  # doctest: +SKIP
>>> log = files.open_log(); log.append(records); files.covering(1, 10)  # doctest: +SKIP
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow as pa

from cqlcdc.datadir.ingest import (
    Handoff,
    IngestFile,
    IngestLog,
    list_ingest_files,
    read_ingest_file,
)
from cqlcdc.datadir.records import INGEST_SCHEMA
from cqlcdc.errors import ServerError
from cqlcdc.location import Location
from cqlcdc.pipeline.bucket_tasks import in_range

# In an object store the ingest files a batch committed are deleted once this many are
# done with (one DeleteObjects request for them all), not after every batch: a request
# per batch would cost as much as the batch's manifest. A local disk trims every batch.
OBJECT_STORE_TRIM_FILES = 64


class IngestFiles:
    """The ingest log of one engine as its batches see it.

    Args:
        ingest_dir: the data directory's ``ingest/``.
        show_end: told the log's last seq after each append (the source's tip).
    """

    def __init__(self, ingest_dir: Location, show_end: Callable[[int], None]) -> None:
        self.ingest_dir = ingest_dir
        self._show_end = show_end
        # the ingest files not yet trimmed, by URI, as appends report them
        self._files: dict[str, IngestFile] = {}
        self._lock = threading.Lock()
        # what a session of this process appends, held for the batch that takes it (the
        # session's IngestLog is built with it and ``note_appended``: see Coordinator)
        self.handoff = Handoff()
        self._log = IngestLog(ingest_dir, self.handoff, self.note_appended)

    def open_log(self) -> IngestLog:
        """An IngestLog that appends for this engine: the way in for writes of this process
        (the one that owns the data directory). Its appends reach the engine as they return
        (``note_appended``) and are held for it (``handoff``), so no batch lists the log."""
        return IngestLog(self.ingest_dir, self.handoff, self.note_appended)

    def note_appended(self, files: list[IngestFile]) -> None:
        """An IngestLog's report of new (or, at its start, existing) ingest files: indexed
        for the batches, and the log's end shown to the source (``show_end``)."""
        if not files:
            return
        with self._lock:
            for file in files:
                self._files[file.path.uri] = file
            last = max(f.last_seq for f in self._files.values())
        self._show_end(last)

    def reindex(self) -> None:
        """Build the index again from the log as it is (a query starts)."""
        with self._lock:
            self._files = {}
        self.note_appended(self._log.files())

    def covering(self, first: int, last: int) -> list[Location]:
        """The ingest files holding seqs ``first..last``, from the index the appends keep."""
        with self._lock:
            files = sorted(self._files.values(), key=lambda f: f.first_seq)
        return [f.path for f in files if f.last_seq >= first and f.first_seq <= last]

    def read(self, paths: list[Location], first: int, last: int) -> pa.Table:
        """The records ``first..last`` of ingest files: as appended, where this process's
        session appended them through ``handoff`` and they are still held, else read and
        verified whole (CorruptIngestFile names the file)."""
        if not paths:
            return INGEST_SCHEMA.empty_table()
        return in_range(pa.concat_tables([self.handoff.read(path) for path in paths]), first, last)

    def trim(self, upto_seq: int) -> None:
        """Delete the ingest files whose records are all committed by an earlier batch (at
        or below ``upto_seq``, the previous manifest's: a frame handed to ``process_batch``
        may still read the last batch's files). Keeps the log small however long the
        engine runs; in an object store, once ``OBJECT_STORE_TRIM_FILES`` are done with."""
        if upto_seq > 0:
            with self._lock:
                known = list(self._files.values())
            done = sum(1 for f in known if f.last_seq <= upto_seq)
            if done == 0 or (not self.ingest_dir.is_local and done < OBJECT_STORE_TRIM_FILES):
                return
            removed = self._log.trim(upto_seq, files=known)
            with self._lock:
                for path in removed:
                    self._files.pop(path.uri, None)

    def read_failure(self, committed_seq: int, batch_id: int, err: Exception) -> ServerError:
        """The error of a batch whose read failed: CorruptIngestFile when an uncommitted
        ingest file is damaged (raised from here: Spark's message may not name the file),
        else `err` as the batch's failure."""
        for file in list_ingest_files(self.ingest_dir):
            if file.last_seq > committed_seq:
                read_ingest_file(file.path)
        return ServerError(f"Micro-batch {batch_id} failed: {err}")
