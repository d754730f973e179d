"""Concurrent single-row writes from every connection, combined into bulk chunks.

A driver with many requests in flight sends one EXECUTE per row. Each becomes one ingest
record (an encoded mutation, ``storage.codec``) on the row path; together, executions of
the same prepared writes of one table become one Arrow chunk per token bucket
(``writes.bulk_records``, what ``Session.execute_many`` does for a bulk load), which costs
a fraction per write to append and to apply. The combiner gathers the writes that arrive,
queues each table's group as bulk chunks for the ingest log and goes on gathering, while
a second thread waits for the groups to be durable, in order, and acknowledges them. So a
group is queued while the previous append is still in flight, and the coordinator's group
commit (``Coordinator.make_durable``) puts every group queued meanwhile into its next
append: on an object store, where each append is a PUT that costs per request and tens of
milliseconds, one PUT carries the writes of all the connections waiting, not one group's.
A group of any size is one bulk chunk (``storage.bulk``: one chunk a group, whatever
buckets it touches), so even a lone write is applied column-wise by the pipeline, with no
read of the prior state when its table's log needs none. A group the bulk path refuses (a
write that needs the row path's checks or state) takes the row path, still in one append,
each write with its own result.

>>> combiner = WriteCombiner(coordinator)  # doctest: +SKIP
>>> combiner.submit(prepared, [1, "v"], None).result()  # True: acknowledged  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cqlcdc.cql import ast
from cqlcdc.datadir.records import IngestRecord
from cqlcdc.errors import CqlError
from cqlcdc.session import PreparedStatement, Session
from cqlcdc.write_outcomes import pipeline_errors
from cqlcdc.writes import bulk_records, row_records

if TYPE_CHECKING:
    from cqlcdc.coordinator import Coordinator

log = logging.getLogger(__name__)

# while a group is on its way to the ingest log, the next one waits up to GATHER_S for this
# many writes
GATHER_UNTIL = 16
MAX_GROUP = 4096
GATHER_S = 0.002


@dataclass(slots=True)
class _Write:
    prepared: PreparedStatement
    values: Sequence[Any]
    timestamp_us: int | None
    done: Future[bool] = field(default_factory=Future)


class WriteCombiner:
    """Gathers prepared single-row writes and appends them as bulk chunks.

    ``submit`` returns a future that is True once the write is acknowledged (durable, with
    the coordinator's backpressure), False when the combiner is closed and the caller must
    run it itself, or fails with the write's CqlError.
    """

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        self._pending: list[_Write] = []
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None
        # groups queued for the ingest log, waiting to be durable: (writes, last seq)
        self._queued: deque[tuple[list[_Write], int]] = deque()
        self._acks = threading.Condition()
        self._gathering = True
        self._ack_thread: threading.Thread | None = None
        self._acknowledging = False  # the acknowledging thread waits for an append
        self._session = Session(coordinator)
        self.combined = 0  # writes acknowledged as bulk chunks
        self.rows = 0  # writes the row path took, a group in one append

    def submit(
        self, prepared: PreparedStatement, values: Sequence[Any], timestamp_us: int | None
    ) -> Future[bool]:
        write = _Write(prepared, values, timestamp_us)
        with self._cond:
            if self._closed:
                write.done.set_result(False)
                return write.done
            self._pending.append(write)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="cql-write-combiner", daemon=True
                )
                self._ack_thread = threading.Thread(
                    target=self._acknowledge, name="cql-write-acks", daemon=True
                )
                self._thread.start()
                self._ack_thread.start()
            self._cond.notify()
        return write.done

    def close(self) -> None:
        """Finish the groups already gathered; later writes take the ordinary way."""
        with self._cond:
            self._closed = True
            self._cond.notify()
        if self._thread is not None:
            self._thread.join()
        with self._acks:
            self._gathering = False
            self._acks.notify()
        if self._ack_thread is not None:
            self._ack_thread.join()

    def _run(self) -> None:
        try:
            self._gather()
        finally:
            with self._acks:
                self._gathering = False
                self._acks.notify()

    def _gather(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if not self._pending:
                    return
                # while a group is on its way to the ingest log, a short wait gathers the
                # writes in flight: many clients' writes arrive within it. With none on
                # its way, a write goes at once: a lone client does not wait for company
                # that is not coming, and a burst's first writes make the append the
                # next ones gather behind.
                deadline = time.monotonic() + GATHER_S
                while len(self._pending) < GATHER_UNTIL and not self._closed and self._busy():
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                group, self._pending = self._pending[:MAX_GROUP], self._pending[MAX_GROUP:]
            for writes in _by_table(group).values():
                self._append(writes)

    def _busy(self) -> bool:
        """Whether a group is queued or being acknowledged (an append on its way)."""
        return bool(self._queued) or self._acknowledging

    def _append(self, writes: list[_Write]) -> None:
        try:
            if self._bulk(writes):
                return
            self._rows(writes)
        except Exception as e:  # a CqlError, or a defect: every caller hears, none hangs
            for w in writes:
                if not w.done.done():
                    w.done.set_exception(e)
            if not isinstance(e, CqlError):  # the next groups still go: logged, not raised
                log.exception("combined writes failed")

    def _bulk(self, writes: list[_Write]) -> bool:
        """Queue the writes as bulk chunks for the ingest log and hand them to the
        acknowledging thread; False when the bulk path does not take them (nothing
        queued)."""
        c = self.coordinator
        with c.lock:
            records = bulk_records(
                c,
                [w.prepared for w in writes],
                [w.values for w in writes],
                writes[0].prepared.keyspace,
                [w.timestamp_us for w in writes],
            )
            c.append(records or [])
        if records is None:
            return False
        with self._acks:
            self._queued.append((writes, records[-1].seq))
            self._acks.notify()
        return True

    def _acknowledge(self) -> None:
        """Acknowledge the queued groups in order, each once durable (``acknowledge``: the
        first wait appends every group queued by then, in one append)."""
        while True:
            with self._acks:
                while not self._queued and self._gathering:
                    self._acks.wait()
                if not self._queued:
                    return
                writes, last_seq = self._queued.popleft()
                self._acknowledging = True
            try:
                self.coordinator.acknowledge(last_seq)
            except Exception as e:  # the append failed: these writes are refused
                for w in writes:
                    w.done.set_exception(e)
                if not isinstance(e, CqlError):
                    log.exception("acknowledging combined writes failed")
                continue
            finally:
                self._acknowledging = False
            self.combined += len(writes)
            for w in writes:
                w.done.set_result(True)

    def _rows(self, writes: list[_Write]) -> None:
        """The row path for every write, in one append: each gets its own result. Queued
        for the acknowledging thread like a bulk group, unless a write's outcome depends on
        the state (a list index): then the group waits here to learn each one's error."""
        from cqlcdc.server.statements import with_default_timestamp

        c, session = self.coordinator, self._session
        batch: list[IngestRecord] = []
        queued: list[_Write] = []
        slot_of_seq: dict[int, _Write] = {}
        needs_state = False
        with c.lock:
            for w in writes:
                stmt = w.prepared.statement
                assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete)  # combinable
                if w.timestamp_us is not None:
                    stmt = with_default_timestamp(session, stmt, w.timestamp_us)
                try:
                    records, stateful = row_records(
                        c, stmt, w.values, w.prepared.keyspace, c.next_seq + len(batch)
                    )
                except CqlError as e:
                    w.done.set_exception(e)
                    continue
                needs_state = needs_state or stateful
                for record in records:
                    slot_of_seq[record.seq] = w
                batch.extend(records)
                queued.append(w)
            c.append(batch)
        self.rows += len(queued)
        if not batch:
            for w in queued:  # writes that store nothing (no mutation): done at once
                w.done.set_result(True)
            return
        if not needs_state:
            with self._acks:
                self._queued.append((queued, batch[-1].seq))
                self._acks.notify()
            return
        c.wait(batch[-1].seq)
        errors = pipeline_errors(c, batch[0].seq, batch[-1].seq)
        for seq, err in errors.items():
            slot_of_seq[seq].done.set_exception(err)
        for w in queued:
            if not w.done.done():
                w.done.set_result(True)


def _by_table(group: list[_Write]) -> dict[tuple[str | None, str | None, str], list[_Write]]:
    """Writes by target table (as named, with the keyspace they were prepared in)."""
    out: dict[tuple[str | None, str | None, str], list[_Write]] = {}
    for w in group:
        stmt = w.prepared.statement
        assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete)
        out.setdefault((w.prepared.keyspace, stmt.table.keyspace, stmt.table.name), []).append(w)
    return out


def combinable(stmt: ast.Statement, values: Sequence[Any] | None) -> bool:
    """A prepared single-row write the bulk path may take: INSERT, UPDATE or DELETE with
    no condition (LWT) and every value bound (no UNSET)."""
    from cqlcdc.server.notations import UNSET

    if not isinstance(stmt, ast.Insert | ast.Update | ast.Delete) or values is None:
        return False
    if isinstance(stmt, ast.Insert) and (stmt.if_not_exists or stmt.json is not None):
        return False
    if isinstance(stmt, ast.Update | ast.Delete) and (stmt.if_exists or stmt.conditions):
        return False
    return not any(v is UNSET for v in values)


__all__ = ["WriteCombiner", "combinable"]
