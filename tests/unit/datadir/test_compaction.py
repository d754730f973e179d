"""Compaction of files of several buckets (a small micro-batch's one file per output): their
rows are rewritten in one commit that removes them, a bucket's rows into a file of its own
once they fill ``alone_rows`` (joined with that bucket's own small files), the others into
a shared file of consecutive buckets; the rows of every bucket are equal before and after
(merged per partition where the output is mergeable)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from cqlcdc.datadir.commit import (
    VersionedReader,
    buckets_of_name,
    commit_output,
    table_dir,
    write_data_file,
)
from cqlcdc.datadir.compaction import CompactionPolicy, Compactor, bucket_of_name
from cqlcdc.datadir.file_runs import BucketRuns
from cqlcdc.errors import ServerError


class LastWins:
    """A processor whose ``base/`` outputs merge to the newest row of each partition (the
    shape of the core's merge: one row per partition); other outputs are only joined."""

    def compact_rows(self, output: str, rows: pa.Table) -> pa.Table | None:
        if not output.startswith("base/"):
            return None
        newest = rows.group_by(["bucket", "pk"]).aggregate([("seq", "max")])
        keys = pa.table({"bucket": newest["bucket"], "pk": newest["pk"], "seq": newest["seq_max"]})
        return rows.join(keys, ["bucket", "pk", "seq"], join_type="inner").sort_by(
            [("bucket", "ascending"), ("pk", "ascending")]
        )


def _batch(first_seq: int, buckets: list[int], column: str) -> pa.Table:
    """One row per bucket and two partitions (pk) per bucket, seqs from ``first_seq``."""
    rows = [(b, f"p{b}-{i}".encode()) for b in buckets for i in range(2)]
    return pa.table(
        {
            column: pa.array([b for b, _ in rows], pa.int32()),
            "pk": pa.array([pk for _, pk in rows], pa.binary()),
            "seq": pa.array(range(first_seq, first_seq + len(rows)), pa.int64()),
        }
    )


def _commit_batches(root: Path, output: str, column: str, compactor: Compactor) -> None:
    """Six micro-batches as the engine writes them: small ones (a file of several buckets
    each, through ``BucketRuns``) and one bulk-like bucket file of its own."""
    plans = [[0, 1, 3], [1, 2, 3], [0, 3], [2], [0, 1, 2, 3], [1, 3]]
    for batch_id, buckets in enumerate(plans):
        rows = _batch(100 * batch_id, buckets, column)
        runs = BucketRuns()
        for bucket in buckets:
            assert runs.add(output, bucket, rows.filter(pc.equal(rows[column], bucket))) == []
        files = [write_data_file(root, output, run, batch_id) for _, run in runs.drain()]
        table = commit_output(root, output, files, "app", batch_id)
        compactor.note_commit(output, files, table)


def _files(root: Path, output: str) -> list[str]:
    return sorted(DeltaTable(str(table_dir(root, output))).file_uris())


def _bucket_rows(root: Path, output: str, column: str, bucket: int) -> list[tuple[bytes, int]]:
    table = DeltaTable(str(table_dir(root, output)))
    rows = table.to_pyarrow_table(filters=[(column, "=", bucket)])
    return sorted(zip(rows["pk"].to_pylist(), rows["seq"].to_pylist(), strict=True))


# rows of each bucket in the files of several buckets of ``_commit_batches``: bucket 0 is
# in those of batches 0, 2 and 4 (6 rows), 1 in 0, 1, 4, 5 (8), 2 in 1 and 4 (4; batch 3
# is a file of bucket 2 alone), 3 in all five (10). With ``alone_rows=7`` buckets 1 and 3
# get files of their own, 0 and 2 share one.
_SPLIT = CompactionPolicy(max_small_files=3, alone_rows=7)


@pytest.mark.parametrize(("output", "column"), [("log/t", "_bucket"), ("errors", "bucket")])
def test_files_of_several_buckets_are_rewritten_with_the_same_rows(
    tmp_path: Path, output: str, column: str
) -> None:
    compactor = Compactor(tmp_path, LastWins(), _SPLIT)
    _commit_batches(tmp_path, output, column, compactor)
    before = _files(tmp_path, output)
    assert any(buckets_of_name(f)[0] != buckets_of_name(f)[1] for f in before)  # type: ignore[index]
    rows_before = {b: _bucket_rows(tmp_path, output, column, b) for b in range(4)}
    # a file counts in every bucket of its range: bucket 0 is in those of batches 0, 2
    # and 4; 1 and 3 in those of 0, 1, 2, 4, 5; 2 in every one (3: its own)
    assert compactor.due() == {output: [1, 2, 3]}

    table = DeltaTable(str(table_dir(tmp_path, output)))
    assert compactor.compact(output, table, compactor.due()[output]) == 1  # one commit
    after = _files(tmp_path, output)
    # every file of several buckets covering bucket 1 or 3 (all of them) is gone
    assert not set(after) & {f for f in before if bucket_of_name(f) is None}
    assert {b: _bucket_rows(tmp_path, output, column, b) for b in range(4)} == rows_before
    assert compactor.due() == {}
    # buckets 1 and 3 in files of their own; 0 and 2 in one shared file; bucket 2's own
    # file of batch 3 left as it was (its bucket's shared rows did not fill alone_rows)
    assert sorted(buckets_of_name(f) for f in after) == [(0, 2), (1, 1), (2, 2), (3, 3)]
    assert set(after) & set(before) == {f for f in before if buckets_of_name(f) == (2, 2)}
    assert table.history(1)[0]["cqlcdc.compaction"] == f"{output} bucket 0-3"


def test_a_small_batchs_files_compact_into_one_shared_file(tmp_path: Path) -> None:
    """Buckets of a few rows each (a server's micro-batches) are compacted into one file
    of all of them, not a file per bucket: an object write per compaction, not sixteen."""
    output = "log/t"
    compactor = Compactor(tmp_path, LastWins(), CompactionPolicy(max_small_files=3))
    _commit_batches(tmp_path, output, "_bucket", compactor)
    rows_before = {b: _bucket_rows(tmp_path, output, "_bucket", b) for b in range(4)}
    table = DeltaTable(str(table_dir(tmp_path, output)))
    assert compactor.compact(output, table, compactor.due()[output]) == 1
    after = _files(tmp_path, output)
    assert sorted(buckets_of_name(f) for f in after) == [(0, 3), (2, 2)]
    assert {b: _bucket_rows(tmp_path, output, "_bucket", b) for b in range(4)} == rows_before


def test_a_small_buckets_own_files_are_joined_beside_the_shared_file(tmp_path: Path) -> None:
    """A bucket whose shared rows are few keeps them in the shared file, but its own small
    files are still joined: left alone they would keep the bucket due at every batch."""
    output = "base/t"
    compactor = Compactor(tmp_path, LastWins(), CompactionPolicy(max_small_files=3))
    _commit_batches(tmp_path, output, "bucket", compactor)
    rows = _batch(600, [2], "bucket")  # a second file of bucket 2 alone
    file = write_data_file(tmp_path, output, rows, 6)
    compactor.note_commit(output, [file], commit_output(tmp_path, output, [file], "app", 6))
    table = DeltaTable(str(table_dir(tmp_path, output)))
    assert compactor.compact(output, table, compactor.due()[output]) == 1
    assert sorted(buckets_of_name(f) for f in _files(tmp_path, output)) == [(0, 3), (2, 2)]
    assert compactor.due() == {}
    # bucket 2's own files (batches 3 and 6) merged per partition: batch 6's rows
    own = next(f for f in _files(tmp_path, output) if buckets_of_name(f) == (2, 2))
    joined = pq.read_table(own)
    assert sorted(zip(joined["pk"].to_pylist(), joined["seq"].to_pylist(), strict=True)) == [
        (b"p2-0", 600),
        (b"p2-1", 601),
    ]


def test_a_mergeable_output_is_merged_per_partition_while_rewritten(tmp_path: Path) -> None:
    output = "base/t"
    compactor = Compactor(tmp_path, LastWins(), _SPLIT)
    _commit_batches(tmp_path, output, "bucket", compactor)
    rows_before = {b: _bucket_rows(tmp_path, output, "bucket", b) for b in range(4)}
    table = DeltaTable(str(table_dir(tmp_path, output)))
    assert compactor.compact(output, table, compactor.due()[output]) == 1
    versions = {output: DeltaTable(str(table_dir(tmp_path, output))).version()}
    reader = VersionedReader(tmp_path, versions)
    for bucket, rows in rows_before.items():
        newest: dict[bytes, int] = {}
        for pk, seq in rows:
            newest[pk] = max(seq, newest.get(pk, seq))
        after = _bucket_rows(tmp_path, output, "bucket", bucket)
        if bucket != 2:  # every file of the bucket merged: one row per partition
            assert after == sorted(newest.items())
        else:  # its own file of batch 3 kept beside the merged shared rows
            assert len(after) == 4
        # a state read of the bucket (the engine's) finds the newest of each partition
        read = reader.read(output, bucket, list(newest), ["pk", "seq"])
        found: dict[bytes, int] = {}
        for pk, seq in zip(read["pk"].to_pylist(), read["seq"].to_pylist(), strict=True):
            found[pk] = max(seq, found.get(pk, seq))
        assert found == newest


def test_files_of_several_buckets_none_of_them_due_are_left_alone(tmp_path: Path) -> None:
    output = "log/t"
    compactor = Compactor(tmp_path, LastWins(), CompactionPolicy(max_small_files=8))
    _commit_batches(tmp_path, output, "_bucket", compactor)
    assert compactor.due() == {}
    table = DeltaTable(str(table_dir(tmp_path, output)))
    before = _files(tmp_path, output)
    assert compactor.compact(output, table, []) == 0
    assert _files(tmp_path, output) == before


def test_an_output_without_a_bucket_column_is_compacted_as_bucket_zero(tmp_path: Path) -> None:
    output = "feed/t/x"  # feed outputs: no bucket column, files named for bucket 0
    rows = pa.table({"partition": pa.array([5, 6], pa.int32()), "seq": [1, 2]})
    compactor = Compactor(tmp_path, LastWins(), CompactionPolicy(max_small_files=1))
    for batch_id in range(3):
        file = write_data_file(tmp_path, output, rows, batch_id)
        table = commit_output(tmp_path, output, [file], "app", batch_id)
        compactor.note_commit(output, [file], table)
    assert compactor.due() == {output: [0]}
    assert compactor.compact(output, table, [0]) == 1
    assert len(_files(tmp_path, output)) == 1
    assert DeltaTable(str(table_dir(tmp_path, output))).to_pyarrow_table().num_rows == 6


def test_a_file_is_not_removed_unless_every_row_of_it_is_rewritten(tmp_path: Path) -> None:
    """A file without statistics whose name claims buckets 1-2 but holds a row of bucket 7
    (not ours: a hand-made file) stops the compaction; the table keeps every row."""
    output = "log/t"
    compactor = Compactor(tmp_path, LastWins(), CompactionPolicy(max_small_files=1))
    root = table_dir(tmp_path, output)
    for batch_id in range(2):
        rows = _batch(10 * batch_id, [1, 2, 7], "_bucket")
        file = write_data_file(tmp_path, output, rows, batch_id)
        assert buckets_of_name(file.path) == (1, 7)
        lying = file.path.replace("-00007-", "-00002-")
        (root.path / file.path).rename(root.path / lying)
        file = dataclasses.replace(file, path=lying, stats=json.dumps({"numRecords": 6}))
        table = commit_output(tmp_path, output, [file], "app", batch_id)
        compactor.note_commit(output, [file], table)
    assert compactor.due() == {output: [1, 2]}
    with pytest.raises(ServerError, match="its buckets are not what its statistics say"):
        compactor.compact(output, table, [1, 2])
    assert DeltaTable(str(root)).to_pyarrow_table().num_rows == 12


def test_a_file_named_for_several_buckets_without_a_bucket_column_is_not_split(
    tmp_path: Path,
) -> None:
    output = "log/t"
    compactor = Compactor(tmp_path, LastWins(), CompactionPolicy(max_small_files=1))
    root = table_dir(tmp_path, output)
    for batch_id in range(2):
        file = write_data_file(tmp_path, output, pa.table({"seq": [batch_id]}), batch_id)
        named = file.path.replace("-b00000-", "-b00001-00002-")
        (root.path / file.path).rename(root.path / named)
        file = dataclasses.replace(file, path=named)
        table = commit_output(tmp_path, output, [file], "app", batch_id)
        compactor.note_commit(output, [file], table)
    assert compactor.due() == {output: [1, 2]}
    with pytest.raises(ServerError, match=r"cannot split .* no bucket column"):
        compactor.compact(output, table, [1, 2])
    assert DeltaTable(str(root)).to_pyarrow_table().num_rows == 2
