"""Every durable document and table read of a data directory round-trips on a local path and
on an object store (S3 through moto): the manifest, catalog, roles, failure/skipped/stopped
records, truncations, feed scans, CDC generations, consumer offsets, and reads of Delta
tables at a version (``VersionedReader`` pickled as into an executor, ``Snapshot``)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from deltalake import DeltaTable, write_deltalake

from cqlcdc.auth.roles import RoleStore
from cqlcdc.cdc.data_dir import GENERATIONS_FILE, Truncations, load_generations
from cqlcdc.cdc.feeds import FeedScans
from cqlcdc.cdc.processor import CoreProcessor
from cqlcdc.cdc.streams import Generations
from cqlcdc.cql import parse_statement
from cqlcdc.datadir.commit import Manifest, Snapshot, VersionedReader, open_table, table_dir
from cqlcdc.datadir.compaction import _read_parquet, _write_parquet
from cqlcdc.datadir.containment import (
    HELD,
    HELD_SCHEMA,
    StoppedTable,
    _remove_tree,
    _table_outputs,
    _undo_uncommitted,
    drop_held,
    load_stopped,
    resume_table,
    save_stopped,
    stopped_reports,
)
from cqlcdc.datadir.ingest import IngestLog, read_ingest_file
from cqlcdc.datadir.recovery import (
    FAILURE_FILE,
    SKIPPED_FILE,
    Failure,
    clear_failure,
    load_failure,
    load_skipped,
    save_failure,
    skip_records,
    write_json,
)
from cqlcdc.documents import DocumentDirectory, JsonDocument
from cqlcdc.feed_reader import FeedConsumer, FeedReader
from cqlcdc.location import Location
from cqlcdc.schema import persist
from cqlcdc.schema.catalog import Catalog

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture(params=["local", "s3"])
def data_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    """A fresh data directory: a local one, then one in S3 (moto)."""
    if request.param == "local":
        return Location.of(tmp_path / "data")
    loc: Location = request.getfixturevalue("s3_data_dir")
    return loc


def _write_table(where: Location, rows: pa.Table, mode: str = "append") -> int:
    write_deltalake(where.delta_uri, rows, mode=mode, storage_options=where.delta_options())  # type: ignore[call-overload]
    return DeltaTable(where.delta_uri, storage_options=where.delta_options()).version()


def test_manifest(data_dir: Location) -> None:
    assert Manifest.load(data_dir).batch_id == -1  # nothing committed yet
    data_dir.makedirs()
    saved = Manifest(batch_id=7, max_seq=42, versions={"base/t": 3}, extra={"feeds": {"a": 1}})
    saved.save(data_dir)
    assert Manifest.load(data_dir) == saved
    assert Manifest.load(data_dir.uri) == saved  # a URI or a path names it too


def test_catalog(data_dir: Location) -> None:
    catalog = Catalog(DocumentDirectory.of(data_dir))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(parse_statement("CREATE TABLE ks.t (pk int PRIMARY KEY, v text)"), None)
    again = Catalog(DocumentDirectory.of(data_dir))
    assert again.table("ks", "t") == catalog.table("ks", "t")
    assert persist.load_document(DocumentDirectory.of(data_dir)) is not None
    catalog.execute(parse_statement("ALTER TABLE ks.t ADD w int"), None)
    again.reload()
    table = again.table("ks", "t")
    assert table is not None and "w" in [c.name for c in table.columns]


def test_roles(data_dir: Location) -> None:
    where = data_dir / "auth" / "roles.json"
    store = RoleStore(where)
    store.create_role("alice", password="wonder", login=True)
    again = RoleStore(where)
    assert again.names() == store.names()
    assert again.authenticate("alice", "wonder").name == "alice"
    assert "wonder" not in (where.read_text() or "")
    if where.is_local:
        assert where.path.stat().st_mode & 0o077 == 0  # password hashes: the owner's only


def test_failure_and_skipped(data_dir: Location) -> None:
    data_dir.makedirs()
    assert load_failure(data_dir) is None and load_skipped(data_dir) == {}
    failure = Failure(5, 7, 3, "cannot apply ingest records seq=5..7: boom")
    save_failure(data_dir, failure)
    assert load_failure(data_dir) == failure
    write_json(data_dir / SKIPPED_FILE, {"5": "skipped"})
    assert load_skipped(data_dir) == {5: "skipped"}
    clear_failure(data_dir)
    clear_failure(data_dir)  # none: nothing to do
    assert load_failure(data_dir) is None and not (data_dir / FAILURE_FILE).exists()


def test_stopped_tables(data_dir: Location) -> None:
    data_dir.makedirs()
    assert load_stopped(data_dir) == {}
    stopped = {"3f2a": StoppedTable("3f2a", "ks.t", 9, 4, "boom")}
    save_stopped(data_dir, stopped)
    assert load_stopped(data_dir) == stopped
    save_stopped(data_dir, {})  # none stopped: the file goes
    assert load_stopped(data_dir) == {} and not (data_dir / "stopped.json").exists()


def test_truncations_feed_scans_and_generations(data_dir: Location) -> None:
    data_dir.makedirs()
    truncations = Truncations(DocumentDirectory.of(data_dir))
    assert truncations.upto("t1") == 0
    truncations.truncate("t1", 17)
    assert truncations.upto("t1") == 17
    truncations.truncate("t1", 18)  # the writer sees its own change at once
    assert truncations.upto("t1") == 18
    assert (
        Truncations(DocumentDirectory.of(data_dir)).upto("t1") == 18
    )  # and so does another reader
    scans = FeedScans(DocumentDirectory.of(data_dir))
    scans.put("t1", "f", first_seq=3, last_seq=None, step=1, tx_id=9)
    assert FeedScans(DocumentDirectory.of(data_dir)).get("t1", "f") == {
        "first_seq": 3,
        "last_seq": None,
        "step": 1,
        "tx_id": 9,
    }
    made = load_generations(DocumentDirectory.of(data_dir), num_ranges=4, seed=1)
    saved = JsonDocument(data_dir / GENERATIONS_FILE)
    assert Generations.load_or_create(saved, 4, 1).generations == (made.generations)
    made.add(made.generations[-1].timestamp_ms + 1, seed=2)
    made.save(saved)
    assert len(load_generations(DocumentDirectory.of(data_dir)).generations) == 2


def test_a_pickled_processor_reads_the_same_documents(data_dir: Location) -> None:
    """What an executor does: the processor travels with its data directory's documents
    (a DocumentDirectory over a Location) and reads the catalog,
    the generations and the truncations from the data directory itself."""
    catalog = Catalog(DocumentDirectory.of(data_dir))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(parse_statement("CREATE TABLE ks.t (pk int PRIMARY KEY, v int)"), None)
    load_generations(DocumentDirectory.of(data_dir), num_ranges=4, seed=1)
    processor = CoreProcessor(DocumentDirectory.of(data_dir), catalog)
    processor.truncations.truncate("t1", 5)
    remote = pickle.loads(pickle.dumps(processor))
    assert remote.data_dir == DocumentDirectory.of(data_dir)
    assert remote.truncations.upto("t1") == 5
    assert remote.generations.generations == processor.generations.generations
    assert remote.catalog.table("ks", "t") == catalog.table("ks", "t")


def test_a_document_written_by_another_process_is_read_again(data_dir: Location) -> None:
    """On a local disk a reader notices a change by its mtime; in an object store a new
    reader (an executor's, unpickled per task) reads it anew."""
    data_dir.makedirs()
    where = data_dir / "doc.json"
    where.write_atomically('{"a": 1}')
    assert JsonDocument(where).load() == {"a": 1}
    where.write_atomically('{"a": 22}')  # not through write_document: another process
    assert JsonDocument(where).load() == {"a": 22}


def test_consumer_offsets(data_dir: Location) -> None:
    catalog = Catalog(DocumentDirectory.of(data_dir))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(parse_statement("CREATE TABLE ks.t (pk int PRIMARY KEY, v int)"), None)
    catalog.execute(
        parse_statement(
            "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON')"
        ),
        None,
    )
    reader = FeedReader(data_dir, "ks.t/f")
    assert reader.table.uri.startswith(data_dir.uri)
    assert reader.next_offsets() == {0: 0} and reader.earliest_offsets() == {0: 0}
    consumer = FeedConsumer(data_dir, "ks.t/f", "g")
    consumer.position = {0: 3}
    consumer.commit()
    assert FeedConsumer(data_dir.uri, "ks.t/f", "g").committed == {0: 3}


def test_versioned_reader_and_snapshot(data_dir: Location) -> None:
    tables = data_dir / "tables"
    output = "base/ks.t"
    where = table_dir(tables, output)
    rows = pa.table(
        {
            "bucket": pa.array([0, 0, 1], pa.int32()),
            "pk": pa.array([b"a", b"b", b"c"]),
            "token": pa.array([1, 2, 3], pa.int64()),
            "v": ["x", "y", "z"],
        }
    )
    first = _write_table(where, rows)
    second = _write_table(where, rows.slice(0, 1).set_column(3, "v", pa.array(["new"])))
    reader = VersionedReader(tables, {output: first})
    remote = pickle.loads(pickle.dumps(reader))  # as a Spark task gets it
    assert remote.tables_dir == tables
    for each in (reader, remote):
        assert each.read(output, 0, [b"a"], columns=["v"]).column("v").to_pylist() == ["x"]
        assert each.read(output, 1, [b"c"], tokens=[3]).num_rows == 1
        assert sorted(each.scan(output, [("bucket", "=", 0)]).column("v").to_pylist()) == [
            "x",
            "y",
        ]
    snapshot = Snapshot(tables, Manifest(batch_id=2, max_seq=9, versions={output: second}))
    assert snapshot.read(output, columns=["v"]).num_rows == 4
    assert snapshot.count(output, ds.field("v") == "new") == 1
    assert "v" in snapshot.schema(output).names
    assert snapshot.read("base/none").num_rows == 0
    assert open_table(where, first).version() == first


def test_table_outputs_and_removal(data_dir: Location) -> None:
    rows = pa.table({"x": [1]})
    tables = data_dir / "tables"
    for output in ("base/t1", "log/t1", "feed/t1/f.1", "base/t2"):
        _write_table(tables.child(output), rows)
    assert _table_outputs(tables, "t1") == ["base/t1", "feed/t1/f.1", "log/t1"]
    _remove_tree(tables.child("feed/t1/f.1"))
    assert _table_outputs(tables, "t1") == ["base/t1", "log/t1"]


def test_compaction_files(data_dir: Location) -> None:
    data_dir.makedirs()
    rows = pa.table({"bucket": [3, 3], "v": ["a", "b"]})
    where = data_dir / "part-1.parquet"
    size = _write_parquet(where, rows, compression="zstd")
    assert size > 0 and _read_parquet(where).equals(rows)


def test_undo_uncommitted_restores_and_removes(data_dir: Location) -> None:
    """``cqlcdc recover``'s undo of a failed batch: an output past the manifest is restored
    to the manifest's version, one the manifest does not know is removed, and the manifest
    is saved with the restored versions."""
    tables = data_dir / "tables"
    rows = pa.table({"x": [1]})
    known = _write_table(tables.child("base/t1"), rows)
    _write_table(tables.child("base/t1"), rows)  # the failed batch's commit
    _write_table(tables.child("feed/t1/f.1"), rows)  # an output made by that batch alone
    manifest = Manifest(batch_id=3, max_seq=10, versions={"base/t1": known})
    manifest.save(data_dir)
    undone = _undo_uncommitted(tables, manifest, "t1")
    restored = undone.versions["base/t1"]
    assert Manifest.load(data_dir) == undone and restored > known
    table = DeltaTable(tables.child("base/t1").delta_uri, storage_options=data_dir.delta_options())
    assert table.to_pyarrow_table().num_rows == 1  # the failed batch's row is gone
    assert _table_outputs(tables, "t1") == ["base/t1"]


def _held_rows(table_id: str, seqs: list[int]) -> pa.Table:
    n = len(seqs)
    return pa.table(
        {
            "seq": pa.array(seqs, pa.int64()),
            "table_id": [table_id] * n,
            "schema_version": pa.array([1] * n, pa.int32()),
            "bucket": pa.array([0] * n, pa.int32()),
            "token": pa.array([0] * n, pa.int64()),
            "pk": [b"k"] * n,
            "payload": [b"p"] * n,
        },
        schema=HELD_SCHEMA,
    )


def test_recover_commands(data_dir: Location) -> None:
    """``cqlcdc recover``'s changes under the data directory's lease: skip records, show a
    stopped table's held writes, drop some, and retry the rest into the ingest log."""
    data_dir.makedirs()
    failure = Failure(11, 11, 2, "cannot apply ingest record seq=11: boom")
    save_failure(data_dir, failure)
    assert skip_records(data_dir, range(11, 12), committed_seq=10) == 1
    assert load_skipped(data_dir) == {
        11: "write seq=11 skipped by cqlcdc recover: " + failure.message
    }
    assert load_failure(data_dir) is None  # the failure skipped is gone

    held = data_dir / "tables" / HELD
    version = _write_table(held, _held_rows("3f2a", [20, 21, 22]))
    Manifest(batch_id=4, max_seq=19, versions={HELD: version}).save(data_dir)
    save_stopped(data_dir, {"3f2a": StoppedTable("3f2a", "ks.t", 20, 4, "boom")})
    (report,) = stopped_reports(data_dir)
    assert report.held == 3 and report.stopped.table == "ks.t"
    assert drop_held(data_dir, range(20, 21)) == 1
    entry, retried = resume_table(data_dir, "ks.t", retry=True)
    assert entry.table_id == "3f2a" and retried == 2
    assert load_stopped(data_dir) == {} and stopped_reports(data_dir) == []
    (appended,) = IngestLog(data_dir / "ingest").files()
    assert (appended.first_seq, appended.last_seq) == (20, 21)  # after the manifest's max_seq
    rows = read_ingest_file(appended.path)
    assert rows.column("table_id").to_pylist() == ["3f2a", "3f2a"]
