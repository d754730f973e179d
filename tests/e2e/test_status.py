"""``cqlcdc status``: a healthy directory, one with a stopped table, one held by another
process (alive, then killed), and through a running server (``--connect``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

import cqlcdc
from cqlcdc.cli import main
from cqlcdc.datadir.lease import Lease
from cqlcdc.errors import ServerError
from cqlcdc.feed_reader import FeedConsumer
from cqlcdc.location import Location
from cqlcdc.server import CqlServer
from tests.e2e.serving import serving

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
CDC = "WITH cdc = {'enabled': true}"


@pytest.fixture(scope="module")
def healthy(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed data directory: a CDC table with a feed, one consumer part of the way."""
    data = tmp_path_factory.mktemp("status") / "data"
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        s.execute(KS)
        s.execute(f"CREATE TABLE ks.t (pk int PRIMARY KEY, v int) {CDC}")
        s.execute("ALTER TABLE ks.t ADD CHANGEFEED f WITH (MODE = 'UPDATES', FORMAT = 'JSON')")
        for pk in range(5):
            s.execute(f"INSERT INTO ks.t (pk, v) VALUES ({pk}, {pk})")
        s.execute("CREATE TABLE ks.plain (pk int PRIMARY KEY)")
        s.flush()
        consumer = FeedConsumer(data, "ks.t/f", "audit")
        consumer.poll(max_records=2)
        consumer.commit()
    finally:
        s.close()
    return data


def _status(capsys: Any, *argv: str) -> str:
    capsys.readouterr()
    assert main(["status", *argv]) == 0
    out: str = capsys.readouterr().out
    return out


def test_a_healthy_directory(healthy: Path, capsys: Any) -> None:
    text = _status(capsys, "--data-dir", str(healthy))
    assert "held by: no process" in text
    assert "writes up to seq" in text and "backlog 0 seq(s) in 0 ingest file(s)" in text
    assert "ks.t: 5 stored rows" in text and "CDC log 5 rows" in text
    assert "ks.plain: 0 stored rows" in text
    assert "ks.t/f: 5 records in 1 partition(s)" in text
    assert "consumer audit: committed 2, lag 3" in text
    assert "STOPPED" not in text

    report = json.loads(_status(capsys, "--data-dir", str(healthy), "--format", "json"))
    assert report["healthy"] is True and report["holder"] is None
    assert report["pipeline"]["backlog_seqs"] == 0
    assert report["pipeline"]["committed_seq"] >= 5
    tables = {t["name"]: t for t in report["tables"]}
    assert tables["ks.t"]["stored_rows"] == 5 and tables["ks.t"]["log_rows"] == 5
    assert tables["ks.t"]["bytes"] > 0 and tables["ks.t"]["commits"]["base"] >= 1
    (feed,) = report["feeds"]
    assert feed["records"] == 5
    assert feed["consumers"] == [{"group": "audit", "committed": 2, "lag": 3}]
    assert report["stopped"] == [] and report["failure"] is None


def test_a_directory_held_by_another_process(healthy: Path, capsys: Any) -> None:
    """The process that owns the directory is named while it runs; once it is killed
    without letting go, status says no one holds it."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from cqlcdc.datadir.lease import Lease; "
            f"lease = Lease({str(healthy)!r}); lease.acquire(); print('held', flush=True); "
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        text = _status(capsys, "--data-dir", str(healthy))
        assert f"held by: pid {holder.pid} on " in text and ", up " in text
        assert "from cqlcdc.datadir.lease import Lease" in text  # its command line
        report = json.loads(_status(capsys, "--data-dir", str(healthy), "--format", "json"))
        assert report["holder"]["pid"] == holder.pid and report["holder"]["alive"] is True
        assert report["holder"]["uptime_s"] >= 0
    finally:
        holder.kill()
        holder.wait()
    text = _status(capsys, "--data-dir", str(healthy))
    assert f"pid {holder.pid} held it and exited without letting go" in text


def test_a_directory_with_a_stopped_table(spark: Any, tmp_path: Path, capsys: Any) -> None:
    data = tmp_path / "data"
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        s.execute(KS)
        s.execute(f"CREATE TABLE ks.good (pk int PRIMARY KEY, v int) {CDC}")
        s.execute(f"CREATE TABLE ks.bad (pk int PRIMARY KEY, v int) {CDC}")
        s.execute("INSERT INTO ks.good (pk, v) VALUES (1, 1)")
        s.coordinator.processor.fault_table = "ks.bad"  # the core's test hook
        with pytest.raises(ServerError, match="was not applied"):
            s.execute("INSERT INTO ks.bad (pk, v) VALUES (2, 2)")
    finally:
        s.close()
    text = _status(capsys, "--data-dir", str(data))
    assert "ks.bad: 0 stored rows" in text and text.count("STOPPED") == 2
    assert "STOPPED: table ks.bad at write seq=" in text and "fault injected" in text
    assert f"cqlcdc recover --data-dir {data.resolve()} --retry-table ks.bad" in text
    assert f"cqlcdc recover --data-dir {data.resolve()} --skip-table ks.bad" in text
    report = json.loads(_status(capsys, "--data-dir", str(data), "--format", "json"))
    assert report["healthy"] is False
    (stopped,) = report["stopped"]
    assert stopped["table"] == "ks.bad" and "fault injected" in stopped["error"]
    assert {t["name"]: t["stopped"] for t in report["tables"]} == {
        "ks.bad": True,
        "ks.good": False,
    }


@pytest.fixture
def served(healthy: Path) -> Iterator[CqlServer]:
    session = cqlcdc.connect(data_dir=healthy, master="local[2]")
    with serving(session) as server:
        yield server


def test_through_a_running_server(served: CqlServer, healthy: Path, capsys: Any) -> None:
    import os

    address = f"127.0.0.1:{served.port}"
    text = _status(capsys, "--connect", address)
    assert f"data directory {healthy.resolve()}" in text
    assert f"server: {address}" in text
    assert f"held by: pid {os.getpid()} on " in text  # this test's process serves it
    assert "ks.t/f: 5 records" in text


def test_not_a_data_directory(tmp_path: Path, capsys: Any) -> None:
    assert main(["status", "--data-dir", str(tmp_path)]) == 1
    assert "is not a cqlcdc data directory" in capsys.readouterr().err


def test_a_directory_in_an_object_store(healthy: Path, s3_data_dir: Location, capsys: Any) -> None:
    """``--data-dir s3://...``: the same report as the directory on disk, every document
    read through the object store; then held by a live lease there."""
    pafs.copy_files(
        str(healthy),
        s3_data_dir.fs_path,
        source_filesystem=pafs.LocalFileSystem(),
        destination_filesystem=s3_data_dir.filesystem,
    )
    local = json.loads(_status(capsys, "--data-dir", str(healthy), "--format", "json"))
    remote = json.loads(_status(capsys, "--data-dir", s3_data_dir.uri, "--format", "json"))
    assert remote["data_dir"] == s3_data_dir.uri and remote["holder"] is None
    assert remote["healthy"] is True and remote["pipeline"]["last_batch_s"] is not None
    for key in ("tables", "feeds", "stopped", "failure"):
        assert remote[key] == local[key], key
    assert remote["pipeline"]["committed_seq"] == local["pipeline"]["committed_seq"]
    assert remote["feeds"][0]["consumers"] == [{"group": "audit", "committed": 2, "lag": 3}]
    text = _status(capsys, "--data-dir", s3_data_dir.uri)
    assert f"data directory {s3_data_dir.uri}" in text and "held by: no process" in text
    assert "ks.t: 5 stored rows" in text and "consumer audit: committed 2, lag 3" in text

    with Lease(s3_data_dir, renew=False):
        report = json.loads(_status(capsys, "--data-dir", s3_data_dir.uri, "--format", "json"))
        assert report["holder"]["pid"] == os.getpid() and report["holder"]["alive"] is True
        text = _status(capsys, "--data-dir", s3_data_dir.uri)
        assert f"held by: pid {os.getpid()} on " in text
    assert (
        json.loads(_status(capsys, "--data-dir", s3_data_dir.uri, "--format", "json"))["holder"]
        is None
    )


def test_not_a_data_directory_in_an_object_store(s3_data_dir: Location, capsys: Any) -> None:
    assert main(["status", "--data-dir", s3_data_dir.uri]) == 1
    assert f"{s3_data_dir.uri} is not a cqlcdc data directory" in capsys.readouterr().err
