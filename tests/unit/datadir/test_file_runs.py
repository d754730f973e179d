"""The grouping rule of a micro-batch's data files: whole buckets, ascending, one schema,
a file per output once it reaches the target size (the last one smaller)."""

from __future__ import annotations

import pyarrow as pa

from cqlcdc.datadir.file_runs import ALONE_ROWS, BucketRuns


def _rows(bucket: int, n: int, column: str = "bucket") -> pa.Table:
    return pa.table({column: pa.array([bucket] * n, pa.int32()), "v": pa.array(range(n))})


def _buckets(rows: pa.Table, column: str = "bucket") -> list[int]:
    return sorted(set(rows.column(column).to_pylist()))


def test_a_small_batch_is_one_file_per_output() -> None:
    runs = BucketRuns()
    for bucket in (0, 2, 3, 7, 15):
        assert runs.add("base/t", bucket, _rows(bucket, 40)) == []
        assert runs.add("log/t", bucket, _rows(bucket, 50, "_bucket")) == []
    files = runs.drain()
    assert [output for output, _ in files] == ["base/t", "log/t"]
    base, log = files[0][1], files[1][1]
    # bucket order, each bucket's rows as added
    assert base.column("bucket").to_pylist() == [b for b in (0, 2, 3, 7, 15) for _ in range(40)]
    assert base.column("v").to_pylist() == list(range(40)) * 5
    assert _buckets(log, "_bucket") == [0, 2, 3, 7, 15] and log.num_rows == 250
    assert runs.drain() == []


def test_files_reach_the_target_size_in_runs_of_consecutive_buckets() -> None:
    one_bucket = _rows(0, 1000).nbytes
    runs = BucketRuns(target_bytes=3 * one_bucket)
    done: list[pa.Table] = []
    for bucket in range(8):
        done += runs.add("log/t", bucket, _rows(bucket, 1000))
    done += [rows for _, rows in runs.drain()]
    assert [_buckets(rows) for rows in done] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    assert all(rows.nbytes >= 3 * one_bucket for rows in done[:-1])


def test_a_bulk_bucket_is_a_file_as_soon_as_it_is_done() -> None:
    """Buckets of ``ALONE_ROWS`` rows or more are files of their own, written one by one
    while the next are processed (the bulk path's parallel writes, and a state read of one
    bucket that reads one file); the small buckets between them share files."""
    runs = BucketRuns()
    big = ALONE_ROWS
    assert [_buckets(rows) for rows in runs.add("base/t", 0, _rows(0, big))] == [[0]]
    assert runs.add("base/t", 1, _rows(1, 10)) == []
    assert runs.add("base/t", 2, _rows(2, 10)) == []
    # a big bucket closes the run of small ones before it and is written alone
    assert [_buckets(rows) for rows in runs.add("base/t", 3, _rows(3, big))] == [[1, 2], [3]]
    assert [_buckets(rows) for rows in runs.add("base/t", 4, _rows(4, big + 1))] == [[4]]
    assert runs.drain() == []
    # bytes count as well as rows: a bucket at the byte target is complete at once
    runs = BucketRuns(target_bytes=_rows(0, 1000).nbytes)
    for bucket in range(4):
        done = runs.add("base/t", bucket, _rows(bucket, 1000))
        assert [_buckets(rows) for rows in done] == [[bucket]]
    assert runs.drain() == []


def test_a_run_closes_before_a_lower_bucket_or_another_schema() -> None:
    runs = BucketRuns()
    assert runs.add("errors", 3, _rows(3, 2)) == []
    assert runs.add("errors", 9, _rows(9, 2)) == []
    # a second table's errors start at a lower bucket: a file never goes back in buckets
    closed = runs.add("errors", 1, _rows(1, 2))
    assert [_buckets(rows) for rows in closed] == [[3, 9]]
    wider = _rows(4, 2).append_column("w", pa.array(["x", "y"]))
    closed = runs.add("errors", 4, wider)  # an altered table: one schema per file
    assert [_buckets(rows) for rows in closed] == [[1]]
    assert [(o, _buckets(rows), rows.schema.names) for o, rows in runs.drain()] == [
        ("errors", [4], ["bucket", "v", "w"])
    ]
