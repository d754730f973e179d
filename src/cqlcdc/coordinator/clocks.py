"""The clocks of a data directory's writes: timestamps, the write clock and the seeds.

Every write's timestamp, its ``now`` (TTL expiry, list keys, a feed's virtual-timestamp
step) and the seed of its random bits are fixed here, in the coordinator, and carried in
its ingest record, so the core never reads a clock and a replayed batch is byte-identical.
Every method is called with the coordinator's ``lock`` held: the clocks move in the order
seqs are handed out.

>>> clocks = WriteClocks(seed=1)
>>> first = clocks.timestamps_us(3)
>>> clocks.timestamp_us() > first + 2  # after the three, never among them
True
"""

from __future__ import annotations

import time

from cqlcdc.storage.uuids import SeededBits


class WriteClocks:
    """The monotonic clocks and the seed stream of one coordinator (see the module
    docstring); ``seed`` keys the seed stream (one urandom per coordinator)."""

    __slots__ = ("_last_now_us", "_last_ts", "_seeds")

    def __init__(self, seed: int) -> None:
        self._last_ts = 0
        self._last_now_us = 0
        # every write's random bits come from its seed (kept in its ingest record); the seeds
        # themselves are a keyed stream, one urandom per coordinator instead of one per write
        self._seeds = SeededBits(seed, "write-seeds")

    def timestamp_us(self) -> int:
        """A monotonic microsecond clock, like the drivers' timestamp generator."""
        now = time.time_ns() // 1000
        self._last_ts = max(now, self._last_ts + 1)
        return self._last_ts

    def timestamps_us(self, count: int) -> int:
        """The first of ``count`` consecutive write timestamps."""
        first = max(time.time_ns() // 1000, self._last_ts + 1)
        self._last_ts = first + count - 1
        return first

    def advance_to(self, timestamp_us: int) -> None:
        """Every later write timestamp is above ``timestamp_us`` (a new CDC generation's
        start: every later write belongs to it)."""
        self._last_ts = max(self._last_ts, timestamp_us)

    def now_us(self) -> int:
        """A write's clock, made monotonic so virtual timestamps follow the order writes are
        applied in."""
        self._last_now_us = max(time.time_ns() // 1000, self._last_now_us)
        return self._last_now_us

    def next_seed(self) -> int:
        """The seed of a write's random bits."""
        return self._seeds.next64()


__all__ = ["WriteClocks"]
