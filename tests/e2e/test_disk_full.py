"""A full disk under ``cqlcdc serve`` (a small tmpfs as the data directory, through the
real server and the cassandra-driver): writes are refused while it is full, reads of
committed data go on, writes resume by themselves once space is freed, and nothing
acknowledged is lost or applied twice, before and after a restart."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra.cluster import Cluster, NoHostAvailable
from cassandra.policies import RoundRobinPolicy

import cqlcdc
from cqlcdc.server import CqlServer
from tests.e2e.small_disk import fill, mounted_tmpfs

pytestmark = pytest.mark.spark

TMPFS_BYTES = 256 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 256 MiB."""
    with mounted_tmpfs(tmp_path / "disk", TMPFS_BYTES) as mount:
        yield mount


def _serve(data: Path) -> tuple[Any, CqlServer, Cluster, Any]:
    local = cqlcdc.connect(data_dir=data, master="local[2]")
    server = CqlServer(local.coordinator, port=0)
    host, port = server.start_in_thread()
    cluster = Cluster([host], port=port, load_balancing_policy=RoundRobinPolicy())
    return local, server, cluster, cluster.connect()


def _stop(local: Any, server: CqlServer, cluster: Cluster) -> None:
    cluster.shutdown()
    server.stop_thread()
    local.close()


def test_a_full_disk_refuses_writes_keeps_reads_and_recovers(spark: Any, small_disk: Path) -> None:
    data = small_disk / "data"
    local, server, cluster, cql = _serve(data)
    try:
        cql.execute(
            "CREATE KEYSPACE ks WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        cql.execute("CREATE TABLE ks.t (pk int PRIMARY KEY, v text) WITH cdc = {'enabled': true}")
        cql.execute("CREATE TABLE ks.c (pk int PRIMARY KEY, n counter)")
        insert = cql.prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")
        for pk in range(10):
            cql.execute(insert, (pk, f"v{pk}"))
        for _ in range(5):
            cql.execute("UPDATE ks.c SET n = n + 1 WHERE pk = 1")
        assert cql.execute("SELECT count(*) FROM ks.t").one().count == 10

        filler = fill(small_disk)
        # every write is refused with the disk's reason (a server error: the driver, which
        # would try the next host, wraps it in NoHostAvailable)
        refused = "Ingest append failed.*No space left on device"
        for attempt in range(3):
            with pytest.raises(NoHostAvailable, match=refused):
                cql.execute(insert, (100 + attempt, "lost"))
        with pytest.raises(NoHostAvailable, match=refused):
            cql.execute("UPDATE ks.c SET n = n + 1 WHERE pk = 1")
        # reads of what is committed go on, the base table and its CDC log
        rows = sorted(tuple(r) for r in cql.execute("SELECT pk, v FROM ks.t"))
        assert rows == [(pk, f"v{pk}") for pk in range(10)]
        assert cql.execute("SELECT count(*) FROM ks.t_scylla_cdc_log").one().count == 10
        assert cql.execute("SELECT n FROM ks.c WHERE pk = 1").one().n == 5

        filler.unlink()  # space again: writes resume without a restart
        cql.execute(insert, (10, "v10"))
        cql.execute("UPDATE ks.c SET n = n + 1 WHERE pk = 1")
        rows = sorted(tuple(r) for r in cql.execute("SELECT pk, v FROM ks.t"))
        assert rows == [(pk, f"v{pk}") for pk in range(11)]  # no refused write appears
        assert cql.execute("SELECT n FROM ks.c WHERE pk = 1").one().n == 6  # each once
        assert cql.execute("SELECT count(*) FROM ks.t_scylla_cdc_log").one().count == 11
        assert not [p for p in os.listdir(data / "ingest") if p.startswith(".tmp")]
    finally:
        _stop(local, server, cluster)

    local, server, cluster, cql = _serve(data)  # a restart keeps exactly the same
    try:
        rows = sorted(tuple(r) for r in cql.execute("SELECT pk, v FROM ks.t"))
        assert rows == [(pk, f"v{pk}") for pk in range(11)]
        assert cql.execute("SELECT n FROM ks.c WHERE pk = 1").one().n == 6
        cql.execute("INSERT INTO ks.t (pk, v) VALUES (11, 'v11')")
        assert cql.execute("SELECT count(*) FROM ks.t").one().count == 12
    finally:
        _stop(local, server, cluster)
