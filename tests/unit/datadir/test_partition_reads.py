"""Partition reads by the data files' token indexes (``partition_reads``) find exactly the
rows a dataset scan with the same filters finds: across files of several batches, files
of several row groups, a small file whose rows are not in token order, files written
before a column was added, and above a TRUNCATE's seq."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cqlcdc.datadir.commit import VersionedReader, commit_output, write_data_file
from cqlcdc.datadir.partition_reads import read_partitions
from cqlcdc.row_groups import RowGroupCache
from cqlcdc.storage.token import bucket_of, murmur3_token

BUCKETS = 4
OUTPUT = "base/t"


def _rows(keys: list[int], first_seq: int, *, with_w: bool = False) -> pa.Table:
    pks = [k.to_bytes(4, "big", signed=True) for k in keys]
    tokens = [murmur3_token(pk) for pk in pks]
    columns: dict[str, pa.Array] = {
        "bucket": pa.array([bucket_of(t, BUCKETS) for t in tokens], pa.int32()),
        "pk": pa.array(pks, pa.binary()),
        "token": pa.array(tokens, pa.int64()),
        "seq": pa.array(range(first_seq, first_seq + len(keys)), pa.int64()),
        "v": pa.array(keys, pa.int32()),
    }
    if with_w:
        columns["w"] = pa.array([f"w{k}" for k in keys], pa.string())
    return pa.table(columns)


def _by_bucket_in_token_order(rows: pa.Table) -> list[pa.Table]:
    """One file per bucket, its rows in token order, as the engine writes a batch."""
    out = []
    for bucket in sorted(set(rows["bucket"].to_pylist())):
        part = rows.filter(pa.compute.equal(rows["bucket"], bucket))
        out.append(part.take(pa.array(np.argsort(part["token"].to_numpy(), kind="stable"))))
    return out


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = tmp_path_factory.mktemp("partition-reads")
    rng = np.random.default_rng(7)
    batches = [
        # ~10 rows a partition, files of several row groups
        _by_bucket_in_token_order(_rows([k // 10 for k in range(30_000)], 1)),
        # the same partitions written again, a file of rows in no order (a small file)
        [_rows(rng.permutation(3_000).tolist(), 100_000)],
        # a column added: the files before it read it as null
        _by_bucket_in_token_order(_rows(list(range(2_500, 4_000)), 200_000, with_w=True)),
    ]
    version = -1
    for batch_id, files in enumerate(batches):
        written = [write_data_file(root, OUTPUT, rows, batch_id) for rows in files]
        version = commit_output(root, OUTPUT, written, "app", batch_id).version()
    return root, version


def _scanned(root: Path, version: int, keys: list[bytes], after_seq: int) -> pa.Table:
    filters = [("pk", "in", keys)]
    if after_seq:
        filters.append(("seq", ">", after_seq))
    return VersionedReader(root, {OUTPUT: version}).scan(OUTPUT, filters)


@pytest.mark.parametrize("after_seq", [0, 5_000, 150_000, 10**9])
@pytest.mark.parametrize(
    "wanted",
    [[0], [1, 2_999], [2_600], [3_999, 17, 2_500], [4_000], [-5, 1_000_000], list(range(50))],
)
def test_a_partition_read_finds_the_rows_a_scan_finds(
    table: tuple[Path, int], wanted: list[int], after_seq: int
) -> None:
    root, version = table
    keys = [k.to_bytes(4, "big", signed=True) for k in wanted]
    tokens = [murmur3_token(k) for k in keys]
    buckets = sorted({bucket_of(t, BUCKETS) for t in tokens})
    cache = RowGroupCache(1 << 20)
    got = read_partitions(root, OUTPUT, version, keys, tokens, buckets, after_seq, cache)
    expected = _scanned(root, version, keys, after_seq)
    assert got.schema == expected.schema
    assert got.sort_by("seq").equals(expected.sort_by("seq"))
    # and again, from what the first read kept
    again = read_partitions(root, OUTPUT, version, keys, tokens, buckets, after_seq, cache)
    assert again.sort_by("seq").equals(expected.sort_by("seq"))


def test_rows_of_files_before_a_column_was_added_read_it_as_null(
    table: tuple[Path, int],
) -> None:
    root, version = table
    key = (2_600).to_bytes(4, "big", signed=True)
    token = murmur3_token(key)
    rows = read_partitions(root, OUTPUT, version, [key], [token], [bucket_of(token, BUCKETS)])
    by_seq = dict(zip(rows["seq"].to_pylist(), rows["w"].to_pylist(), strict=True))
    # written by the first batch (10 rows), the unordered file (1) and the last (1)
    assert sorted(by_seq.items())[-1] == (200_100, "w2600")
    assert [w for seq, w in by_seq.items() if seq < 200_000] == [None] * 11


def test_a_read_of_an_older_version_does_not_see_later_files(table: tuple[Path, int]) -> None:
    root, version = table
    key = (3_000).to_bytes(4, "big", signed=True)
    token = murmur3_token(key)
    older = read_partitions(root, OUTPUT, version - 1, [key], [token], [bucket_of(token, BUCKETS)])
    newer = read_partitions(root, OUTPUT, version, [key], [token], [bucket_of(token, BUCKETS)])
    assert older.num_rows == 0
    assert newer["v"].to_pylist() == [3_000]
