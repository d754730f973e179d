"""timeuuid_ticks reads the timestamp of canonical uuid strings column-wise, exactly as
``uuid.UUID(...).time``, over chunks and slices, and refuses what is not a uuid."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from cqlcdc.storage.uuids import timeuuid_from_ticks
from cqlcdc.storage.vectorized import timeuuid_strings, timeuuid_ticks


def test_ticks_match_uuid_time_over_chunks_and_slices() -> None:
    values = [timeuuid_from_ticks(t, 0x8000_1234_5678_9ABC) for t in (0, 1, 2**59, 2**60 - 1)]
    values += [uuid.uuid1() for _ in range(50)]
    strings = pa.array([str(u) for u in values])
    chunked = pa.chunked_array([strings.slice(0, 3), strings.slice(3), strings.slice(0, 0)])
    assert timeuuid_ticks(chunked).tolist() == [u.time for u in values]
    assert timeuuid_ticks(strings.slice(5, 7)).tolist() == [u.time for u in values[5:12]]
    upper = pa.array([str(values[-1]).upper()])
    assert timeuuid_ticks(upper).tolist() == [values[-1].time]


def test_ticks_of_the_bulk_paths_strings() -> None:
    import numpy as np

    micros = np.array([0, 1_606_390_225_588_947], np.int64)
    low = np.array([1, 2], np.uint64)
    made = timeuuid_strings(micros, low)
    assert timeuuid_ticks(made).tolist() == [uuid.UUID(s).time for s in made.to_pylist()]


@pytest.mark.parametrize("bad", [["not-a-uuid"], ["zzzzzzzz-zzzz-1zzz-8000-000000000000"], [None]])
def test_values_that_are_not_uuids_are_refused(bad: list[str | None]) -> None:
    with pytest.raises(ValueError):
        timeuuid_ticks(pa.array(bad, pa.string()))
