"""Group commit of ingest appends: concurrent writers share one append of the ingest log.

Records are queued in seq order (``GroupCommit.append``, with the coordinator's lock held);
the first writer to ask for durability (``make_durable``) appends everything queued as one
file while the others wait for it, so the micro-batch reads one file instead of one per
write. In an object store, where a PUT costs per request, that writer first lingers for
the group to fill (``_linger``). An append that fails fails only the writes it held.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from cqlcdc.datadir.ingest import FailedAppends
from cqlcdc.datadir.records import IngestRecord
from cqlcdc.errors import ServerError
from cqlcdc.observe import events
from cqlcdc.observe.cdc_operations import Operation

log = logging.getLogger(__name__)

# backpressure: a writer acknowledged at durability waits while the pipeline is this far
# behind (in writes, or in ingest files, each of which a micro-batch reads), so a backlog,
# and the wait of the reads behind it, stays bounded
MAX_UNAPPLIED_WRITES = 1_000_000
MAX_UNAPPLIED_FILES = 400
# the longest an append to an object store waits for more writes while they keep coming,
# and the gap without a new write that ends the wait: fewer, fuller PUTs under load, a
# lone writer barely delayed (docs/performance.md)
OBJECT_STORE_LINGER_S = 0.15
GROUP_QUIET_S = 0.003


class IngestAppends(Protocol):
    """What group commit needs of the ingest log (``cqlcdc.datadir.ingest.IngestLog``)."""

    def last_seq(self) -> int:
        """The last seq durable in the log (0 if none)."""
        ...

    def append(self, records: Sequence[IngestRecord]) -> None:
        """Make ``records`` durable as one file; raises if it could not."""
        ...


class GroupCommit:
    """The queue of records on their way into the ingest log, and the appends that empty it.

    Args:
        ingest: the ingest log.
        lock: the coordinator's lock: it orders seqs, and a linger waits on it.
        linger_s: the longest an append waits for its group to fill (0: never waits).
        clock: seconds, monotonic (the lingers' deadlines and quiet gaps).
    """

    def __init__(
        self,
        ingest: IngestAppends,
        lock: threading.Lock,
        linger_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ingest = ingest
        self.lock = lock
        self.group_linger_s = linger_s
        self._clock = clock
        self.next_seq = ingest.last_seq() + 1
        # records wait here (in seq order) until one writer appends them all
        self._queue: list[IngestRecord] = []
        self._durable = threading.Condition()
        self._durable_seq = ingest.last_seq()
        self._file_ends: deque[int] = deque()  # last seq of each ingest file appended
        self._appending = False
        # how many writes the next append should wait for (those of the last append, whose
        # writers come back, and those queued meanwhile), and at most how long
        self._group_target = 0
        self._queued_writes = 0  # writes (seqs) queued since the last append took the queue
        # a lingering appender waits on the lock for its group to fill (or close): ``append``
        # wakes it when the queue reaches the target, and tells it when a write last came
        self._grown = threading.Condition(lock)
        self._lingering = False
        self._last_queued_at = 0.0
        self._closing = False
        self._failed_appends = FailedAppends()
        # writes of CDC tables held for ScyllaDB's CDC counters until their append settles:
        # (last seq of their records, operation, how many), in seq order (only with metrics)
        self.cdc_operations: deque[tuple[int, Operation, int]] = deque()
        # writes durable before this coordinator began (a crash between an append and its
        # commit) are applied once the engine runs: the first read waits for them too
        self._pending_seq = ingest.last_seq()

    def append(self, records: Sequence[IngestRecord]) -> None:
        """Queue records for the ingest log (call with ``lock`` held; seqs from ``next_seq``
        on, increasing). They are durable once ``make_durable`` returns for their last seq.
        A bulk chunk record stands for several writes and carries its last write's seq, so
        the next seq follows the last record."""
        if not records:
            return
        if records[0].seq < self.next_seq:
            raise ServerError(f"ingest seq {records[0].seq} reused (next is {self.next_seq})")
        self._queue.extend(records)
        # writes, not records nor calls: a bulk chunk stands for many writes, and the
        # linger waits for as many writers as the last append held (``_linger``)
        queued = self._queued_writes
        self._queued_writes = queued + records[-1].seq + 1 - self.next_seq
        self.next_seq = records[-1].seq + 1
        self._pending_seq = records[-1].seq
        if self._lingering:
            self._last_queued_at = self._clock()
            if queued < self._group_target <= self._queued_writes:
                self._grown.notify()  # full: from now on the lingerer waits for quiet only

    def make_durable(self, seq: int) -> None:
        """Return once every record up to ``seq`` is durable in the ingest log (call without
        ``lock`` held).

        The first caller to find records queued appends all of them as one file while
        later callers wait for it. An append that fails (a full disk) fails the writes it
        held, and only them: they were never acknowledged, so their seqs stay a gap in the
        log (the pipeline goes by seq order and needs no seq to be there), and the next
        append, once one succeeds, takes the writes after them.

        Raises:
            ServerError: the append holding ``seq`` failed.
        """
        while True:
            with self._durable:
                while True:
                    failure = self._failed_appends.failure_of(seq)
                    if failure is not None:
                        raise ServerError(f"Ingest append failed: {failure}") from failure
                    if self._durable_seq >= seq:
                        return
                    if not self._appending:
                        break
                    self._durable.wait()
                self._appending = True
            error: BaseException | None = None
            with self.lock:
                self._linger()
                batch, self._queue = self._queue, []
                writes, self._queued_writes = self._queued_writes, 0
            if not batch or batch[-1].seq < seq:
                with self.lock:
                    self._queue[:0] = batch  # put back: seq was never handed out
                    self._queued_writes += writes
                with self._durable:
                    self._appending = False
                    self._durable.notify_all()
                raise ServerError(f"ingest seq {seq} was never queued")
            try:
                self.ingest.append(batch)
            except BaseException as e:
                error = e
            with self._durable:
                self._appending = False
                if error is not None:
                    self._failed_appends.add(batch[0].seq, batch[-1].seq, error)
                else:
                    self._durable_seq = batch[-1].seq
                    self._file_ends.append(batch[-1].seq)
                    with self.lock:
                        self._group_target = writes + self._queued_writes
                    events.group_committed(len(batch))
                self._durable.notify_all()
            self._settle_cdc_operations(batch[-1].seq, failed=error is not None)
            if error is not None:
                log.error(
                    "ingest append of writes %d..%d failed (they are refused): %s",
                    batch[0].seq,
                    batch[-1].seq,
                    error,
                )
                raise ServerError(f"Ingest append failed: {error}") from error

    def _settle_cdc_operations(self, upto_seq: int, failed: bool) -> None:
        """Count the held CDC operations whose records an append up to ``upto_seq`` took."""
        if not self.cdc_operations:
            return
        settled = []
        with self.lock:
            while self.cdc_operations and self.cdc_operations[0][0] <= upto_seq:
                settled.append(self.cdc_operations.popleft())
        for _, op, times in settled:
            events.cdc_operation(op, times, failed)

    def _linger(self) -> None:
        """Before an append to an object store, let the queue fill (call with ``lock``
        held): wait until as many writes are queued as there were writers at the last
        append (its own writers, acknowledged and coming back, and those that queued behind
        it) and no new write has come for ``GROUP_QUIET_S``, or at most ``group_linger_s``,
        or until ``close``. A PUT costs per request, so under load an append carries what
        arrived in up to that window (as WarpStream batches produce requests into timed
        object writes); a lone writer waits only the quiet gap. Without it concurrent
        writers split into cohorts that alternate, each append part full. A local disk's
        append is cheap and never waits.

        The wait is on the lock's condition, which ``append`` signals when the group
        fills: no polling, so the lingerer costs nothing while it waits and wakes once."""
        if self.group_linger_s <= 0:
            return
        now = self._clock()
        deadline = now + self.group_linger_s
        self._last_queued_at = now
        self._lingering = True
        try:
            while not self._closing and now < deadline:
                if self._queued_writes >= self._group_target:
                    quiet_at = self._last_queued_at + GROUP_QUIET_S
                    if now >= quiet_at:
                        return
                    self._grown.wait(min(quiet_at, deadline) - now)
                else:
                    self._grown.wait(deadline - now)
                now = self._clock()
        finally:
            self._lingering = False

    def close(self) -> None:
        """Linger no more: an append waiting for its group goes ahead now (closing)."""
        with self.lock:
            self._closing = True
            self._grown.notify_all()

    def flush_target(self) -> int:
        """The last queued seq a flush waits for: the highest whose append did not fail."""
        with self._durable:
            return self._failed_appends.last_before(self._pending_seq)

    def failed(self, seq: int) -> bool:
        """Whether the append holding ``seq`` failed (its write was refused)."""
        with self._durable:
            return self._failed_appends.failure_of(seq) is not None

    def backlog_target(self, seq: int, committed_seq: int) -> int:
        """The seq a writer of ``seq``, durable, waits to be applied before its
        acknowledgement (0: none), when the pipeline (applied up to ``committed_seq``) is
        more than ``MAX_UNAPPLIED_WRITES`` writes or ``MAX_UNAPPLIED_FILES`` ingest files
        behind: then it waits until half of that backlog is applied."""
        with self._durable:
            while self._file_ends and self._file_ends[0] <= committed_seq:
                self._file_ends.popleft()
            behind = len(self._file_ends)
            target = 0
            if behind > MAX_UNAPPLIED_FILES:
                target = self._file_ends[behind - MAX_UNAPPLIED_FILES // 2]
        if seq - committed_seq > MAX_UNAPPLIED_WRITES:
            target = max(target, seq - MAX_UNAPPLIED_WRITES // 2)
        return target


__all__ = [
    "GROUP_QUIET_S",
    "MAX_UNAPPLIED_FILES",
    "MAX_UNAPPLIED_WRITES",
    "OBJECT_STORE_LINGER_S",
    "GroupCommit",
    "IngestAppends",
]
