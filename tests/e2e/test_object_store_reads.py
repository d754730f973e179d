"""A data directory copied into an object store (S3 through moto) reads as it did on disk:
``spark.read.format("cqlcdc")`` of a log and a base table, ``format("cqlcdc_changefeed")``,
a changefeed reader and consumer, the catalog and the manifest. The Spark tasks get the
data directory as a Location with its storage options (``storage.<KEY>``), never a path of
the driver's disk: the directory they read is not on it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

import cqlcdc
from cqlcdc.datadir.commit import Manifest
from cqlcdc.documents import DocumentDirectory
from cqlcdc.feed_reader import FeedConsumer, FeedReader
from cqlcdc.location import Location
from cqlcdc.schema.catalog import Catalog

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = (
    "CREATE TABLE ks.t (pk int, ck int, v text, m map<int, text>, PRIMARY KEY (pk, ck)) "
    "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
)
FEED = "ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'NEW_AND_OLD_IMAGES', FORMAT = 'JSON')"
LOG = "ks.t_scylla_cdc_log"


@pytest.fixture(scope="module")
def copied(
    spark: Any, moto_s3: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Path, Location]]:
    """A data directory written on disk, closed, then copied whole into S3; the storage
    options name the endpoint and credentials explicitly (Spark's Python workers may have
    started before the test's environment named them)."""
    local = tmp_path_factory.mktemp("objectstore") / "d"
    s = cqlcdc.connect(data_dir=local, master="local[2]")
    try:
        s.execute(KS)
        s.execute(TABLE)
        s.execute(FEED)
        insert = s.prepare("INSERT INTO ks.t (pk, ck, v, m) VALUES (?, ?, ?, ?)")
        s.execute_many([insert] * 60, [(i % 9, i, f"v{i}", {i: f"m{i}"}) for i in range(60)])
        s.execute("UPDATE ks.t SET v = 'changed' WHERE pk = 1 AND ck = 1")
        s.execute("DELETE FROM ks.t WHERE pk = 2")
        s.flush()
    finally:
        s.close()
    options = {
        "AWS_ENDPOINT_URL": moto_s3,
        "AWS_ACCESS_KEY_ID": os.environ["AWS_ACCESS_KEY_ID"],
        "AWS_SECRET_ACCESS_KEY": os.environ["AWS_SECRET_ACCESS_KEY"],
        "AWS_REGION": os.environ["AWS_REGION"],
    }
    remote = Location.of(f"s3://cqlcdc-test/copied-{local.parent.name}", options)
    pafs.copy_files(
        str(local),
        remote.fs_path,
        source_filesystem=pafs.LocalFileSystem(),
        destination_filesystem=remote.filesystem,
    )
    yield local, remote


def _options(remote: Location) -> dict[str, str]:
    return {"path": remote.uri, **{f"storage.{k}": v for k, v in remote.options}}


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in df.collect()), key=repr)


@pytest.mark.parametrize("table", [LOG, "ks.t"])
def test_spark_reads_a_table_in_the_object_store(
    spark: Any, copied: tuple[Path, Location], table: str
) -> None:
    local, remote = copied
    on_disk = spark.read.format("cqlcdc").option("path", str(local)).option("table", table)
    in_store = spark.read.format("cqlcdc").options(**_options(remote)).option("table", table)
    expected = _rows(on_disk.load())
    assert len(expected) > 50
    assert _rows(in_store.load()) == expected
    assert _rows(in_store.load().where("pk = 1")) == _rows(on_disk.load().where("pk = 1"))


def test_spark_reads_a_changefeed_in_the_object_store(
    spark: Any, copied: tuple[Path, Location]
) -> None:
    from cqlcdc.pipeline.feed_source import register

    register(spark)
    local, remote = copied
    feed = {"feed": "ks.t/f"}
    expected = _rows(spark.read.format("cqlcdc_changefeed").options(path=str(local), **feed).load())
    got = spark.read.format("cqlcdc_changefeed").options(**_options(remote), **feed).load()
    assert len(expected) > 50 and _rows(got) == expected


def test_readers_and_documents_in_the_object_store(copied: tuple[Path, Location]) -> None:
    local, remote = copied
    assert Manifest.load(remote) == Manifest.load(local)
    assert Catalog(DocumentDirectory.of(remote)).table("ks", "t") == Catalog(
        DocumentDirectory.of(local)
    ).table("ks", "t")
    on_disk, in_store = FeedReader(local, "ks.t/f"), FeedReader(remote, "ks.t/f")
    assert in_store.next_offsets() == on_disk.next_offsets()
    assert list(in_store.read()) == list(on_disk.read())
    consumer = FeedConsumer(remote, "ks.t/f", "g")
    polled = consumer.poll(max_records=10)
    consumer.commit()
    assert len(polled) == 10
    again = FeedConsumer(remote, "ks.t/f", "g")
    assert again.poll(max_records=1)[0] == list(on_disk.read())[10]


def test_spark_streams_a_log_from_the_object_store(
    spark: Any, copied: tuple[Path, Location], tmp_path: Path
) -> None:
    """The stream reader's planner reads the manifest in the store; its tasks the files."""
    local, remote = copied
    stream = spark.readStream.format("cqlcdc").options(**_options(remote)).option("table", LOG)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = (
        stream.load()
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    batch = spark.read.format("cqlcdc").option("path", str(local)).option("table", LOG).load()
    assert _rows(spark.read.parquet(str(out))) == _rows(batch)
