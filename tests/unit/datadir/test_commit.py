"""State reads of committed outputs: a bucket's read sees exactly the rows of that bucket
whatever files hold them (one bucket per file, several, or files without statistics)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cqlcdc.datadir.commit import (
    BucketFiles,
    VersionedReader,
    batch_of_name,
    bucket_range,
    buckets_of_name,
    commit_output,
    open_table,
    table_dir,
    write_data_file,
)

SCHEMA = pa.schema(
    [
        pa.field("bucket", pa.int32(), nullable=False),
        pa.field("pk", pa.binary(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
    ]
)


def _rows(bucket: list[int], pks: list[bytes], first_seq: int) -> pa.Table:
    seqs = list(range(first_seq, first_seq + len(pks)))
    return pa.table({"bucket": bucket, "pk": pks, "seq": seqs}, schema=SCHEMA)


@pytest.fixture
def tables(tmp_path: Path) -> tuple[Path, int]:
    """Three batches of an output: files of one bucket each, and one holding buckets 1-3
    (as an output written for several buckets at once is)."""
    version = -1
    batches = [
        [_rows([0, 0], [b"a", b"b"], 1), _rows([1], [b"c"], 3)],
        [_rows([2, 2], [b"d", b"a"], 10)],
        [_rows([1, 3, 2], [b"c", b"e", b"f"], 20)],
    ]
    for batch_id, files in enumerate(batches):
        written = [write_data_file(tmp_path, "base/t", rows, batch_id) for rows in files]
        version = commit_output(tmp_path, "base/t", written, "app", batch_id).version()
    return tmp_path, version


def test_a_bucket_read_finds_its_rows_in_every_file_that_can_hold_them(
    tables: tuple[Path, int],
) -> None:
    root, version = tables
    reader = VersionedReader(root, {"base/t": version})
    for bucket, pks, expected in [
        (0, [b"a", b"b", b"z"], [(b"a", 1), (b"b", 2)]),
        (1, [b"c"], [(b"c", 3), (b"c", 20)]),
        (2, [b"a", b"f"], [(b"a", 11), (b"f", 22)]),
        (3, [b"e", b"a"], [(b"e", 21)]),
        (4, [b"a"], []),
    ]:
        rows = reader.read("base/t", bucket, pks, ["pk", "seq"])
        found = sorted(zip(rows.column("pk").to_pylist(), rows.column("seq").to_pylist()))
        assert found == expected, bucket


def test_bucket_files_skip_the_files_whose_statistics_exclude_the_bucket(
    tables: tuple[Path, int],
) -> None:
    root, version = tables
    files = BucketFiles(open_table(str(table_dir(root, "base/t")), version))
    counts = {bucket: len(list(files.dataset(bucket).get_fragments())) for bucket in range(5)}
    # bucket 0: its own file; 1: its own and the 1-3 file; 2: its own and the 1-3 file
    assert counts == {0: 1, 1: 2, 2: 2, 3: 1, 4: 0}


def test_a_read_at_an_older_version_does_not_see_later_files(tables: tuple[Path, int]) -> None:
    root, version = tables
    reader = VersionedReader(root, {"base/t": version - 1})
    rows = reader.read("base/t", 1, [b"c"], ["seq"])
    assert rows.column("seq").to_pylist() == [3]


def test_data_files_compress_every_leaf_but_the_log_time_text(tmp_path: Path) -> None:
    rows = pa.table(
        {
            "_seq": pa.array([1, 2], pa.int64()),
            "cdc$time": [str(uuid.uuid1()), str(uuid.uuid1())],
            "tags": pa.array([["x"], []], pa.list_(pa.string())),
            "props": pa.array([[("k", 1)], []], pa.map_(pa.string(), pa.int32())),
        }
    )
    written = write_data_file(tmp_path, "log/t", rows, 0)
    path = table_dir(tmp_path, "log/t") / written.path
    group = pq.read_metadata(path).row_group(0)
    codecs = {
        group.column(i).path_in_schema: group.column(i).compression
        for i in range(group.num_columns)
    }
    assert codecs.pop("cdc$time") == "UNCOMPRESSED"
    assert set(codecs) >= {"_seq", "tags.list.element", "props.key_value.value", "_ticks"}
    assert set(codecs.values()) == {"SNAPPY"}
    assert pq.read_table(path).select(rows.column_names).equals(rows)


def test_a_data_file_is_named_for_the_buckets_its_rows_hold(tmp_path: Path) -> None:
    one = write_data_file(tmp_path, "base/t", _rows([4, 4], [b"a", b"b"], 1), 12)
    run = write_data_file(tmp_path, "base/t", _rows([2, 3, 9], [b"a", b"b", b"c"], 1), 12)
    log = write_data_file(tmp_path, "log/t", pa.table({"_bucket": [5, 7], "_seq": [1, 2]}), 3)
    unbucketed = write_data_file(tmp_path, "feed/t/f", pa.table({"offset": [1]}), 3)
    assert one.path.startswith("part-0000000012-b00004-")
    assert run.path.startswith("part-0000000012-b00002-00009-")
    assert [buckets_of_name(f.path) for f in (one, run, log, unbucketed)] == [
        (4, 4),
        (2, 9),
        (5, 7),
        (0, 0),
    ]
    assert [batch_of_name(f.path) for f in (one, run, log)] == [12, 12, 3]
    assert buckets_of_name("part-00001-c000.snappy.parquet") is None
    assert bucket_range(pa.table({"x": [1]})) is None
