"""Ingest files written by bucket: a task reads only its buckets' row groups, verified."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cqlcdc.datadir.commit import FORMAT, MANIFEST_NAME, Manifest
from cqlcdc.datadir.ingest import (
    FailedAppends,
    Handoff,
    IngestFile,
    IngestLog,
    ingest_file_name,
    read_ingest_file,
)
from cqlcdc.datadir.records import IngestRecord
from cqlcdc.errors import CorruptIngestFile, ServerError
from cqlcdc.location import Location


def _records(buckets: list[int], first_seq: int = 1) -> list[IngestRecord]:
    return [
        IngestRecord(first_seq + i, "t", 1, b, b * 1000 + i, bytes([b, i]), b"payload %d" % i)
        for i, b in enumerate(buckets)
    ]


def _seqs(path: Path, share: set[int] | None = None) -> list[int]:
    table = read_ingest_file(path, None if share is None else share.__contains__)
    return table.column("seq").to_pylist()


def test_a_bulk_append_is_one_row_group_per_bucket_and_a_share_reads_only_its_own(
    tmp_path: Path,
) -> None:
    log = IngestLog(tmp_path)
    buckets = [0, 0, 2, 2, 2, 5, 7, 7]  # bucket by bucket, as bulk chunks come
    log.append(_records(buckets))
    path = log.files()[0].path.path
    assert pq.ParquetFile(path).metadata.num_row_groups == 4
    assert _seqs(path) == list(range(1, 9))
    assert _seqs(path, {2, 7}) == [3, 4, 5, 7, 8]
    assert _seqs(path, {1}) == []
    # what the shares read, together, is the file
    parts = [_seqs(path, {b for b in range(8) if b % 2 == k}) for k in (0, 1)]
    assert sorted(parts[0] + parts[1]) == _seqs(path)


def test_interleaved_buckets_stay_one_row_group_and_are_filtered(tmp_path: Path) -> None:
    log = IngestLog(tmp_path)
    log.append(_records([3, 1, 3, 0, 1]))
    path = log.files()[0].path.path
    assert pq.ParquetFile(path).metadata.num_row_groups == 1
    assert _seqs(path, {1}) == [2, 5]
    assert _seqs(path, {3, 0}) == [1, 3, 4]


def test_a_share_still_checks_the_seq_range_against_the_name(tmp_path: Path) -> None:
    log = IngestLog(tmp_path)
    log.append(_records([0, 1, 2]))
    path = log.files()[0].path.path
    wrong = path.with_name(ingest_file_name(1, 4))
    path.rename(wrong)
    with pytest.raises(CorruptIngestFile, match=r"its name promises 1\.\.4"):
        read_ingest_file(wrong, {2}.__contains__)
    with pytest.raises(CorruptIngestFile, match=r"its name promises 1\.\.4"):
        read_ingest_file(wrong)


def test_a_damaged_row_group_fails_the_task_that_reads_it(tmp_path: Path) -> None:
    log = IngestLog(tmp_path)
    log.append(_records([0] * 50 + [1] * 50))
    path = log.files()[0].path.path
    meta = pq.ParquetFile(path).metadata
    second = meta.row_group(1).column(6)  # the payload column of bucket 1's row group
    start = second.dictionary_page_offset or second.data_page_offset
    at = start + second.total_compressed_size - 3  # inside its last page's data
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))
    assert _seqs(path, {0}) == list(range(1, 51))  # bucket 0's pages are intact
    with pytest.raises(CorruptIngestFile):
        read_ingest_file(path, {1}.__contains__)


def test_a_manifest_of_another_format_is_refused_and_ours_says_its_format(tmp_path: Path) -> None:
    manifest = Manifest(batch_id=3, max_seq=9, versions={"base/t": 2})
    manifest.save(tmp_path)
    saved = json.loads((tmp_path / MANIFEST_NAME).read_text())
    assert saved["format"] == FORMAT == 3
    assert Manifest.load(tmp_path).versions == {"base/t": 2}
    # format 1 (pickled row-path records) is not migrated: refused, saying why
    for old in ({"format": 1}, {}):  # a manifest without a format is format 1
        body = {k: v for k, v in saved.items() if k != "format"} | old
        (tmp_path / MANIFEST_NAME).write_text(json.dumps(body))
        with pytest.raises(ServerError, match=r"format 1 \(written by an older cqlcdc.*pickles"):
            Manifest.load(tmp_path)
    # format 2 (base state as encoded fragments) neither
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(saved | {"format": 2}))
    with pytest.raises(ServerError, match=r"format 2 \(written by an older cqlcdc.*fragments"):
        Manifest.load(tmp_path)
    saved["format"] = FORMAT + 1
    (tmp_path / MANIFEST_NAME).write_text(json.dumps(saved))
    with pytest.raises(ServerError, match=f"has format {FORMAT + 1} .written by a newer cqlcdc"):
        Manifest.load(tmp_path)


def _damage(path: Path) -> None:
    """Flip a byte inside the payload data of the first row group (its checksum fails)."""
    column = pq.ParquetFile(path).metadata.row_group(0).column(6)
    start = column.dictionary_page_offset or column.data_page_offset
    data = bytearray(path.read_bytes())
    data[start + column.total_compressed_size - 3] ^= 0xFF
    path.write_bytes(bytes(data))


def test_the_engine_takes_an_append_it_was_handed_once_then_reads_the_file(
    tmp_path: Path,
) -> None:
    handoff = Handoff()
    log = IngestLog(tmp_path, handoff)
    other = IngestLog(tmp_path)  # another process's log: its appends are not held
    log.append(_records([0, 1, 1]))
    other.append(_records([3], first_seq=4))
    path, others = (f.path.path for f in log.files())
    assert handoff.take(others) is None
    _damage(path)  # what the engine takes is what was appended, not read back
    assert handoff.read(path).column("seq").to_pylist() == [1, 2, 3]
    with pytest.raises(CorruptIngestFile, match=path.name):  # taken once: now from the file
        handoff.read(path)


def test_held_appends_are_bounded_and_dropped_when_trimmed(tmp_path: Path) -> None:
    handoff = Handoff(limit_bytes=1)  # holds at most the latest append
    log = IngestLog(tmp_path, handoff)
    log.append(_records([0], first_seq=1))
    log.append(_records([0], first_seq=2))
    first, second = (f.path.path for f in log.files())
    assert handoff.take(first) is None
    log.trim(2)
    assert handoff.take(second) is None


def test_a_failed_append_leaves_no_partial_file_and_the_next_one_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk: the temp file is removed (its space given back), the log stays where
    it was, and a later append of later seqs succeeds, leaving a gap for the failed ones."""
    log = IngestLog(tmp_path)
    log.append(_records([0, 1]))
    written = pq.ParquetWriter.write_table

    def full(self: pq.ParquetWriter, *args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pq.ParquetWriter, "write_table", full)
    with pytest.raises(OSError, match="No space left"):
        log.append(_records([3], first_seq=3))
    assert sorted(p.name for p in tmp_path.iterdir()) == [ingest_file_name(1, 2)]
    assert log.last_seq() == 2
    monkeypatch.setattr(pq.ParquetWriter, "write_table", written)
    log.append(_records([4, 4], first_seq=4))
    assert [(f.first_seq, f.last_seq) for f in log.files()] == [(1, 2), (4, 5)]
    assert IngestLog(tmp_path).last_seq() == 5  # as a restart finds it


def test_failed_appends_merge_and_are_skipped_by_readers() -> None:
    failed = FailedAppends(limit=2)
    disk = OSError(28, "No space left on device")
    failed.add(3, 4, disk)
    failed.add(5, 6, disk)  # no success between: one range
    failed.add(9, 9, disk)
    assert [failed.failure_of(s) is disk for s in range(2, 11)] == [
        False, True, True, True, True, False, False, True, False,
    ]  # fmt: skip
    assert failed.last_before(9) == 8
    assert failed.last_before(6) == 2
    assert failed.last_before(7) == 7
    failed.add(12, 12, disk)  # past the limit: the oldest range is forgotten
    assert failed.failure_of(4) is None and failed.failure_of(12) is disk


def test_the_log_in_an_object_store_appends_reads_and_trims(s3_data_dir: Location) -> None:
    """One object per append under its final name; a trim deletes in one request and
    leaves no empty "directory" marker behind; the end survives a trim of every file."""
    seen: list[list[IngestFile]] = []
    log = IngestLog(s3_data_dir / "ingest", on_append=seen.append)
    log.append(_records([0, 1], first_seq=1))
    log.append(_records([2], first_seq=3))
    names = [f.path.name for f in log.files()]
    assert names == [f"{1:020d}-{2:020d}.parquet", f"{3:020d}-{3:020d}.parquet"]
    assert [[f.path.name for f in files] for files in seen[1:]] == [[n] for n in names]
    assert read_ingest_file(log.files()[0].path).column("seq").to_pylist() == [1, 2]
    assert [f.name for f in log.trim(2)] == names[:1]
    assert [f.path.name for f in log.files()] == names[1:]
    log.trim(3)
    assert (s3_data_dir / "ingest").list_names() == ["_trimmed_upto_seq"]
    assert IngestLog(s3_data_dir / "ingest").last_seq() == 3
