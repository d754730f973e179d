"""One owner of an ``s3://`` data directory across processes, through ``cqlcdc serve`` and
the real cassandra-driver: two servers, each with its own local directories, on one data
directory in S3 (moto). The second is refused in one line naming the first; after a kill -9
of the first, the second takes over once the lease expires, and every acknowledged write is
there exactly once, with its CDC log row."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import RoundRobinPolicy

from cqlcdc.location import Location

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
LEASE_TTL_S = 3.0
WRITES = 300


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(scratch: Path, uri: str, port: int) -> subprocess.Popen[str]:
    """``cqlcdc serve`` on ``uri`` with nothing local shared with another server: its own
    working, temporary and Spark local directories."""
    scratch.mkdir(parents=True, exist_ok=True)
    cli = Path(sys.executable).with_name("cqlcdc")
    env = {
        **os.environ,
        "TMPDIR": str(scratch),
        "SPARK_LOCAL_DIRS": str(scratch / "spark"),
    }
    command = [str(cli), "serve", "--data-dir", uri, "--port", str(port)]
    return subprocess.Popen(
        [*command, "--master", "local[1]", "--lease-ttl", str(LEASE_TTL_S)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=scratch,
        start_new_session=True,  # its own process group: kill -9 takes its JVM too
    )


def _serving(proc: subprocess.Popen[str], port: int) -> list[str]:
    """The server's stderr up to the line that says it listens, or up to its exit."""
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:
        said.append(line)
        if "serving" in line:
            assert f"127.0.0.1:{port}" in line, said
            break
    return said


def _cluster(port: int) -> Cluster:
    return Cluster(["127.0.0.1"], port=port, load_balancing_policy=RoundRobinPolicy())


def _kill(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def test_takeover_after_kill_9_keeps_every_acknowledged_write_once(
    tmp_path: Path, s3_data_dir: Location
) -> None:
    uri = s3_data_dir.uri
    port_a = _free_port()
    first = _start(tmp_path / "a", uri, port_a)
    procs = [first]
    try:
        said = _serving(first, port_a)
        assert first.poll() is None, "".join(said)
        cluster = _cluster(port_a)
        session = cluster.connect()
        session.execute(KS)
        session.execute(
            "CREATE TABLE ks.k (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
        )
        insert = session.prepare("INSERT INTO ks.k (pk, v) VALUES (?, ?)")
        results = execute_concurrent_with_args(
            session, insert, [(i, i) for i in range(WRITES)], concurrency=64
        )
        acknowledged = sorted(i for i, (ok, _) in enumerate(results) if ok)
        assert acknowledged == list(range(WRITES))
        cluster.shutdown()

        # a second server with its own local directories is refused in one line
        port_b = _free_port()
        refused = _start(tmp_path / "b", uri, port_b)
        procs.append(refused)
        _, err = refused.communicate(timeout=120)
        assert refused.returncode == 1
        assert err.splitlines() == [err.strip()], err
        assert err.startswith(f"cqlcdc: data directory {uri} is in use by another cqlcdc")
        assert f"pid {first.pid}" in err and "expires at" in err

        _kill(first)
        killed_at = time.monotonic()
        # the second takes over once the lease has expired, not before
        while True:
            second = _start(tmp_path / "b", uri, port_b)
            procs.append(second)
            said = _serving(second, port_b)
            if second.poll() is None and said and "serving" in said[-1]:
                break
            second.wait(timeout=60)
            assert "is in use by another cqlcdc process" in "".join(said), said
            assert time.monotonic() - killed_at < 60, "never took over"
        assert time.monotonic() - killed_at >= LEASE_TTL_S / 3 * 2 - 0.5

        cluster = _cluster(port_b)
        session = cluster.connect()
        # the first read waits until the writes the first server left unapplied are applied
        session.default_timeout = 300
        rows = sorted(tuple(r) for r in session.execute("SELECT pk, v FROM ks.k"))
        assert rows == [(i, i) for i in acknowledged]
        log = sorted(r.pk for r in session.execute("SELECT pk FROM ks.k_scylla_cdc_log"))
        assert log == acknowledged  # each write's log row, once
        cluster.shutdown()
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=120) == 0
    finally:
        for proc in procs:
            _kill(proc)
