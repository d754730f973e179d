"""ScyllaDB's ``scylla_cdc_*`` operation counters through ``cqlcdc serve --metrics``.

Each write through the cassandra-driver moves exactly the counters ScyllaDB's coordinator
moves for it (``cdc/log.cc``): one operation per write, split or not, the parts it touched,
its preimage select and whether its table has images, and in the ``*_failed`` twins too
when its ingest append failed. A write of a table without CDC moves
none. The endpoint is the one ``serve --metrics`` starts (``MetricsEndpoint``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cassandra.cluster import Cluster
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.policies import FallthroughRetryPolicy, RoundRobinPolicy
from cassandra.query import SimpleStatement

import cqlcdc
from cqlcdc.server import CqlServer
from cqlcdc.server.metrics import MetricsEndpoint
from tests.e2e.test_metrics import KS, READ_TIMEOUT_S, Samples, scrape

pytestmark = pytest.mark.spark

OPS = "scylla_cdc_operations_total"
# a schema change waits for the pipeline: seconds on a machine Spark shares
DDL_TIMEOUT_S = READ_TIMEOUT_S


@pytest.fixture(scope="module")
def served(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any]]:
    """A server with its metrics endpoint, and a driver session on it."""
    session = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("cdcops"), master="local[2]")
    server = CqlServer(session.coordinator, port=0)
    server.start_in_thread()
    endpoint = MetricsEndpoint.start(server, "127.0.0.1:0", "test")
    cluster = Cluster(["127.0.0.1"], port=server.port, load_balancing_policy=RoundRobinPolicy())
    cql = cluster.connect()
    try:
        cql.execute(KS)
        yield endpoint, cql
    finally:
        cluster.shutdown()
        endpoint.close()
        server.stop_thread()
        session.close()


def cdc_counts(samples: Samples) -> dict[str, float]:
    out = {}
    for (name, labels), v in samples.items():
        if name.startswith("scylla_cdc_"):
            out[name + "".join(f"{{{k}={v}}}" for k, v in sorted(labels))] = v
    return out


def moved_by(endpoint: Any, run: Any) -> dict[str, float]:
    """The scylla_cdc_* series ``run()`` moved, and by how much."""
    before = cdc_counts(scrape(endpoint)[0])
    run()
    after = cdc_counts(scrape(endpoint)[0])
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


def part(name: str) -> str:
    return f"scylla_cdc_operations_on_{name}_performed_total"


UNSPLIT = OPS + "{split=false}"
SPLIT = OPS + "{split=true}"


def test_each_kind_of_write_moves_its_counters(served: tuple[Any, Any]) -> None:
    endpoint, cql = served
    cql.execute("CREATE TYPE IF NOT EXISTS ks.addr (street text, no int)", timeout=DDL_TIMEOUT_S)
    cql.execute(
        "CREATE TABLE ks.t (pk int, ck int, s int STATIC, v int, l list<int>, st set<int>, "
        "m map<int, int>, a addr, PRIMARY KEY (pk, ck)) WITH cdc = {'enabled': true}",
        timeout=DDL_TIMEOUT_S,
    )
    row = part("clustering_row")

    def write(stmt: str) -> dict[str, float]:
        return moved_by(endpoint, lambda: cql.execute(stmt))

    assert write("INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 1)") == {UNSPLIT: 1, row: 1}
    assert write("UPDATE ks.t SET s = 2 WHERE pk = 1") == {UNSPLIT: 1, part("static_row"): 1}
    assert write("UPDATE ks.t SET l = l + [1] WHERE pk = 1 AND ck = 1") == {
        UNSPLIT: 1,
        row: 1,
        part("list"): 1,
    }
    assert write("UPDATE ks.t SET st = st + {1} WHERE pk = 1 AND ck = 1") == {
        UNSPLIT: 1,
        row: 1,
        part("set"): 1,
    }
    assert write("UPDATE ks.t SET m[1] = 2 WHERE pk = 1 AND ck = 1") == {
        UNSPLIT: 1,
        row: 1,
        part("map"): 1,
    }
    assert write("UPDATE ks.t SET a.no = 3 WHERE pk = 1 AND ck = 1") == {
        UNSPLIT: 1,
        row: 1,
        part("udt"): 1,
    }
    assert write("DELETE FROM ks.t WHERE pk = 1 AND ck = 1") == {UNSPLIT: 1, part("row_delete"): 1}
    assert write("DELETE FROM ks.t WHERE pk = 1 AND ck > 5") == {
        UNSPLIT: 1,
        part("range_tombstone"): 1,
    }
    # ScyllaDB's should_split reads no timestamp from a partition tombstone, and a
    # mutation without one counts as split (split.cc)
    assert write("DELETE FROM ks.t WHERE pk = 1") == {SPLIT: 1, part("partition_delete"): 1}
    # a row marker with collection elements: ScyllaDB splits it (an INSERT cannot say it)
    assert write("INSERT INTO ks.t (pk, ck, l) VALUES (2, 1, [1, 2])") == {
        SPLIT: 1,
        row: 1,
        part("list"): 1,
    }
    # a batch is one operation: the parts of all its statements
    batch = (
        "BEGIN BATCH UPDATE ks.t SET s = 1 WHERE pk = 3; "
        "INSERT INTO ks.t (pk, ck, v) VALUES (4, 1, 1); APPLY BATCH"
    )
    assert write(batch) == {UNSPLIT: 1, row: 1, part("static_row"): 1}


def test_images_and_tables_without_cdc(served: tuple[Any, Any]) -> None:
    endpoint, cql = served
    cql.execute(
        "CREATE TABLE ks.img (pk int PRIMARY KEY, v int) "
        "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}",
        timeout=DDL_TIMEOUT_S,
    )
    cql.execute("CREATE TABLE ks.plain (pk int PRIMARY KEY, v int)", timeout=DDL_TIMEOUT_S)
    moved = moved_by(endpoint, lambda: cql.execute("UPDATE ks.img SET v = 1 WHERE pk = 1"))
    assert moved == {
        UNSPLIT: 1,
        part("clustering_row"): 1,
        "scylla_cdc_preimage_selects_total": 1,
        "scylla_cdc_operations_with_preimage_total": 1,
        "scylla_cdc_operations_with_postimage_total": 1,
    }
    # one select per partition the write touches
    batch = (
        "BEGIN BATCH UPDATE ks.img SET v = 2 WHERE pk = 1; "
        "UPDATE ks.img SET v = 2 WHERE pk = 2; APPLY BATCH"
    )
    assert moved_by(endpoint, lambda: cql.execute(batch))["scylla_cdc_preimage_selects_total"] == 2
    assert (
        moved_by(endpoint, lambda: cql.execute("INSERT INTO ks.plain (pk, v) VALUES (1, 1)")) == {}
    )


def test_concurrent_prepared_writes_count_one_operation_each(served: tuple[Any, Any]) -> None:
    """Many executions of a prepared write (the server's bulk path): one operation each,
    and the one split case, a TTL with a bound null."""
    endpoint, cql = served
    cql.execute(
        "CREATE TABLE ks.bulk (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}",
        timeout=DDL_TIMEOUT_S,
    )
    insert = cql.prepare("INSERT INTO ks.bulk (pk, ck, v) VALUES (?, ?, ?) USING TTL 1000")
    delete = cql.prepare("DELETE FROM ks.bulk WHERE pk = ? AND ck = ?")
    rows = [(i % 7, i, None if i % 10 == 0 else i) for i in range(200)]

    def run() -> None:
        assert all(ok for ok, _ in execute_concurrent_with_args(cql, insert, rows, 32))
        keys = [(i % 7, i) for i in range(50)]
        assert all(ok for ok, _ in execute_concurrent_with_args(cql, delete, keys, 32))

    assert moved_by(endpoint, run) == {
        UNSPLIT: 180 + 50,
        SPLIT: 20,
        part("clustering_row"): 200,
        part("row_delete"): 50,
    }


def test_a_write_whose_append_fails_counts_as_failed(
    served: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ScyllaDB's ``*_failed`` twins: a write refused because its ingest append failed (a
    full disk) counts in ``total`` and ``failed``; the next write only in ``total``."""
    endpoint, cql = served
    cql.execute(
        "CREATE TABLE ks.f (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}",
        timeout=DDL_TIMEOUT_S,
    )
    coordinator = endpoint.collectors[1].coordinator

    def full_disk(records: Any) -> None:
        raise OSError(28, "No space left on device")

    insert = SimpleStatement(
        "INSERT INTO ks.f (pk, ck, v) VALUES (1, 1, 1)", retry_policy=FallthroughRetryPolicy()
    )

    def refused() -> None:
        with monkeypatch.context() as patch:
            patch.setattr(coordinator.ingest, "append", full_disk)
            with pytest.raises(Exception, match="Ingest append failed"):
                cql.execute(insert)

    row = part("clustering_row")
    assert moved_by(endpoint, refused) == {
        UNSPLIT: 1,
        row: 1,
        "scylla_cdc_operations_failed{split=false}": 1,
        "scylla_cdc_operations_on_clustering_row_performed_failed": 1,
    }
    assert moved_by(endpoint, lambda: cql.execute(insert)) == {UNSPLIT: 1, row: 1}
