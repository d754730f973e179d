"""Deterministic timeuuids: every random bit comes from a seed fixed at the session.

A replayed ingest record therefore yields byte-identical list keys and ``cdc$time`` values.

>>> u = timeuuid_from_micros(1606390225588947, 0x1234, 0xABCDEF)
>>> micros_of(u)
1606390225588947
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from cqlcdc.errors import InvalidRequest

# 100-ns intervals between 1582-10-15 and 1970-01-01 (the v1 uuid epoch offset)
UUID_EPOCH_OFFSET = 0x01B21DD213814000
# the list prepend reference time (2010-01-01, microseconds; ScyllaDB's lists::prepender)
PREPEND_REFERENCE_US = 1262304000 * 1_000_000
# a write's list keys take sub-microsecond sequence numbers below this (UUID_gen::SUBMICRO_LIMIT)
LIST_SEQ_LIMIT = 1 << 17


def timeuuid_from_ticks(ticks: int, clock_seq_and_node: int) -> uuid.UUID:
    """A version-1 uuid from 100-ns ticks since 1582 and the 64 low bits as given."""
    time_low = ticks & 0xFFFFFFFF
    time_mid = (ticks >> 32) & 0xFFFF
    time_hi = ((ticks >> 48) & 0x0FFF) | 0x1000
    high = (time_low << 32) | (time_mid << 16) | time_hi
    return uuid.UUID(int=(high << 64) | (clock_seq_and_node & 0xFFFFFFFFFFFFFFFF))


def timeuuid_from_micros(micros: int, clock_seq: int, node: int) -> uuid.UUID:
    """An RFC 4122 version-1 uuid for ``micros`` (variant bits set on the clock sequence)."""
    low = ((0x8000 | (clock_seq & 0x3FFF)) << 48) | (node & 0xFFFFFFFFFFFF)
    return timeuuid_from_ticks(micros * 10 + UUID_EPOCH_OFFSET, low)


def list_key(micros: int, submicros: int, node: int) -> uuid.UUID:
    """A list element's key: ``micros`` plus a sub-microsecond sequence number, 3 bits of it
    in the time and 14 in the clock sequence, its low byte's sign bit flipped so signed-byte
    comparison keeps the order (ScyllaDB's ``get_time_UUID_bytes_from_micros_and_submicros``).

    Raises:
        InvalidRequest: ``submicros`` is out of range (ScyllaDB's message for a statement or
            batch that writes too many list values).
    """
    if not 0 <= submicros < LIST_SEQ_LIMIT:
        raise InvalidRequest("Too many list values per single CQL statement or batch")
    ticks = micros * 10 + UUID_EPOCH_OFFSET + ((submicros >> 14) & 0b111)
    clock_seq = (submicros & 0x3FFF) ^ 0x80
    return timeuuid_from_ticks(ticks, ((clock_seq | 0x8000) << 48) | (node & 0xFFFFFFFFFFFF))


def ticks_of(u: uuid.UUID) -> int:
    return ((u.time_hi_version & 0x0FFF) << 48) | (u.time_mid << 32) | u.time_low


def micros_of(u: uuid.UUID) -> int:
    """The microsecond timestamp inside a timeuuid (the conformance README's formula)."""
    return (ticks_of(u) - UUID_EPOCH_OFFSET) // 10


def timeuuid_sort_key(u: uuid.UUID) -> Any:
    """Timeuuid comparator order (the ``timeuuid`` type's: time, then signed low bytes)."""
    from cqlcdc.types import native_type

    return native_type("timeuuid").sort_key(u)


class SeededBits:
    """A stream of 64-bit pseudo-random numbers derived from a seed and a label."""

    def __init__(self, seed: int, label: str) -> None:
        self._key = f"{seed:x}/{label}".encode()
        self._n = 0

    def next64(self) -> int:
        digest = hashlib.blake2b(self._key + self._n.to_bytes(8, "big"), digest_size=8)
        self._n += 1
        return int.from_bytes(digest.digest(), "big")


_M64 = 0xFFFFFFFFFFFFFFFF


def splitmix64(x: int) -> int:
    """SplitMix64's finalizer (``cqlcdc.storage.vectorized.splitmix64`` for one value)."""
    z = (x + 0x9E3779B97F4A7C15) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


class CdcTimeBits:
    """The random low bits of a write's ``cdc$time`` values, one per timestamp group.

    ``next64()`` gives ``splitmix64(splitmix64(seed ^ record) + n)`` for n = 0, 1, ...: cheap
    and computable column-wise, so the bulk path (``cqlcdc.cdc.bulk_log``) makes the very
    values the log writer makes.
    """

    def __init__(self, seed: int, record: int) -> None:
        self._base = splitmix64((seed ^ record) & _M64)
        self._n = 0

    def next64(self) -> int:
        bits = splitmix64((self._base + self._n) & _M64)
        self._n += 1
        return bits


def random_time_uuid(micros: int, bits: SeededBits | CdcTimeBits) -> uuid.UUID:
    """``cdc$time``: the write's microseconds and 64 random low bits (ScyllaDB's
    ``get_random_time_UUID_from_micros``; the variant bits are random too)."""
    return timeuuid_from_ticks(micros * 10 + UUID_EPOCH_OFFSET, bits.next64())


def random_uuid(bits: SeededBits) -> uuid.UUID:
    """A version-4 uuid from seeded bits (``uuid()`` in a statement)."""
    raw = (bits.next64() << 64) | bits.next64()
    raw &= ~(0xF000 << 64)
    raw |= 0x4000 << 64
    raw &= ~(0xC000 << 48)
    raw |= 0x8000 << 48
    return uuid.UUID(int=raw)
