"""The row-group read of a ``_ticks`` window (``cqlcdc.row_groups``) returns what a pyarrow
dataset scan with the same condition returns: files of several row groups in any order,
a file without the column (nulls, as the scan reads it), null ticks, empty windows; the
cache keeps decoded groups within its bound and never grows past it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqlcdc.row_groups import RowGroupCache, read_in_range, row_group_bounds

ROW_GROUP = 50


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> ds.FileSystemDataset:
    """Four files: ticks ascending, shuffled, with nulls, and one without the column."""
    where = tmp_path_factory.mktemp("groups")
    rng = np.random.default_rng(7)
    tables = []
    for f in range(3):
        ticks = np.arange(f * 1000, f * 1000 + 400, dtype=np.int64)
        if f == 1:
            rng.shuffle(ticks)
        column = pa.array(ticks, mask=(ticks % 97 == 0) if f == 2 else None)
        tables.append(pa.table({"k": pa.array(ticks % 5, pa.int32()), "_ticks": column}))
    tables.append(pa.table({"k": pa.array(np.arange(120) % 5, pa.int32())}))  # no _ticks
    for i, table in enumerate(tables):
        pq.write_table(table, where / f"part-{i}.parquet", row_group_size=ROW_GROUP)
    schema = pa.schema([("k", pa.int32()), ("_ticks", pa.int64())])
    return ds.dataset([str(p) for p in sorted(Path(where).iterdir())], schema=schema)


def _condition(low: int, high: int, k: int | None) -> ds.Expression:
    ticks = pc.field("_ticks")
    condition = ((ticks >= low) & (ticks <= high)) | ticks.is_null()
    return condition if k is None else condition & (pc.field("k") == k)


def _sorted(table: pa.Table) -> list[tuple[int | None, int]]:
    rows = zip(table["_ticks"].to_pylist(), table["k"].to_pylist(), strict=True)
    return sorted(rows, key=lambda r: (r[0] is None, r[0] or 0, r[1]))


@settings(max_examples=40, deadline=None)
@given(
    low=st.integers(-100, 3_100),
    width=st.integers(0, 1_500),
    k=st.none() | st.integers(0, 4),
)
def test_the_same_rows_as_the_dataset_scan(
    files: ds.FileSystemDataset, low: int, width: int, k: int | None
) -> None:
    condition = _condition(low, low + width, k)
    cache = RowGroupCache(1 << 20)
    got = read_in_range("t", files, "_ticks", low, low + width, condition, cache=cache)
    assert got.schema == files.schema
    assert _sorted(got) == _sorted(files.to_table(filter=condition))
    again = read_in_range("t", files, "_ticks", low, low + width, condition, cache=cache)
    assert _sorted(again) == _sorted(got)


def test_only_overlapping_groups_are_read(files: ds.FileSystemDataset) -> None:
    cache = RowGroupCache(1 << 20)
    read_in_range("t", files, "_ticks", 1_010, 1_020, _condition(1_010, 1_020, None), cache=cache)
    kept = {key for key in cache._groups}
    # the ascending file: its one group holding 1010..1020 is not in the first file; the
    # shuffled file's groups all may; the file with nulls and the one without: every group
    ascending = [key for key in kept if key[0].endswith("part-0.parquet")]
    assert ascending == []
    assert len([key for key in kept if key[0].endswith("part-1.parquet")]) == 400 // ROW_GROUP
    assert len([key for key in kept if key[0].endswith("part-3.parquet")]) == 3


def test_bounds_from_statistics(files: ds.FileSystemDataset) -> None:
    fragments = sorted(files.get_fragments(), key=lambda f: f.path)
    lows, highs = row_group_bounds(pq.read_metadata(fragments[0].path), "_ticks")
    assert lows.tolist() == list(range(0, 400, ROW_GROUP))
    assert highs.tolist() == list(range(ROW_GROUP - 1, 400, ROW_GROUP))
    lows, highs = row_group_bounds(pq.read_metadata(fragments[2].path), "_ticks")
    # groups holding a null are always read
    assert lows[0] == np.iinfo(np.int64).min and highs[0] == np.iinfo(np.int64).max
    lows, _ = row_group_bounds(pq.read_metadata(fragments[3].path), "_ticks")
    assert (lows == np.iinfo(np.int64).min).all()


def test_the_cache_stays_within_its_bound(files: ds.FileSystemDataset) -> None:
    one_group = pq.read_table(sorted(files.files)[0]).slice(0, ROW_GROUP).nbytes
    cache = RowGroupCache(3 * one_group)
    got = read_in_range("t", files, "_ticks", 0, 3_000, _condition(0, 3_000, None), cache=cache)
    assert got.num_rows == 3 * 400 + 120
    assert cache._bytes <= cache.limit_bytes and len(cache._groups) < 3 * 400 // ROW_GROUP
    empty = read_in_range("t", files, "_ticks", 5_000, 6_000, _condition(5_000, 6_000, 2))
    # past every tick: the rows without one whose k is 2 (the file without the column, and
    # a null of the file with nulls), as the scan finds them
    assert empty.num_rows == 24 + 1
    assert _sorted(empty) == _sorted(files.to_table(filter=_condition(5_000, 6_000, 2)))
