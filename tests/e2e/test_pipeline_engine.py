"""The pipeline end to end: ingest log -> streaming engine -> Delta commits -> snapshots."""

from __future__ import annotations

import collections
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import cqlcdc
from cqlcdc.bucket_groups import BucketGroup
from cqlcdc.datadir.commit import MANIFEST_NAME, Manifest
from cqlcdc.datadir.ingest import IngestLog, read_ingest_file
from cqlcdc.datadir.records import BucketProcessor, IngestRecord, StateReader
from cqlcdc.errors import CorruptIngestFile, InvalidRequest, WriteTimeout
from cqlcdc.pipeline import Engine, EngineConfig
from cqlcdc.pipeline import engine as engine_module
from cqlcdc.pipeline.engine import INGEST_DDL

# Python workers (the executor path) must import cqlcdc; they inherit the driver's environment.
_SRC = str(Path(next(iter(cqlcdc.__path__))).parent)
if _SRC not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (_SRC, os.environ.get("PYTHONPATH")) if p)


@pytest.fixture(scope="module", autouse=True)
def _ship_module_by_value() -> None:
    from pyspark import cloudpickle

    # the test processor lives in this module, which workers cannot import: ship it by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])


class EchoProcessor(BucketProcessor):
    """Appends every record to ``echo/<table_id>`` with ``nth``, the number of earlier records
    of its pk (read back through the StateReader), and the running count per pk to
    ``pkcount/<table_id>``."""

    def process_bucket(self, group: BucketGroup, state: StateReader) -> dict[str, pa.Table]:
        table_id, bucket, records = group.table_id, group.bucket, group.records
        echo = f"echo/{table_id}"
        pks: list[bytes] = records.column("pk").to_pylist()
        prior = state.read(echo, bucket, sorted(set(pks)))
        counts: collections.Counter[bytes] = collections.Counter()
        if prior.num_rows:
            counts.update(prior.column("pk").to_pylist())
        nth = []
        for pk in pks:
            nth.append(counts[pk])
            counts[pk] += 1
        touched = sorted(set(pks))
        return {
            echo: pa.table(
                {
                    "bucket": pa.array([bucket] * records.num_rows, pa.int32()),
                    "pk": records.column("pk"),
                    "seq": records.column("seq"),
                    "payload": records.column("payload"),
                    "nth": pa.array(nth, pa.int64()),
                }
            ),
            f"pkcount/{table_id}": pa.table(
                {
                    "bucket": pa.array([bucket] * len(touched), pa.int32()),
                    "pk": pa.array(touched, pa.binary()),
                    "count": pa.array([counts[pk] for pk in touched], pa.int64()),
                }
            ),
        }


def _records(first_seq: int, count: int, table_id: str = "ks.t") -> list[IngestRecord]:
    # pk k<i%5> always falls in the same bucket, as a token bucket would
    out = []
    for seq in range(first_seq, first_seq + count):
        key = seq % 5
        out.append(
            IngestRecord(seq, table_id, 1, key % 3, key * 1000 - 2000, b"k%d" % key, b"p%d" % seq)
        )
    return out


def _echo_rows(table: pa.Table) -> list[tuple[int, bytes, int]]:
    return sorted(
        zip(
            table.column("seq").to_pylist(),
            table.column("pk").to_pylist(),
            table.column("nth").to_pylist(),
        )
    )


def _expected(seqs: Iterable[int]) -> list[tuple[int, bytes, int]]:
    seen: collections.Counter[int] = collections.Counter()
    out = []
    for seq in seqs:
        out.append((seq, b"k%d" % (seq % 5), seen[seq % 5]))
        seen[seq % 5] += 1
    return out


# --- the ingest log (no Spark) ------------------------------------------------------------


def test_ingest_log_recovers_last_seq_and_trims(tmp_path: Path) -> None:
    log = IngestLog(tmp_path / "ingest")
    assert log.last_seq() == 0
    log.append(_records(1, 3))
    log.append(_records(4, 2))
    assert [f.path.name for f in log.files()] == [
        f"{1:020d}-{3:020d}.parquet",
        f"{4:020d}-{5:020d}.parquet",
    ]
    with pytest.raises(InvalidRequest):
        log.append(_records(5, 1))
    reopened = IngestLog(tmp_path / "ingest")
    assert reopened.last_seq() == 5
    assert read_ingest_file(reopened.files()[0].path).column("seq").to_pylist() == [1, 2, 3]
    assert [p.name for p in reopened.trim(4)] == [f"{1:020d}-{3:020d}.parquet"]
    reopened.trim(5, archive_dir=tmp_path / "archive")
    assert reopened.files() == []
    assert len(list((tmp_path / "archive").iterdir())) == 1
    assert IngestLog(tmp_path / "ingest").last_seq() == 5


def test_truncated_ingest_file_is_reported_on_reopen(tmp_path: Path) -> None:
    log = IngestLog(tmp_path / "ingest")
    log.append(_records(1, 3))
    path = log.files()[0].path.path
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(CorruptIngestFile, match=path.name):
        IngestLog(tmp_path / "ingest")


# --- the engine -----------------------------------------------------------------------------


@pytest.mark.spark
def test_records_flow_end_to_end_and_wait_for(spark: Any, tmp_path: Path) -> None:
    engine = Engine(tmp_path, EchoProcessor(), spark)
    log = engine.open_ingest_log()
    with engine:
        for first in (1, 8, 15):
            log.append(_records(first, 7))
        engine.wait_for(21, timeout=60)
        snapshot = engine.snapshot()
        assert snapshot.max_seq >= 21
        assert _echo_rows(snapshot.read("echo/ks.t")) == _expected(range(1, 22))
        counts = snapshot.read("pkcount/ks.t")
        # the last count row per pk says how many records it has
        last = {}
        for pk, count in zip(counts.column("pk").to_pylist(), counts.column("count").to_pylist()):
            last[pk] = max(count, last.get(pk, 0))
        assert last == {b"k%d" % k: 4 + (1 <= k <= 1) for k in range(5)}
        with pytest.raises(WriteTimeout):
            engine.wait_for(22, timeout=0.3)
        assert engine.query is not None and engine.query.exception() is None


@pytest.mark.spark
def test_a_first_batch_runs_at_start_with_nothing_written(spark: Any, tmp_path: Path) -> None:
    """Spark's first batch costs seconds (planning the source's reads, the first
    foreachBatch call): the query runs one at start, so a first write's wait does not."""
    with Engine(tmp_path, EchoProcessor(), spark) as engine:
        assert engine._ran_batch.wait(60)
        assert engine.committed_seq() == 0  # it had nothing to commit


@pytest.mark.spark
def test_the_batch_interval_holds_writes_back_until_someone_waits(
    spark: Any, tmp_path: Path
) -> None:
    """With a batch interval (an object store's default), appended records are not shown to
    the source until the interval passes, unless a wait asks for them: then at once."""
    from cqlcdc.pipeline import ingest_source

    engine = Engine(tmp_path, EchoProcessor(), spark, EngineConfig(batch_interval_s=3600))
    log = engine.open_ingest_log()
    with engine:
        log.append(_records(1, 7))
        log.append(_records(8, 7))
        assert ingest_source.read_tip(engine.tip) == 0  # held back: the hour has not passed
        assert engine.committed_seq() == 0
        engine.wait_for(14, timeout=60)  # a reader waits: shown now, committed
        assert ingest_source.read_tip(engine.tip) == 14
        assert _echo_rows(engine.snapshot().read("echo/ks.t")) == _expected(range(1, 15))
    paced = Engine(tmp_path, EchoProcessor(), spark, EngineConfig(batch_interval_s=0.2))
    log = paced.open_ingest_log()
    with paced:
        log.append(_records(15, 3))
        # no one waits: the timer shows them once the interval has passed
        deadline = time.monotonic() + 60
        while paced.committed_seq() < 17 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert paced.committed_seq() == 17


@pytest.mark.spark
def test_an_object_store_trims_the_ingest_log_64_files_at_a_time(
    spark: Any, s3_data_dir: Any
) -> None:
    """A trim request per batch would cost as much as the batch's manifest: in an object
    store the committed ingest files go once 64 of them are done with, in one request."""
    engine = Engine(s3_data_dir, EchoProcessor(), spark)  # not started: trims by hand
    log = engine.open_ingest_log()
    for seq in range(1, 71):
        log.append(_records(seq, 1))
    engine.ingest_files.trim(63)
    assert len(log.files()) == 70
    engine.ingest_files.trim(64)
    assert [f.first_seq for f in log.files()] == list(range(65, 71))


@pytest.mark.spark
def test_snapshot_reads_stay_at_their_version(spark: Any, tmp_path: Path) -> None:
    engine = Engine(tmp_path, EchoProcessor(), spark)
    log = engine.open_ingest_log()
    with engine:
        log.append(_records(1, 5))
        engine.wait_for(5, timeout=60)
        before = engine.snapshot()
        log.append(_records(6, 5))
        engine.wait_for(10, timeout=60)
        after = engine.snapshot()
    assert before.version_of("echo/ks.t") is not None
    assert after.version_of("echo/ks.t") > before.version_of("echo/ks.t")  # type: ignore[operator]
    assert before.version_of("nothing/here") is None
    assert before.read("nothing/here").num_rows == 0
    assert _echo_rows(before.read("echo/ks.t")) == _expected(range(1, 6))
    assert _echo_rows(after.read("echo/ks.t")) == _expected(range(1, 11))
    assert before.read("echo/ks.t", filters=[("seq", ">", 3)]).num_rows == 2
    # every table of a snapshot is at the same batch: echo and pkcount agree
    counted = before.read("pkcount/ks.t")
    assert int(pc.max(counted.column("count")).as_py()) == 1


@pytest.mark.spark
def test_restart_loses_nothing_and_duplicates_nothing(spark: Any, tmp_path: Path) -> None:
    with Engine(tmp_path, EchoProcessor(), spark) as engine:
        engine.open_ingest_log().append(_records(1, 6))
        engine.wait_for(6, timeout=60)
    IngestLog(tmp_path / "ingest").append(_records(7, 6))  # written while no engine runs
    restarted = Engine(tmp_path, EchoProcessor(), spark)
    assert restarted.committed_seq() == 6
    with restarted:
        restarted.open_ingest_log().append(_records(13, 3))
        restarted.wait_for(15, timeout=60)
        rows = _echo_rows(restarted.snapshot().read("echo/ks.t"))
    assert rows == _expected(range(1, 16))


def _batch_frame(spark: Any, log: IngestLog) -> Any:
    return spark.read.schema(INGEST_DDL).parquet(*[str(f.path) for f in log.files()])


@pytest.mark.spark
def test_replayed_batch_is_not_committed_twice(spark: Any, tmp_path: Path) -> None:
    engine = Engine(tmp_path, EchoProcessor(), spark)
    log = engine.open_ingest_log()
    log.append(_records(1, 10))
    frame = _batch_frame(spark, log)
    engine.process_batch(frame, 0)
    first = engine.snapshot()
    engine.process_batch(frame, 0)
    assert engine.snapshot().manifest == first.manifest
    # a crash after the tables committed but before the manifest: the tables see the replay
    (tmp_path / MANIFEST_NAME).unlink()
    fresh = Engine(tmp_path, EchoProcessor(), spark)
    fresh.process_batch(frame, 0)
    snapshot = fresh.snapshot()
    assert snapshot.manifest == first.manifest
    assert _echo_rows(snapshot.read("echo/ks.t")) == _expected(range(1, 11))
    assert not [
        p
        for p in (tmp_path / "tables" / "echo" / "ks.t").glob("*.parquet")
        if p.name not in {Path(u).name for u in _file_uris(tmp_path, "echo/ks.t")}
    ]


def _file_uris(data_dir: Path, output: str) -> list[str]:
    from deltalake import DeltaTable

    return list(DeltaTable(str(data_dir / "tables" / output)).file_uris())


class _Crash(BaseException):
    """The process dying mid-batch (not an error of the batch: nothing is contained)."""


@pytest.mark.spark
def test_crash_between_table_commits_replays_exactly_once(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = Engine(tmp_path, EchoProcessor(), spark)
    log = engine.open_ingest_log()
    log.append(_records(1, 5))
    engine.process_batch(_batch_frame(spark, log), 0)
    log.append(_records(6, 5))
    second = spark.read.schema(INGEST_DDL).parquet(str(log.files()[-1].path))

    real_commit = engine_module.commit_output

    def crash_on_pkcount(*args: Any, **kwargs: Any) -> Any:
        if args[1].startswith("pkcount/"):
            raise _Crash("simulated crash")
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(engine_module, "commit_output", crash_on_pkcount)
    with pytest.raises(_Crash, match="simulated crash"):
        engine.process_batch(second, 1)
    assert Manifest.load(tmp_path).batch_id == 0  # echo committed, pkcount not, no manifest
    monkeypatch.setattr(engine_module, "commit_output", real_commit)

    restarted = Engine(tmp_path, EchoProcessor(), spark)
    restarted.process_batch(second, 1)
    snapshot = restarted.snapshot()
    assert snapshot.batch_id == 1
    assert _echo_rows(snapshot.read("echo/ks.t")) == _expected(range(1, 11))
    counts = snapshot.read("pkcount/ks.t", filters=[("count", "=", 2)])
    assert sorted(counts.column("pk").to_pylist()) == [b"k%d" % k for k in range(5)]


@pytest.mark.spark
def test_a_driver_restarted_without_its_checkpoint_commits_the_cut_batch_as_it_was(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash between two outputs' commits of the first batch (seqs 1..5), then more
    writes, then a driver with no local state: its first Spark batch reaches seq 10. The
    engine commits 1..5 as that batch again (echo has it already and skips it by batch id;
    pkcount takes it), then 6..10 as the next: nothing lost where echo skipped, nothing
    doubled."""
    engine = Engine(tmp_path, EchoProcessor(), spark)
    log = engine.open_ingest_log()
    log.append(_records(1, 5))
    real_commit = engine_module.commit_output

    def crash_on_pkcount(*args: Any, **kwargs: Any) -> Any:
        if args[1].startswith("pkcount/"):
            raise _Crash("simulated crash")
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(engine_module, "commit_output", crash_on_pkcount)
    with pytest.raises(_Crash):
        engine.process_batch(_batch_frame(spark, log), 0)
    monkeypatch.setattr(engine_module, "commit_output", real_commit)
    assert Manifest.load(tmp_path).batch_id == -1  # nothing committed everywhere
    IngestLog(tmp_path / "ingest").append(_records(6, 5))  # while no driver runs

    restarted = Engine(tmp_path, EchoProcessor(), spark)  # a fresh scratch directory
    with restarted:
        restarted.wait_for(10, timeout=60)
        snapshot = restarted.snapshot()
    assert snapshot.batch_id == 1  # the cut batch 0, then 1
    assert _echo_rows(snapshot.read("echo/ks.t")) == _expected(range(1, 11))
    counts = snapshot.read("pkcount/ks.t")
    last: dict[bytes, int] = {}
    for pk, count in zip(counts.column("pk").to_pylist(), counts.column("count").to_pylist()):
        last[pk] = max(count, last.get(pk, 0))
    assert last == {b"k%d" % k: 2 for k in range(5)}


@pytest.mark.spark
def test_executor_path_matches_driver_path(spark: Any, tmp_path: Path) -> None:
    results = {}
    for name, threshold in (("driver", 10**9), ("executors", 0)):
        data_dir = tmp_path / name
        engine = Engine(data_dir, EchoProcessor(), spark, EngineConfig(driver_max_rows=threshold))
        log = engine.open_ingest_log()
        log.append(_records(1, 40) + _records(41, 20, table_id="ks.u"))
        engine.process_batch(_batch_frame(spark, log), 0)
        log.append(_records(61, 30))
        engine.process_batch(spark.read.schema(INGEST_DDL).parquet(str(log.files()[-1].path)), 1)
        snapshot = engine.snapshot()
        assert snapshot.max_seq == 90
        results[name] = {
            output: snapshot.read(output).sort_by([("pk", "ascending"), ("bucket", "ascending")])
            for output in snapshot.outputs()
        }
        if name == "executors":
            last = engine.batch_timings.last
            assert last is not None and last["rows"] == 30.0
    assert set(results["driver"]) == {"echo/ks.t", "echo/ks.u", "pkcount/ks.t", "pkcount/ks.u"}
    for output, table in results["driver"].items():
        other = results["executors"][output]
        assert sorted(map(str, table.to_pylist())) == sorted(map(str, other.to_pylist()))
    assert _echo_rows(results["executors"]["echo/ks.t"]) == _expected(
        seq for seq in range(1, 91) if not 41 <= seq <= 60
    )


@pytest.mark.spark
def test_corrupt_ingest_file_fails_the_query_naming_it(spark: Any, tmp_path: Path) -> None:
    log = IngestLog(tmp_path / "ingest")  # another process's append: read from the file
    log.append(_records(1, 3))
    engine = Engine(tmp_path, EchoProcessor(), spark)
    damaged = log.files()[0].path.path
    body = bytearray(damaged.read_bytes())
    body[len(body) // 2 : len(body) // 2 + 8] = b"\xff" * 8
    damaged.write_bytes(bytes(body))
    with engine, pytest.raises(CorruptIngestFile, match=damaged.name):
        engine.wait_for(3, timeout=60)


class FailingProcessor(BucketProcessor):
    def process_bucket(self, group: BucketGroup, state: StateReader) -> dict[str, pa.Table]:
        raise ValueError(f"cannot decode a mutation of {group.table_id}")


@pytest.mark.spark
def test_a_failing_table_is_stopped_and_its_records_held(spark: Any, tmp_path: Path) -> None:
    engine = Engine(tmp_path, FailingProcessor(), spark)
    engine.open_ingest_log().append(_records(1, 2))
    with engine:
        engine.wait_for(2, timeout=60)  # committed: held, not applied
        assert engine.stopped["ks.t"].first_seq == 1
        snap = engine.snapshot()
        errors = snap.read("errors").sort_by("seq")
        assert errors.column("seq").to_pylist() == [1, 2]
        assert all("cannot decode a mutation of ks.t" in m for m in errors["message"].to_pylist())
        assert sorted(snap.read("held").column("seq").to_pylist()) == [1, 2]
    assert Engine(tmp_path, FailingProcessor(), spark).stopped["ks.t"].first_seq == 1


class DiskFullProcessor(EchoProcessor):
    """Meets a full disk while ``full`` is set, then applies records as EchoProcessor."""

    def __init__(self) -> None:
        super().__init__()
        self.full = True
        self.attempts = 0

    def process_bucket(self, group: BucketGroup, state: StateReader) -> dict[str, pa.Table]:
        self.attempts += 1
        if self.full:
            raise OSError(28, "No space left on device")
        return super().process_bucket(group, state)


@pytest.mark.spark
def test_a_failure_of_the_machine_is_retried_until_it_clears(spark: Any, tmp_path: Path) -> None:
    """A full disk neither stops the query nor a table: the batch is retried (capped
    backoff) while writers wait, and applied once, exactly, when space returns."""
    processor = DiskFullProcessor()
    engine = Engine(tmp_path, processor, spark)
    engine.open_ingest_log().append(_records(1, 2))
    with engine:
        with pytest.raises(WriteTimeout, match=r"retrying after OSError.*No space left"):
            engine.wait_for(2, timeout=8)
        assert processor.attempts >= 3 and engine.stopped == {}
        processor.full = False  # space again
        engine.wait_for(2, timeout=60)
        assert _echo_rows(engine.snapshot().read("echo/ks.t")) == _expected([1, 2])
    assert engine.stopped == {}


@pytest.mark.spark
def test_a_refused_commit_stops_its_table_and_recover_undoes_what_it_left(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pkcount/ks.u`` refuses batch 2 after ``echo/ks.u`` took it: ks.u stops, ks.t goes
    on; a retry undoes the stray commit and applies each record exactly once."""
    from cqlcdc.datadir.containment import resume_table

    engine = Engine(tmp_path, EchoProcessor(), spark)
    log = engine.open_ingest_log()
    with engine:
        log.append(_records(1, 4) + _records(5, 4, "ks.u"))
        engine.wait_for(8, timeout=60)
        real_commit = engine_module.commit_output

        def refusing(tables_dir: Any, output: str, *args: Any) -> Any:
            if output == "pkcount/ks.u":
                raise ValueError("Schema error: the output refuses these rows")
            return real_commit(tables_dir, output, *args)

        monkeypatch.setattr(engine_module, "commit_output", refusing)
        log.append(_records(9, 4, "ks.u") + _records(13, 4))
        engine.wait_for(16, timeout=60)
        assert engine.stopped["ks.u"].first_seq == 9
        assert "refuses these rows" in engine.stopped["ks.u"].error
        snap = engine.snapshot()
        t_seqs = sorted(snap.read("echo/ks.t").column("seq").to_pylist())
        assert t_seqs == [1, 2, 3, 4, 13, 14, 15, 16]
        assert sorted(snap.read("echo/ks.u").column("seq").to_pylist()) == [5, 6, 7, 8]
        stray = engine_module.DeltaTable(str(tmp_path / "tables" / "echo" / "ks.u"))
        assert stray.version() > snap.version_of("echo/ks.u")  # what the failed try left
    monkeypatch.setattr(engine_module, "commit_output", real_commit)
    entry, held = resume_table(tmp_path, "ks.u", retry=True)
    assert (entry.table, held) == ("ks.u", 4)
    engine = Engine(tmp_path, EchoProcessor(), spark)
    with engine:
        engine.wait_for(20, timeout=60)
        assert engine.stopped == {}
        echo = engine.snapshot().read("echo/ks.u").sort_by("seq")
        # the held records, appended again as seqs 17..20, each applied once
        assert echo.column("seq").to_pylist() == [5, 6, 7, 8, 17, 18, 19, 20]
        assert echo.column("payload").to_pylist() == [
            r.payload for r in _records(5, 4, "ks.u") + _records(9, 4, "ks.u")
        ]


class StagingProcessor(EchoProcessor):
    """Stages ``pkcount`` as ``stage/<table_id>``; finalizing the stage of ks.u fails."""

    def process_bucket(self, group: BucketGroup, state: StateReader) -> dict[str, pa.Table]:
        out = super().process_bucket(group, state)
        table_id = group.table_id
        out[f"stage/{table_id}"] = out[f"pkcount/{table_id}"]
        return out

    def is_staged(self, output: str) -> bool:
        return output.startswith("stage/")

    def finalize_batch(
        self, batch_id: int, max_seq: int, staged: dict[str, pa.Table], extra: dict[str, Any]
    ) -> tuple[dict[str, pa.Table], dict[str, Any]]:
        if "stage/ks.u" in staged:
            raise ValueError("cannot finalize the stage of ks.u")
        final = {name.replace("stage/", "final/"): rows for name, rows in staged.items()}
        return final, {**extra, "passes": int(extra.get("passes", 0)) + 1}


@pytest.mark.spark
def test_a_failing_finalize_stops_only_its_table(spark: Any, tmp_path: Path) -> None:
    engine = Engine(tmp_path, StagingProcessor(), spark)
    engine.open_ingest_log().append(_records(1, 4) + _records(5, 4, "ks.u"))
    with engine:
        engine.wait_for(8, timeout=60)
        assert "cannot finalize the stage of ks.u" in engine.stopped["ks.u"].error
        snap = engine.snapshot()
        assert snap.read("final/ks.t").num_rows == 4
        assert snap.version_of("final/ks.u") is None
        assert sorted(snap.read("held").column("seq").to_pylist()) == [5, 6, 7, 8]
        assert Manifest.load(tmp_path).extra == {"passes": 1}
