"""``cqlcdc serve --workers N``: what holds only because several processes serve one port.

The suites of the server, the drivers, cqlsh, auth, LWT and kill -9 run against one process
and against two workers (``tests/e2e/serving.WORKERS``); these tests pin what those cannot
see from one client: connections spread over the workers, a statement prepared through one
worker executed through another, schema events crossing workers, and a worker's death.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

from cqlcdc.server import CqlServer
from tests.e2e.serving import until, workers_id

# the shared ``served`` (conftest), with two workers only
pytestmark = [
    pytest.mark.spark,
    pytest.mark.parametrize("served", [2], indirect=True, ids=workers_id),
]

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
CLIENTS = 12  # 24 connections: all on one of two workers with odds of 2^-23


def _connect(srv: CqlServer) -> tuple[Cluster, Any]:
    cluster = Cluster(
        [srv.host], port=srv.port, load_balancing_policy=RoundRobinPolicy(), protocol_version=5
    )
    return cluster, cluster.connect()


@pytest.fixture(scope="module")
def clients(served: CqlServer) -> Iterator[list[tuple[Cluster, Any]]]:
    opened = [_connect(served) for _ in range(CLIENTS)]
    yield opened
    for cluster, _ in opened:
        cluster.shutdown()


def test_connections_spread_over_the_workers(
    served: CqlServer, clients: list[tuple[Cluster, Any]]
) -> None:
    assert served.pool is not None
    per_worker = [len(link.sessions) for link in served.pool._links]
    assert len(per_worker) == 2 and all(per_worker), per_worker
    assert served.connection_count() == sum(per_worker) >= 2 * CLIENTS
    assert not served.connections  # the coordinator's process listens for no one


def test_statements_prepared_through_one_worker_run_through_every_one(
    clients: list[tuple[Cluster, Any]],
) -> None:
    _, first = clients[0]
    first.execute(KS.replace("KEYSPACE ks", "KEYSPACE IF NOT EXISTS ks"))
    first.execute("CREATE TABLE IF NOT EXISTS ks.p (pk int PRIMARY KEY, v text)")
    insert = first.prepare("INSERT INTO ks.p (pk, v) VALUES (?, ?)")
    select = first.prepare("SELECT v FROM ks.p WHERE pk = ?")
    # every client runs the first client's prepared statements (their ids), whichever
    # worker its connection is on, with each write read back through another client
    for n, (_, session) in enumerate(clients):
        session.execute(insert, (n, f"v{n}"))
        _, reader = clients[(n + 5) % CLIENTS]
        assert reader.execute(select, (n,)).one().v == f"v{n}"
    rows = clients[-1][1].execute("SELECT pk, v FROM ks.p")
    assert sorted(tuple(r) for r in rows) == [(n, f"v{n}") for n in range(CLIENTS)]


def test_a_schema_change_reaches_the_clients_of_every_worker(
    clients: list[tuple[Cluster, Any]],
) -> None:
    _, first = clients[0]
    first.execute(KS.replace("KEYSPACE ks", "KEYSPACE IF NOT EXISTS ks"))
    first.execute("CREATE TABLE ks.evented (pk int PRIMARY KEY, v int)")

    # each driver refreshes its schema metadata on the SCHEMA_CHANGE event its control
    # connection gets: on whichever worker that connection is
    def knows(cluster: Cluster) -> bool:
        keyspace = cluster.metadata.keyspaces.get("ks")
        return keyspace is not None and "evented" in keyspace.tables

    for cluster, _ in clients:
        assert until(lambda c=cluster: knows(c))


def test_a_prepared_write_is_rebound_after_its_table_changes(
    clients: list[tuple[Cluster, Any]],
) -> None:
    _, first = clients[0]
    first.execute(KS.replace("KEYSPACE ks", "KEYSPACE IF NOT EXISTS ks"))
    first.execute("CREATE TABLE ks.r (pk int PRIMARY KEY, v int)")
    insert = first.prepare("INSERT INTO ks.r (pk, v) VALUES (?, ?)")
    for n in range(40):  # concurrent enough to be bound on the workers
        first.execute_async(insert, (n, n)).result()
    first.execute("DROP TABLE ks.r")
    first.execute("CREATE TABLE ks.r (pk int PRIMARY KEY, v text)")
    text_insert = first.prepare("INSERT INTO ks.r (pk, v) VALUES (?, ?)")
    first.execute(text_insert, (1, "one"))
    assert [tuple(r) for r in first.execute("SELECT pk, v FROM ks.r")] == [(1, "one")]


def test_a_dead_worker_is_replaced(served: CqlServer) -> None:
    assert served.pool is not None
    victim = served.pool._links[0].process
    os.kill(victim.pid, signal.SIGKILL)
    victim.wait(30)
    assert until(
        lambda: (
            all(link.process.poll() is None for link in served.pool._links)  # type: ignore[union-attr]
            and served.pool._links[0].process.pid != victim.pid
        )  # type: ignore[union-attr]
    )
    # the port serves new clients on both again
    opened = [_connect(served) for _ in range(CLIENTS)]
    try:
        for _, session in opened:
            assert session.execute("SELECT cluster_name FROM system.local").one()
        assert all(len(link.sessions) for link in served.pool._links)
    finally:
        for cluster, _ in opened:
            cluster.shutdown()
