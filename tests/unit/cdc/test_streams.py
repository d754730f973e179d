"""Stream ids column-wise (``Generations.stream_ids``, the bulk path) equal the per-write
``stream_id`` the log writer uses, across generations and after one is added; the first
generation is timestamped when its data directory is made."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from cqlcdc.cdc.streams import Generation, Generations
from cqlcdc.documents import JsonDocument

_TOKENS = st.integers(-(2**63), 2**63 - 1)
_TIMES_US = st.integers(0, 3_000_000_000)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(_TOKENS, _TIMES_US), min_size=1, max_size=40),
    st.sampled_from([1, 4, 16]),
    st.lists(st.integers(1, 2_999_999), max_size=3, unique=True),
)
def test_stream_ids_are_the_stream_id_of_each_write(
    writes: list[tuple[int, int]], ranges: int, later_ms: list[int]
) -> None:
    gens = Generations([Generation.create(0, ranges, 7)])
    tokens = np.array([t for t, _ in writes], np.int64)
    times = np.array([ts for _, ts in writes], np.int64)
    assert gens.stream_ids(tokens, times).to_pylist() == [gens.stream_id(t, ts) for t, ts in writes]
    for ms in sorted(later_ms):  # generations added after a first use: no stale streams
        gens.add(ms, ms)
        expected = [gens.stream_id(t, ts) for t, ts in writes]
        assert gens.stream_ids(tokens, times).to_pylist() == expected


def test_generations_over_different_ranges() -> None:
    gens = Generations([Generation.create(0, 4, 1), Generation.create(1_000, 16, 2)])
    tokens = np.array([-(2**63), -1, 0, 2**62, 2**63 - 1] * 2, np.int64)
    times = np.array([0] * 5 + [2_000_000] * 5, np.int64)
    expected = [gens.stream_id(int(t), int(ts)) for t, ts in zip(tokens, times, strict=True)]
    assert gens.stream_ids(tokens, times).to_pylist() == expected


def test_the_first_generation_starts_when_the_data_directory_is_made(tmp_path: Path) -> None:
    path = tmp_path / "cdc_generations.json"
    before = time.time_ns() // 1_000_000
    made = Generations.load_or_create(JsonDocument(path), 4, 7)
    after = time.time_ns() // 1_000_000
    (first,) = made.generations
    assert before <= first.timestamp_ms <= after
    # persisted: a restart (later) reads the same time and streams
    again = Generations.load_or_create(JsonDocument(path), 4, 7, created_ms=after + 60_000)
    assert again.generations == made.generations
    # one seed gives one set of streams, whenever the directory is made
    other = Generations.load_or_create(JsonDocument(tmp_path / "other.json"), 4, 7, created_ms=123)
    assert other.generations[0].streams == first.streams
    assert other.generations[0].timestamp_ms == 123
    # a write timestamped before the first generation is logged to its streams
    assert made.current(0) is first
    assert made.stream_ids(np.array([5], np.int64), np.array([0], np.int64)).to_pylist() == [
        first.stream_for_token(5)
    ]


def test_a_directory_made_with_a_generation_at_time_0_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "cdc_generations.json"
    old = Generation.create(0, 4, 3)
    path.write_text(json.dumps([old.to_json()]))
    assert Generations.load_or_create(JsonDocument(path), 4, 9).generations == [old]
