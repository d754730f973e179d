"""The coordinator's write clocks: monotonic timestamps, reserved ranges, a generation's
start, and a seed stream fixed by its key."""

from __future__ import annotations

import time

from cqlcdc.coordinator.clocks import WriteClocks


def test_timestamps_increase_even_when_the_wall_clock_does_not_move() -> None:
    clocks = WriteClocks(seed=7)
    seen = [clocks.timestamp_us() for _ in range(1000)]
    assert seen == sorted(set(seen))


def test_a_reserved_range_is_never_issued_again() -> None:
    clocks = WriteClocks(seed=7)
    first = clocks.timestamps_us(100)
    assert first >= time.time_ns() // 1000 - 1_000_000  # from the wall clock
    assert clocks.timestamp_us() >= first + 100
    assert clocks.timestamps_us(5) > first + 100


def test_later_writes_are_above_a_new_generations_start() -> None:
    clocks = WriteClocks(seed=7)
    future_us = time.time_ns() // 1000 + 3_600_000_000
    clocks.advance_to(future_us)
    assert clocks.timestamp_us() > future_us
    clocks.advance_to(0)  # never moves back
    assert clocks.timestamps_us(2) > future_us


def test_the_write_clock_never_moves_back() -> None:
    clocks = WriteClocks(seed=7)
    seen = [clocks.now_us() for _ in range(1000)]
    assert seen == sorted(seen)


def test_seeds_are_a_stream_fixed_by_its_key() -> None:
    one, two, other = WriteClocks(seed=7), WriteClocks(seed=7), WriteClocks(seed=8)
    stream = [one.next_seed() for _ in range(5)]
    assert stream == [two.next_seed() for _ in range(5)]
    assert stream != [other.next_seed() for _ in range(5)]
    assert len(set(stream)) == 5
