"""CDC streams and generations (scylla-cdc-reference.md section 6).

A generation splits the token ring into equal vnode ranges, one stream each; a partition's log
rows go to the stream of the range holding its token. Buckets of the pipeline are the same
ranges, so a bucket's base state and its log stream are handled by one task (co-location, as
in the consistency spec). A stream id is 16 bytes: the big-endian token of the stream (inside
its range), then ``random38 << 26 | vnode_index << 4 | version(1)``.

>>> g = Generation.create(timestamp_ms=0, num_ranges=4, seed=7)
>>> len(g.stream_for_token(0))
16
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from cqlcdc.directory import Document
from cqlcdc.storage.token import MIN_TOKEN, bucket_of
from cqlcdc.storage.uuids import SeededBits
from cqlcdc.storage.vectorized import token_buckets

STREAM_VERSION = 1


@dataclass(frozen=True, slots=True)
class Generation:
    """One CDC generation: its start time and the stream of each token range."""

    timestamp_ms: int
    streams: tuple[bytes, ...]

    @property
    def num_ranges(self) -> int:
        return len(self.streams)

    @staticmethod
    def create(timestamp_ms: int, num_ranges: int, seed: int) -> Generation:
        bits = SeededBits(seed, f"generation/{timestamp_ms}")
        width = (1 << 64) // num_ranges
        streams = []
        for i in range(num_ranges):
            start = MIN_TOKEN + i * width
            token = start + bits.next64() % width
            low = ((bits.next64() & ((1 << 38) - 1)) << 26) | (i << 4) | STREAM_VERSION
            streams.append(token.to_bytes(8, "big", signed=True) + low.to_bytes(8, "big"))
        return Generation(timestamp_ms, tuple(streams))

    def range_end(self, index: int) -> int:
        """The last token of range ``index`` (``cdc_streams_descriptions_v2.range_end``)."""
        width = (1 << 64) // self.num_ranges
        if index == self.num_ranges - 1:
            return (1 << 63) - 1
        return MIN_TOKEN + (index + 1) * width - 1

    def range_of(self, token: int) -> int:
        return min(bucket_of(token, self.num_ranges), self.num_ranges - 1)

    def stream_for_token(self, token: int) -> bytes:
        return self.streams[self.range_of(token)]

    def to_json(self) -> dict[str, object]:
        return {"timestamp_ms": self.timestamp_ms, "streams": [s.hex() for s in self.streams]}

    @staticmethod
    def from_json(d: dict[str, object]) -> Generation:
        streams = d["streams"]
        assert isinstance(streams, list)
        ts = d["timestamp_ms"]
        assert isinstance(ts, int)
        return Generation(ts, tuple(bytes.fromhex(s) for s in streams))


class Generations:
    """The generations of a data directory, oldest first; persisted as JSON.

    The first generation's timestamp is the time the data directory was made, as a
    ScyllaDB cluster's is the time its first generation was created: clients that start
    reading at a generation's time, or check that it is recent, find a real one. Unlike
    ScyllaDB (which refuses a write timestamped before its first generation), a write with an
    earlier ``USING TIMESTAMP`` is still logged, to the first generation's streams.
    A directory made before this kept its first generation at time 0: it is read as it is.
    """

    def __init__(self, generations: list[Generation]) -> None:
        self.generations = sorted(generations, key=lambda g: g.timestamp_ms)
        self._flat: tuple[tuple[int, ...], pa.Array, int] | None = None

    @staticmethod
    def from_json(data: Sequence[dict[str, Any]]) -> Generations:
        """The generations of a saved document (``save``)."""
        return Generations([Generation.from_json(g) for g in data])

    @staticmethod
    def load_or_create(
        document: Document,
        num_ranges: int,
        seed: int,
        created_ms: int | None = None,
    ) -> Generations:
        """The generations saved in ``document``, or a first one made now (``created_ms``: the
        time to give it instead of the clock's) and saved.

        The first generation's streams are derived from ``seed`` alone, not from its time,
        so one seed always gives the same stream ids."""
        data = document.load()
        if data is not None:
            return Generations.from_json(data)
        first = Generation.create(0, num_ranges, seed)
        if created_ms is None:
            created_ms = time.time_ns() // 1_000_000
        gens = Generations([dataclasses.replace(first, timestamp_ms=created_ms)])
        gens.save(document)
        return gens

    def save(self, document: Document) -> None:
        """Replace the saved generations, durably (a crash leaves the old or the new)."""
        document.save([g.to_json() for g in self.generations])

    def add(self, timestamp_ms: int, seed: int) -> Generation:
        """A new generation from ``timestamp_ms`` on, with fresh streams over the same ranges
        (ScyllaDB makes one on topology changes or ``nodetool checkAndRepairCdcStreams``)."""
        if timestamp_ms <= self.generations[-1].timestamp_ms:
            raise ValueError("a new generation must start after the current one")
        gen = Generation.create(timestamp_ms, self.generations[-1].num_ranges, seed)
        self.generations.append(gen)
        return gen

    def current(self, timestamp_us: int) -> Generation:
        """The generation in force for a write at ``timestamp_us``."""
        ms = timestamp_us // 1000
        chosen = self.generations[0]
        for g in self.generations:
            if g.timestamp_ms <= ms:
                chosen = g
        return chosen

    def stream_id(self, token: int, timestamp_us: int) -> bytes:
        return self.current(timestamp_us).stream_for_token(token)

    def stream_ids(
        self, tokens: npt.NDArray[np.int64], timestamps_us: npt.NDArray[np.int64]
    ) -> pa.Array:
        """``stream_id`` of every (token, timestamp), column-wise (the bulk path)."""
        flat, width = self._flat_streams()
        if len(self.generations) == 1:
            gen = np.zeros(len(tokens), np.int64)
        else:
            starts = np.array([g.timestamp_ms for g in self.generations], np.int64)
            gen = np.maximum(np.searchsorted(starts, timestamps_us // 1000, side="right") - 1, 0)
        counts = {g.num_ranges for g in self.generations}
        if len(counts) == 1:  # every generation over the same ranges (``add`` keeps them)
            (count,) = counts
            index = np.minimum(token_buckets(tokens, count), count - 1)
        else:
            ranges = np.array([g.num_ranges for g in self.generations], np.int64)[gen]
            index = np.zeros(len(tokens), np.int64)
            for count in np.unique(ranges):
                rows = ranges == count
                index[rows] = np.minimum(token_buckets(tokens[rows], int(count)), int(count) - 1)
        return flat.take(pa.array(gen * width + index))

    def _flat_streams(self) -> tuple[pa.Array, int]:
        """Every generation's streams, each padded to the widest (by its last stream), as one
        array (built again only when the generations change)."""
        key = tuple(id(g) for g in self.generations)
        if self._flat is None or self._flat[0] != key:
            width = max(g.num_ranges for g in self.generations)
            flat: list[bytes] = []
            for g in self.generations:
                flat.extend(g.streams)
                flat.extend([g.streams[-1]] * (width - g.num_ranges))
            self._flat = (key, pa.array(flat, pa.binary()), width)
        return self._flat[1], self._flat[2]


def stream_buckets(streams: Sequence[bytes], num_buckets: int) -> list[int] | None:
    """The buckets whose log files hold these streams' rows: a stream's token lies in the
    token range it serves, which is the bucket of the writes logged to it (generations
    have one range per bucket). None (no pruning) for an id that is not a stream's."""
    buckets = set()
    for stream in streams:
        if len(stream) != 16 or (stream[15] & 0x0F) != STREAM_VERSION:
            return None
        index = int.from_bytes(stream[8:], "big") >> 4 & ((1 << 22) - 1)
        token = int.from_bytes(stream[:8], "big", signed=True)
        if bucket_of(token, num_buckets) != index:  # ranges other than the buckets
            return None
        buckets.add(index)
    return sorted(buckets)
