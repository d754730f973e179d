"""Group commit of ingest appends, on an ingest log in memory: when a lingering append wakes
(its group full, its linger over, the coordinator closing), and what a failed append fails.

No timed assertion can flake: a linger that must not run out is an hour long and the
append is awaited for at most a minute; the moment a lingerer waits is known from its
clock, not from a sleep."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from cqlcdc.coordinator.group_commit import GROUP_QUIET_S, GroupCommit
from cqlcdc.datadir.records import IngestRecord
from cqlcdc.errors import ServerError

HOUR_S = 3600.0
PATIENCE_S = 60.0  # far more than any wake-up takes, far less than an hour's linger


class MemoryLog:
    """An ingest log in memory that records each append (and can refuse them)."""

    def __init__(self) -> None:
        self.appends: list[list[int]] = []
        self.refuse: OSError | None = None

    def last_seq(self) -> int:
        return self.appends[-1][-1] if self.appends else 0

    def append(self, records: Sequence[IngestRecord]) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.appends.append([r.seq for r in records])


class LingerClock:
    """time.monotonic, with an event set each time a linger starts (its first reading)."""

    def __init__(self) -> None:
        self.lingering = threading.Event()

    def __call__(self) -> float:
        self.lingering.set()
        return time.monotonic()


def record(seq: int) -> IngestRecord:
    return IngestRecord(
        seq=seq, table_id="t", schema_version=1, bucket=0, token=0, pk=b"pk", payload=b""
    )


def queue(group: GroupCommit, *seqs: int) -> None:
    with group.lock:
        group.append([record(s) for s in seqs])


@pytest.fixture
def log() -> MemoryLog:
    return MemoryLog()


@pytest.fixture
def clock() -> LingerClock:
    return LingerClock()


class Durable(threading.Thread):
    """``make_durable(seq)`` in a thread of its own, as a writer calls it."""

    def __init__(self, group: GroupCommit, seq: int) -> None:
        super().__init__(daemon=True)
        self.group, self.seq = group, seq
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.group.make_durable(self.seq)
        except BaseException as e:
            self.error = e

    def finished(self) -> bool:
        self.join(PATIENCE_S)
        return not self.is_alive()


def with_target(group: GroupCommit, log: MemoryLog, writes: int) -> None:
    """Make the next group's target ``writes``: an append of that many writes."""
    first = group.next_seq
    queue(group, *range(first, first + writes))
    group.make_durable(first + writes - 1)
    assert log.appends[-1] == list(range(first, first + writes))


@pytest.fixture
def lingering(log: MemoryLog, clock: LingerClock) -> Iterator[GroupCommit]:
    group = GroupCommit(log, threading.Lock(), linger_s=HOUR_S, clock=clock)
    with_target(group, log, 3)  # the first append waits only the quiet gap
    clock.lingering.clear()
    yield group
    group.close()


def test_a_full_group_is_appended_without_waiting_for_the_linger(
    lingering: GroupCommit, log: MemoryLog, clock: LingerClock
) -> None:
    queue(lingering, 4)
    writer = Durable(lingering, 4)
    writer.start()
    assert clock.lingering.wait(PATIENCE_S)
    # the lock is the lingerer's condition: taking it means the lingerer is waiting on it
    queue(lingering, 5)
    queue(lingering, 6)  # three writes, as many as the last append held: the group is full
    assert writer.finished()
    assert writer.error is None
    assert log.appends[-1] == [4, 5, 6]


def test_a_write_that_finds_its_group_full_waits_only_the_quiet_gap(
    log: MemoryLog, clock: LingerClock
) -> None:
    group = GroupCommit(log, threading.Lock(), linger_s=HOUR_S, clock=clock)
    with_target(group, log, 1)  # a lone writer: its next write is a full group
    queue(group, 2)
    started = time.monotonic()
    group.make_durable(2)
    assert GROUP_QUIET_S <= time.monotonic() - started < PATIENCE_S
    assert log.appends == [[1], [2]]


def test_a_lone_write_waits_at_most_the_linger(log: MemoryLog) -> None:
    group = GroupCommit(log, threading.Lock(), linger_s=0.2)
    with_target(group, log, 3)
    queue(group, 4)  # one write where three are expected: the group never fills
    started = time.monotonic()
    group.make_durable(4)
    assert 0.2 <= time.monotonic() - started < PATIENCE_S
    assert log.appends[-1] == [4]


def test_closing_ends_a_linger(lingering: GroupCommit, log: MemoryLog, clock: LingerClock) -> None:
    queue(lingering, 4)
    writer = Durable(lingering, 4)
    writer.start()
    assert clock.lingering.wait(PATIENCE_S)
    lingering.close()
    assert writer.finished()
    assert log.appends[-1] == [4]


def test_writes_that_wait_behind_an_append_share_the_next_one(log: MemoryLog) -> None:
    group = GroupCommit(log, threading.Lock(), linger_s=0.0)
    queue(group, 1, 2)
    queue(group, 3)
    group.make_durable(1)  # one append takes everything queued
    group.make_durable(3)
    assert log.appends == [[1, 2, 3]]
    assert group.next_seq == 4 and group.flush_target() == 3


def test_a_failed_append_fails_its_writes_only(log: MemoryLog) -> None:
    group = GroupCommit(log, threading.Lock(), linger_s=0.0)
    queue(group, 1)
    group.make_durable(1)
    queue(group, 2, 3)
    log.refuse = OSError(28, "No space left on device")
    with pytest.raises(ServerError, match=r"Ingest append failed: .*No space left"):
        group.make_durable(3)
    with pytest.raises(ServerError, match="No space left"):
        group.make_durable(2)  # held by the same append: told, not appended again
    assert group.failed(2) and not group.failed(1)
    assert group.flush_target() == 1  # a flush does not wait for refused writes
    log.refuse = None
    queue(group, 4)
    group.make_durable(4)
    assert log.appends == [[1], [4]]
    assert group.flush_target() == 4


def test_a_seq_never_queued_is_refused(log: MemoryLog) -> None:
    group = GroupCommit(log, threading.Lock(), linger_s=0.0)
    queue(group, 1)
    with pytest.raises(ServerError, match="ingest seq 5 was never queued"):
        group.make_durable(5)
    group.make_durable(1)  # put back, appended by the next caller
    assert log.appends == [[1]]
    with pytest.raises(ServerError, match="ingest seq 1 reused"):
        queue(group, 1)


def test_a_writer_waits_for_half_the_backlog_once_too_many_files_are_unapplied(
    log: MemoryLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cqlcdc.coordinator.group_commit as group_commit

    monkeypatch.setattr(group_commit, "MAX_UNAPPLIED_FILES", 4)
    group = GroupCommit(log, threading.Lock(), linger_s=0.0)
    for seq in range(1, 7):  # six files, none applied
        queue(group, seq)
        group.make_durable(seq)
    assert group.backlog_target(6, committed_seq=0) == 5  # half the bound from the newest file
    assert group.backlog_target(6, committed_seq=3) == 0  # three unapplied: within bound
