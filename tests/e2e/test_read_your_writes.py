"""A read through the server sees every write acknowledged before it, whichever path answers
it: a one-partition read with acknowledged writes still to apply waits for them (in the
server's thread pool); one with nothing to wait for is answered on the thread that
received it (with ``--workers``, the link's: ``worker_pool.one_partition_read``). Through the
real cassandra-driver, one process and two workers, the write and the read on one
connection and on two."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

from cqlcdc.server import CqlServer, worker_pool
from tests.e2e.serving import until

pytestmark = pytest.mark.spark

KS = (
    "CREATE KEYSPACE IF NOT EXISTS ks "
    "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
)


@pytest.fixture(scope="module")
def clients(served: CqlServer) -> Iterator[tuple[Any, Any]]:
    """Two connections (with two workers, most likely one on each)."""
    opened = [
        Cluster(
            [served.host], port=served.port, load_balancing_policy=RoundRobinPolicy(),
            protocol_version=5,
        )
        for _ in range(2)
    ]  # fmt: skip
    sessions = [cluster.connect() for cluster in opened]
    for session in sessions:  # a first micro-batch starts Spark's Python workers
        session.default_timeout = 120
    sessions[0].execute(KS)
    sessions[0].execute(
        "CREATE TABLE IF NOT EXISTS ks.ryw (pk int, ck int, v text, PRIMARY KEY (pk, ck))"
    )
    yield sessions[0], sessions[1]
    for cluster in opened:
        cluster.shutdown()


@pytest.fixture
def read_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads the coordinator ran each read request on (workers only)."""
    names: list[str] = []
    original = worker_pool._Link._request

    def recording(self: Any, *args: Any) -> None:
        names.append(threading.current_thread().name)
        original(self, *args)

    monkeypatch.setattr(worker_pool._Link, "_request", recording)
    return names


def _settled(served: CqlServer) -> bool:
    """Every write queued is applied: a read has nothing to wait for."""
    c = served.coordinator
    return c.group_commit.flush_target() <= c.engine.committed_seq()


def test_a_write_acknowledged_is_read_at_once(
    served: CqlServer, clients: tuple[Any, Any], read_threads: list[str]
) -> None:
    writer, other = clients
    insert = writer.prepare("INSERT INTO ks.ryw (pk, ck, v) VALUES (?, ?, ?)")
    update = writer.prepare("UPDATE ks.ryw SET v = ? WHERE pk = ? AND ck = ?")
    delete = writer.prepare("DELETE FROM ks.ryw WHERE pk = ? AND ck = ?")
    reads = [s.prepare("SELECT ck, v FROM ks.ryw WHERE pk = ?") for s in clients]
    for n in range(12):
        reader, read = (writer, reads[0]) if n % 2 else (other, reads[1])
        writer.execute(insert, (n, 1, f"a{n}"))
        writer.execute(insert, (n, 2, f"b{n}"))
        assert [tuple(r) for r in reader.execute(read, (n,))] == [(1, f"a{n}"), (2, f"b{n}")]
        writer.execute(update, (f"c{n}", n, 1))
        assert [tuple(r) for r in reader.execute(read, (n,))] == [(1, f"c{n}"), (2, f"b{n}")]
        writer.execute(delete, (n, 2))
        assert [tuple(r) for r in reader.execute(read, (n,))] == [(1, f"c{n}")]
        # with everything applied, the read waits for nothing: answered where it arrives
        assert until(lambda: _settled(served))
        assert [tuple(r) for r in reader.execute(read, (n,))] == [(1, f"c{n}")]
    if served.pool is not None:
        # both paths answered: the pool's threads, and the link's own
        assert any(name.startswith("cql-link-") for name in read_threads), read_threads
        assert any(not name.startswith("cql-link-") for name in read_threads), read_threads


def test_writes_of_other_connections_in_flight_are_seen_by_a_read_after_their_acks(
    clients: tuple[Any, Any],
) -> None:
    writer, reader = clients
    insert = writer.prepare("INSERT INTO ks.ryw (pk, ck, v) VALUES (?, ?, ?)")
    read = reader.prepare("SELECT ck FROM ks.ryw WHERE pk = ?")
    futures = [writer.execute_async(insert, (1000, ck, "x")) for ck in range(64)]
    for future in futures:
        future.result()
    assert [r.ck for r in reader.execute(read, (1000,))] == list(range(64))
