"""A disk that fills under sustained writes recovers without a restart (issue 35 §3).

``cqlcdc serve`` keeps its data directory, and the engine its scratch (Spark's streaming
checkpoint, ``TMPDIR``), on a small tmpfs. A client writes through the cassandra-driver
without pause until the disk is full: the pipeline itself meets "No space left on device"
in the middle of a micro-batch (a Parquet file, a Delta commit, the manifest, the
checkpoint), and writes are refused with the disk's error. Once space is freed, reads and
writes succeed within 30 s, and every acknowledged write is in the base table and its CDC
log, exactly once. tests/e2e/test_disk_full.py covers the writes refused at the ingest
append alone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import RoundRobinPolicy

from tests.e2e.served_process import ServedProcess
from tests.e2e.small_disk import fill, mounted_tmpfs

pytestmark = pytest.mark.spark

TMPFS_BYTES = 64 * 1024 * 1024
# what is left free once the server runs: the writes take it, the pipeline's files with them
HEADROOM_BYTES = 6 * 1024 * 1024
# a write's value: the disk fills in a few thousand writes (the ingest log's segments take
# the space; the pipeline's files, compressed, little)
VALUE = "x" * 4000
IN_FLIGHT = 32  # writes at once: the disk fills faster than applied segments are freed
RECOVER_S = 30.0
# the most a client waits for one write (the pipeline holds a write back while it is far
# behind; a full disk is the pipeline's business, not the client's)
WRITE_WAIT_S = 60.0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 64 MiB."""
    with mounted_tmpfs(tmp_path / "disk", TMPFS_BYTES) as mount:
        yield mount


def _leave_free(directory: Path, free: int) -> Path:
    """A file taking all but ``free`` bytes of ``directory``'s file system."""
    filler = fill(directory)
    with open(filler, "r+b") as out:
        out.truncate(max(filler.stat().st_size - free, 0))
    return filler


def test_a_disk_filled_by_writes_recovers_once_freed(small_disk: Path, tmp_path: Path) -> None:
    scratch = small_disk / "tmp"
    scratch.mkdir()
    server = ServedProcess(small_disk / "data", {"TMPDIR": str(scratch)}, tmp_path / "server.log")
    cluster = Cluster(["127.0.0.1"], port=server.port, load_balancing_policy=RoundRobinPolicy())
    try:
        cql = cluster.connect()
        cql.default_timeout = WRITE_WAIT_S
        cql.execute(
            "CREATE KEYSPACE ks WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        cql.execute("CREATE TABLE ks.t (pk int PRIMARY KEY, v text) WITH cdc = {'enabled': true}")
        insert = cql.prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")
        cql.execute(insert, (-1, VALUE))
        acked = [-1]
        filler = _leave_free(small_disk, HEADROOM_BYTES)

        # write without pause, IN_FLIGHT at once, until the disk refuses writes and the
        # pipeline has met it too
        refused: dict[int, str] = {}
        pk = 0
        deadline = time.monotonic() + 600
        while len(refused) < 5 or "environment failure" not in server.log():
            assert time.monotonic() < deadline, server.log()[-6000:]
            keys = range(pk, pk + IN_FLIGHT)
            results = execute_concurrent_with_args(
                cql, insert, [(k, VALUE) for k in keys], IN_FLIGHT, raise_on_first_error=False
            )
            for k, (ok, outcome) in zip(keys, results, strict=True):
                if ok:
                    acked.append(k)
                else:  # the server's error, through the driver
                    assert isinstance(outcome, NoHostAvailable), outcome
                    assert "No space left on device" in str(outcome), outcome
                    refused[k] = str(outcome)
            if any(k in refused for k in keys):
                time.sleep(0.05)
            pk += IN_FLIGHT
        assert len(acked) > 100

        filler.unlink()  # space again: no restart, the pipeline comes back by itself
        freed = time.monotonic()
        while True:
            try:
                cql.execute(insert, (pk, VALUE), timeout=10)
                acked.append(pk)
                count = cql.execute("SELECT count(*) FROM ks.t", timeout=10).one().count
                break
            except Exception as err:
                if time.monotonic() - freed > RECOVER_S:
                    raise AssertionError(f"{err}\n{server.log()[-6000:]}") from err
                time.sleep(0.2)
        assert time.monotonic() - freed <= RECOVER_S
        rows = sorted((r.pk, r.v) for r in cql.execute("SELECT pk, v FROM ks.t"))
        extra = {p: refused.get(p) for p, _ in rows} if count != len(acked) else {}
        assert count == len(acked), [(p, e) for p, e in extra.items() if p not in set(acked)]
        assert rows == [(p, VALUE) for p in sorted(acked)]  # every acknowledged write, once
        log = sorted((r.pk, r.v) for r in cql.execute("SELECT pk, v FROM ks.t_scylla_cdc_log"))
        assert log == [(p, VALUE) for p in sorted(acked)]  # its change once in the log
        assert server.metric("cqlcdc_pipeline_retries_total", cause="environment") >= 1
        lines = server.log()
        assert "pipeline stopped at" not in lines and "stopped at write seq=" not in lines
    finally:
        cluster.shutdown()
        code = server.stop()
    assert code == 0, server.log()[-6000:]
