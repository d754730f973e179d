"""The byte-level readers of bulk fragments: regions and big-endian numbers taken at once
equal the bytes taken one fragment at a time."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cqlcdc.storage.bulk_state import _gather, _slices
from cqlcdc.storage.vectorized import binary_parts


@st.composite
def _fragments_and_regions(draw: st.DrawFn) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Fragments, and in each a region; drawn from a few places (as headers and fixed-width
    keys lie) or from anywhere (as variable-width keys do)."""
    fragments = draw(st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=60))
    few = draw(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=3))
    anywhere = draw(st.booleans())
    regions = []
    for fragment in fragments:
        if anywhere:
            lo = draw(st.integers(0, len(fragment)))
            hi = draw(st.integers(lo, len(fragment)))
        else:
            lo, width = draw(st.sampled_from(few))
            lo, hi = min(lo, len(fragment)), min(lo + width, len(fragment))
        regions.append((lo, hi))
    return fragments, regions


@settings(max_examples=300, deadline=None)
@given(_fragments_and_regions(), st.integers(0, 3))
def test_slices_are_the_regions_of_each_fragment(
    drawn: tuple[list[bytes], list[tuple[int, int]]], skip: int
) -> None:
    fragments, regions = drawn
    array = pa.array([b"x" * 5] * skip + fragments, pa.binary()).slice(skip)
    offsets, data = binary_parts(array)
    start = offsets[:-1] + np.array([lo for lo, _ in regions], np.int64)
    end = offsets[:-1] + np.array([hi for _, hi in regions], np.int64)
    expected = [f[lo:hi] for f, (lo, hi) in zip(fragments, regions, strict=True)]
    assert _slices(array, data, offsets, start, end).to_pylist() == expected


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=64), st.data())
def test_gathered_numbers_are_the_big_endian_numbers_at_each_place(
    data: bytes, draw: st.DataObject
) -> None:
    for dtype, fmt in ((">i8", ">q"), (">i4", ">i"), (">u2", ">H")):
        width = struct.calcsize(fmt)
        if len(data) < width:
            continue
        at = draw.draw(st.lists(st.integers(0, len(data) - width), max_size=10))
        found = _gather(np.frombuffer(data, np.uint8), np.array(at, np.int64), dtype)
        assert found.tolist() == [struct.unpack_from(fmt, data, a)[0] for a in at]
