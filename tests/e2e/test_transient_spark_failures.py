"""A failure of Spark's machinery, not of the data, never stops the pipeline (issue 35 §2):
the Python workers of ``cqlcdc serve``'s JVM are killed (SIGKILL) while a client writes, then
the next Python worker starts fail; the streaming query is restarted from its last committed
batch, with one log line and one ``cqlcdc_pipeline_retries`` count each time. No write is
refused, every acknowledged write is in the base table and its CDC log exactly once.

The start failure is real: ``PYSPARK_PYTHON`` (what Spark runs for every Python worker) is a
wrapper that exits at once, without starting Python, while a token file is left in its
directory (``CQLCDC_TEST_FAIL_STARTS``, a test's own variable: the product knows nothing of
it). A data failure still stops its table alone: tests/e2e/test_containment.py."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

import cqlcdc
from tests.e2e.served_process import ServedProcess, python_workers_of

pytestmark = pytest.mark.spark

TABLE = "CREATE TABLE ks.{name} (pk int PRIMARY KEY, v int) WITH cdc = {{'enabled': true}}"
KS = (
    "CREATE KEYSPACE IF NOT EXISTS ks "
    "WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
)
# Spark's Python worker as the wrapper runs it: refused while a token is left
WRAPPER = """#!/bin/sh
for token in "$CQLCDC_TEST_FAIL_STARTS"/*; do
    if rm "$token" 2>/dev/null; then
        echo "test: this Python worker start fails ($token)" >&2
        exit 1
    fi
done
exec {python} "$@"
"""
# how long the pipeline gets to come back after each disruption (a loaded machine's query
# start takes seconds; the backoff adds at most a few)
RECOVER_S = 120.0
RETRIES = "cqlcdc_pipeline_retries_total"
FIRST_STARTS_FAILED = 2  # the served module's server: its first Python worker starts fail


class Writer(threading.Thread):
    """Writes rows ``pk = v = 0, 1, ...`` until stopped; every fifth write is conditional
    (``IF NOT EXISTS``: its answer waits for the pipeline to apply it). Keeps what was
    acknowledged and every error."""

    def __init__(self, cql: Any) -> None:
        super().__init__(daemon=True)
        self.cql = cql
        self.insert = cql.prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?)")
        self.conditional = cql.prepare("INSERT INTO ks.t (pk, v) VALUES (?, ?) IF NOT EXISTS")
        self.acked: list[int] = []
        self.errors: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        pk = 0
        while not self.halt.is_set():
            try:
                if pk % 5 == 4:
                    applied = self.cql.execute(self.conditional, (pk, pk)).one()[0]
                    if not applied:
                        self.errors.append(f"conditional write {pk} not applied")
                else:
                    self.cql.execute(self.insert, (pk, pk))
                self.acked.append(pk)
            except Exception as err:
                self.errors.append(f"write {pk}: {type(err).__name__}: {err}")
            pk += 1
            time.sleep(0.01)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=RECOVER_S)


def _until(what: str, done: Callable[[], bool], server: ServedProcess) -> None:
    deadline = time.monotonic() + RECOVER_S
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {RECOVER_S:g} s: {what}\n{server.log()[-6000:]}")
        time.sleep(0.2)


def _wrapped(tmp_path: Path, failing_starts: int = 0) -> tuple[dict[str, str], Path]:
    """The environment that runs Spark's Python workers through the wrapper, and the
    wrapper's token directory, holding one token per start to fail."""
    tokens = tmp_path / "fail-starts"
    tokens.mkdir()
    for n in range(failing_starts):
        (tokens / f"start-{n}").touch()
    wrapper = tmp_path / "python"
    wrapper.write_text(WRAPPER.format(python=sys.executable))
    wrapper.chmod(0o755)
    return {"PYSPARK_PYTHON": str(wrapper), "CQLCDC_TEST_FAIL_STARTS": str(tokens)}, tokens


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServedProcess, Path]]:
    """One server for the module (a server's start is the cost), whose Python workers start
    through the wrapper: its first two starts fail (``FIRST_STARTS_FAILED``), every later
    start succeeds until a test leaves tokens in the directory (yielded with the server)."""
    tmp_path = tmp_path_factory.mktemp("transient")
    env, tokens = _wrapped(tmp_path, failing_starts=FIRST_STARTS_FAILED)
    server = ServedProcess(tmp_path / "data", env)
    try:
        yield server, tokens
    finally:
        assert server.stop() == 0, server.log()[-6000:]


def test_killed_python_workers_and_failed_worker_starts_are_survived(
    served: tuple[ServedProcess, Path],
) -> None:
    server, tokens = served
    cluster = Cluster(["127.0.0.1"], port=server.port, load_balancing_policy=RoundRobinPolicy())
    writer: Writer | None = None
    try:
        cql = cluster.connect()
        cql.default_timeout = RECOVER_S
        cql.execute(KS)
        cql.execute(TABLE.format(name="t"))
        startup = len(server.lines)  # the lines of this test's disruptions follow
        writer = Writer(cql)
        writer.start()
        _until("20 writes", lambda: len(writer.acked) >= 20, server)

        # 1. every Python process of the JVM is killed while the writes go on (a lost
        # executor's workers): the streaming source's runner among them
        restarts = server.metric(RETRIES, cause="transient")  # the first start's, if any
        workers = server.python_workers()
        assert any("streaming_source_runner" in args for args in workers.values()), workers
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        before = len(writer.acked)
        _until("a restart", lambda: server.metric(RETRIES, cause="transient") > restarts, server)
        _until("writes go on", lambda: len(writer.acked) >= before + 20, server)
        _until("the writes applied", lambda: _applied(cql, "t") >= before + 15, server)

        # 2. the next two Python worker starts fail: the runner the restart needs among them
        restarts = server.metric(RETRIES, cause="transient")
        for n in range(2):
            (tokens / f"start-{n}").touch()
        runners = [p for p, a in server.python_workers().items() if "source_runner" in a]
        assert runners
        for pid in runners:
            os.kill(pid, signal.SIGKILL)
        before = len(writer.acked)
        _until("both start failures", lambda: not list(tokens.iterdir()), server)
        _until("writes go on", lambda: len(writer.acked) >= before + 20, server)
        _until("the writes applied", lambda: _applied(cql, "t") >= before + 15, server)
        assert server.metric(RETRIES, cause="transient") >= restarts + 2  # one per failure
        writer.stop()

        assert writer.errors == []  # no write refused, none timed out
        acked = sorted(writer.acked)
        rows = sorted(tuple(r) for r in cql.execute("SELECT pk, v FROM ks.t"))
        assert rows == [(pk, pk) for pk in acked]  # nothing lost, nothing extra
        log = sorted(r.pk for r in cql.execute("SELECT pk FROM ks.t_scylla_cdc_log"))
        assert log == acked  # every write's change once: no batch applied twice
        lines = "".join(server.lines[startup:])
        assert "streaming query stopped at transient failure" in lines
        # the symptom of issue 35: Spark's own words for a worker that did not start
        assert "Python worker failed to connect back" in lines
        assert "pipeline stopped at" not in server.log()
    finally:
        if writer is not None:
            writer.stop()
        cluster.shutdown()


def test_failed_worker_starts_at_the_first_start_are_retried(
    served: tuple[ServedProcess, Path],
) -> None:
    """The first Python worker starts fail while the server starts (the worker that plans
    the ingest source among them): the first start of the query is retried, as a restart
    is, and the server serves; one log line per retry."""
    server, tokens = served
    assert not list(tokens.iterdir())  # both starts were tried, and failed
    lines = server.lines
    serving = next(n for n, line in enumerate(lines) if "serving" in line)
    # retried before it served (the lines of the module's other tests come after)
    assert "".join(lines[:serving]).count("streaming query stopped at transient failure") >= 1
    cluster = Cluster(["127.0.0.1"], port=server.port, load_balancing_policy=RoundRobinPolicy())
    try:
        cql = cluster.connect()
        cql.default_timeout = RECOVER_S
        cql.execute(KS)
        cql.execute(TABLE.format(name="first"))
        cql.execute("INSERT INTO ks.first (pk, v) VALUES (1, 1)")
        assert [tuple(r) for r in cql.execute("SELECT pk, v FROM ks.first")] == [(1, 1)]
        assert _applied(cql, "first") == 1
    finally:
        cluster.shutdown()


def _applied(cql: Any, table: str) -> int:
    return int(cql.execute(f"SELECT count(*) FROM ks.{table}").one().count)


def test_python_workers_killed_inside_executor_batches_are_survived(
    spark: Any, tmp_path: Path
) -> None:
    """Every batch runs the core in Spark tasks (``driver_max_rows=0``); their Python
    workers are killed (SIGKILL) again and again while a writer writes: each failed Spark
    job is retried in the batch, and every write is applied once."""
    session = cqlcdc.connect(data_dir=tmp_path / "data", master="local[2]", driver_max_rows=0)
    try:
        session.execute(KS)
        session.execute(TABLE.format(name="t"))
        retries_before = _retries()
        applied: list[int] = []
        errors: list[str] = []
        for pk in range(60):
            try:
                session.execute(f"INSERT INTO ks.t (pk, v) VALUES ({pk}, {pk}) IF NOT EXISTS")
                applied.append(pk)
            except Exception as err:
                errors.append(f"{pk}: {type(err).__name__}: {err}")
            if pk % 10 == 5:  # mid-stream: the workers of the batch running now
                for pid, args in python_workers_of(os.getpid()).items():
                    if "pyspark.worker" in args or "pyspark.daemon" in args:
                        os.kill(pid, signal.SIGKILL)
        assert errors == []
        rows = sorted(tuple(r) for r in session.execute("SELECT pk, v FROM ks.t"))
        assert rows == [(pk, pk) for pk in applied]
        log = sorted(r.pk for r in session.execute("SELECT pk FROM ks.t_scylla_cdc_log"))
        assert log == applied
        assert _retries() > retries_before  # a job failed, and was retried, not a stop
    finally:
        session.close()


def _retries() -> float:
    from cqlcdc.observe.instruments import REGISTRY

    return REGISTRY.get_sample_value(RETRIES, {"cause": "transient"}) or 0.0
