"""The fixtures many e2e files share: ``session``, a fresh engine with keyspace ``ks``;
``served``, a CQL server over a fresh data directory, alone and behind two protocol workers;
``cluster`` and ``cql``, a cassandra-driver cluster on ``served`` and a session of it in
keyspace ``ks``.

A file whose tests need more defines its own fixture of the same name, or extends the shared
one by asking for it (``def session(session)``: pytest hands the override this one). A file
that needs one worker count only parametrizes ``served`` indirectly, e.g. with
``pytest.mark.parametrize("served", [2], indirect=True, ids=workers_id)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

import cqlcdc
from cqlcdc.server import CqlServer
from cqlcdc.session import Session
from tests.e2e.serving import WORKERS, serving, workers_id

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture
def session(spark: Any, tmp_path: Path) -> Iterator[Session]:
    """A fresh engine on its own data directory (``tmp_path / "data"``), with keyspace ks;
    one per test."""
    s = cqlcdc.connect(data_dir=tmp_path / "data", master="local[2]")
    try:
        s.execute(KS)
        yield s
    finally:
        s.close()


@pytest.fixture(scope="module", params=WORKERS, ids=workers_id)
def served(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[CqlServer]:
    """A server on a free port over its own data directory (its coordinator is
    ``.coordinator``), alone or behind protocol workers; one per module and worker count."""
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("srv"), master="local[2]")
    with serving(session, protocol_workers=request.param) as srv:
        yield srv


@pytest.fixture(scope="module")
def cluster(served: CqlServer) -> Iterator[Cluster]:
    """A cassandra-driver cluster on ``served`` (whichever ``served`` the module uses)."""
    cluster = Cluster([served.host], port=served.port, load_balancing_policy=RoundRobinPolicy())
    yield cluster
    cluster.shutdown()


@pytest.fixture(scope="module")
def cql(cluster: Cluster) -> Any:
    """A session of ``cluster`` in keyspace ``ks`` (made if missing)."""
    session = cluster.connect()
    session.default_timeout = 60  # a first read waits for the table's first batch
    session.execute(KS.replace("KEYSPACE ks", "KEYSPACE IF NOT EXISTS ks"))
    session.set_keyspace("ks")
    return session
