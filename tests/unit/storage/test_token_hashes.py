"""The vectorized Murmur3 tokens equal the scalar ones, at every key length and on both
sides of the size below which the scalar hash is used for a whole array."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cqlcdc.storage import vectorized
from cqlcdc.storage.token import murmur3_token
from cqlcdc.storage.vectorized import murmur3_tokens


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=60))
def test_tokens_of_an_array_are_each_keys_token(keys: list[bytes]) -> None:
    expected = [murmur3_token(k) for k in keys]
    assert murmur3_tokens(pa.array(keys, pa.binary())).tolist() == expected
    # the same keys as a slice of a larger array (a chunk's keys often are)
    sliced = pa.array([b"x", *keys], pa.binary()).slice(1)
    assert murmur3_tokens(sliced).tolist() == expected


def test_both_ways_are_taken() -> None:
    few = [bytes([i]) * 8 for i in range(vectorized._SCALAR_BELOW - 1)]
    many = few * 3
    for keys in (few, many):
        assert murmur3_tokens(pa.array(keys, pa.binary())).tolist() == [
            murmur3_token(k) for k in keys
        ]
