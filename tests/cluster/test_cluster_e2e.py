"""``cqlcdc serve --master spark://... --data-dir s3://...`` (issue 27 item 4): on the rig's
standalone cluster, whose workers cannot see the driver's files, with the data directory in
the S3 server, the same work gives what it gives on a local directory.

One cluster server runs the workload (a table with pre- and postimages and two changefeeds,
written by concurrent driver requests, and bulk writes large enough for the executors) and
the seed conformance cases; the same workload runs on a local directory through an in-process
server, while the cluster's server starts. Then ``changefeed read``, ``changefeed publish``
and ``spark.read.format("cqlcdc")`` (a pyspark driver on the cluster, the one that also runs
the rig's probes: ``reader.py``) read both directories. Writes of one key are ordered (one
round after another), writes of different keys race: so what must match is each key's
history, not the interleaving (offsets in a feed partition, stream ids, cdc$time).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cassandra.concurrent import execute_concurrent
from cassandra.query import BatchStatement, BatchType, dict_factory

import cqlcdc
from cqlcdc.server import CqlServer
from tests.cluster.reader import ClusterReader
from tests.cluster.rig import BUCKET, S3Server, SparkCluster, driver_env
from tests.cluster.served import connect, running, start
from tests.conformance.harness import build_script, check_case, collect_runs, load_cases
from tests.e2e.kafka_broker import Tansu, tansu
from tests.e2e.kafka_log import read_committed

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

TABLE_K = "CREATE TABLE kks.k (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
KS = "CREATE KEYSPACE cks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
DDL = [
    KS,
    "CREATE TABLE cks.t (pk int, ck int, v text, n int, s set<int>, PRIMARY KEY (pk, ck)) "
    "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}",
    "ALTER TABLE cks.t ADD CHANGEFEED images WITH (MODE = 'NEW_AND_OLD_IMAGES', "
    "FORMAT = 'JSON', TOPIC_MIN_ACTIVE_PARTITIONS = 2)",
    "ALTER TABLE cks.t ADD CHANGEFEED updates WITH (MODE = 'UPDATES', FORMAT = 'JSON')",
    "CREATE TABLE cks.bulk (pk int PRIMARY KEY, v text) WITH cdc = {'enabled': true}",
]
FEEDS = ["cks.t/images", "cks.t/updates"]
KEYS = 160  # (pk, ck) rows of cks.t, 40 partitions of 4
BULK_ROWS = 6_000  # written at once: micro-batches large enough to run on the executors
BULK_BATCH = 200
IN_FLIGHT = 64
BASE = "SELECT pk, ck, v, n, s FROM cks.t"
CASES = load_cases()
LEASE = {"CQLCDC_LEASE_TTL": "5"}  # the kill -9 test's: a killed driver's lease expires soon


def rounds() -> list[list[tuple[str, tuple[Any, ...]]]]:
    """The writes, round by round: every key's writes of a round go at once."""
    key = [(k // 4, k % 4) for k in range(KEYS)]
    insert = "INSERT INTO cks.t (pk, ck, v, n, s) VALUES (?, ?, ?, ?, ?)"
    update = "UPDATE cks.t SET v = ?, s = s + ? WHERE pk = ? AND ck = ?"
    delete = "DELETE FROM cks.t WHERE pk = ? AND ck = ?"
    change = "UPDATE cks.t SET n = ?, s = s - ? WHERE pk = ? AND ck = ?"
    again = "INSERT INTO cks.t (pk, ck, v) VALUES (?, ?, ?) USING TTL 86400"
    return [
        [(insert, (*key[k], f"a{k}", k, {k})) for k in range(KEYS)],
        [(update, (f"b{k}", {k + 1000}, *key[k])) for k in range(KEYS)],
        [(delete, key[k]) if k % 3 == 0 else (change, (2 * k, {k}, *key[k])) for k in range(KEYS)],
        [(again, (*key[k], f"c{k}")) for k in range(KEYS) if k % 5 == 0],
    ]


def cli(env: dict[str, str], *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """A ``cqlcdc`` command as its own process."""
    return subprocess.run(
        [sys.executable, "-m", "cqlcdc.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_workload(session: Any) -> None:
    """The DDL, the concurrent rounds, and the bulk rows (unlogged batches, all in flight
    at once, so micro-batches are large)."""
    for text in DDL:
        session.execute(text)
    prepared: dict[str, Any] = {}
    for writes in rounds():
        statements = [(prepared.setdefault(q, session.prepare(q)), params) for q, params in writes]
        results = execute_concurrent(session, statements, concurrency=IN_FLIGHT)
        failed = [r.result_or_exc for r in results if not r.success]
        assert not failed, failed[:3]
    insert = session.prepare("INSERT INTO cks.bulk (pk, v) VALUES (?, ?)")
    batches = []
    for first in range(0, BULK_ROWS, BULK_BATCH):
        batch = BatchStatement(batch_type=BatchType.UNLOGGED)
        for pk in range(first, min(first + BULK_BATCH, BULK_ROWS)):
            batch.add(insert, (pk, f"bulk{pk}"))
        batches.append((batch, ()))
    results = execute_concurrent(session, batches, concurrency=IN_FLIGHT)
    assert all(r.success for r in results), [r.result_or_exc for r in results][:3]


def _plain(value: Any) -> Any:
    """A CQL value in a comparable form (sets and lists as sorted lists)."""
    if isinstance(value, set | frozenset | list | tuple) or type(value).__name__ == "SortedSet":
        return sorted(_plain(v) for v in value)
    return value


def _uuid_time(value: Any) -> int:
    return int((value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))).time)


def histories(rows: list[dict[str, Any]], key: tuple[str, ...]) -> dict[Any, list[Any]]:
    """Log rows by key, in write order (cdc$time, then cdc$batch_seq_no), without the
    columns that depend on when and where a write was applied."""
    ordered = sorted(rows, key=lambda r: (_uuid_time(r["cdc$time"]), r["cdc$batch_seq_no"]))
    out: dict[Any, list[Any]] = defaultdict(list)
    for row in ordered:
        kept = {
            k: _plain(v)
            for k, v in row.items()
            if k not in ("cdc$stream_id", "cdc$time", "cdc$batch_seq_no")
        }
        out[tuple(row[k] for k in key)].append(sorted(kept.items()))
    return dict(out)


@dataclass
class Outcome:
    """What one run of the workload left, read through the driver."""

    base: list[tuple[Any, ...]]
    log: dict[Any, list[Any]]
    bulk: list[tuple[Any, ...]]
    bulk_log: list[tuple[Any, ...]]


def read_outcome(session: Any) -> Outcome:
    session.row_factory = dict_factory
    try:
        base = sorted(tuple(_plain(v) for v in r.values()) for r in session.execute(BASE))
        log = histories(list(session.execute("SELECT * FROM cks.t_scylla_cdc_log")), ("pk", "ck"))
        bulk = sorted((r["pk"], r["v"]) for r in session.execute("SELECT pk, v FROM cks.bulk"))
        bulk_log = sorted(
            (r["pk"], r["cdc$operation"], r["v"])
            for r in session.execute('SELECT pk, "cdc$operation", v FROM cks.bulk_scylla_cdc_log')
        )
    finally:
        session.row_factory = None
    return Outcome(base, log, bulk, bulk_log)


def stored_objects(s3: S3Server, uri: str) -> list[str]:
    """The keys of the S3 server's objects under ``uri`` (``s3://bucket/prefix``)."""
    import boto3

    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    client = boto3.client(
        "s3",
        endpoint_url=s3.endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )
    keys: list[str] = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


# First in the file: a test that starts a driver of its own runs before ``runs`` starts the
# reader, whose executors hold both workers' cores until the module ends


def test_kill_9_mid_load_then_a_restart_from_a_fresh_local_directory(
    cluster: SparkCluster, s3_server: S3Server, tmp_path: Path, spark: Any
) -> None:
    """The driver is killed while writes are in flight; another driver with no local state
    at all (a new TMPDIR, new Spark local dirs) takes the data directory over once the
    lease expires: every acknowledged write is there once, with its log row, and what is
    there equals those writes applied on a local directory."""
    s3_dir = f"s3://{BUCKET}/{uuid.uuid4()}"
    first_tmp, second_tmp = tmp_path / "first", tmp_path / "second"
    first_tmp.mkdir()
    second_tmp.mkdir()
    # the local directory's engine opens while the first driver starts
    served, local = started_meanwhile(
        cluster, s3_dir, {**driver_env(s3_server, first_tmp), **LEASE}, lambda: local_k(tmp_path)
    )
    try:
        kill_9_then_restart(cluster, s3_server, s3_dir, served, second_tmp, local)
    finally:
        local.close()


def local_k(tmp_path: Path) -> Any:
    """An engine on a local directory, with table kks.k (the same DDL as on the cluster)."""
    local = cqlcdc.connect(data_dir=tmp_path / "local", master="local[2]")
    try:
        local.execute(KS.replace("cks", "kks"))
        local.execute(TABLE_K)
    except BaseException:
        local.close()
        raise
    return local


def kill_9_then_restart(
    cluster: SparkCluster, s3_server: S3Server, s3_dir: str, served: Any, tmp: Path, local: Any
) -> None:
    """The kill -9 test's steps after the first driver started: the load, the kill, the
    restart, and the comparison with ``local`` (an engine on a local directory)."""
    assert served.proc.poll() is None, served.stderr()
    total, kill_after = 1000, 200  # writes still in flight (IN_FLIGHT) when it is killed
    acked: set[int] = set()
    killed = threading.Event()
    try:
        client_cluster, client = served.connect()
        client.execute(KS.replace("cks", "kks"))
        client.execute(
            "CREATE TABLE kks.k (pk int PRIMARY KEY, v int) WITH cdc = {'enabled': true}"
        )
        insert = client.prepare("INSERT INTO kks.k (pk, v) VALUES (?, ?)")
        slots = threading.Semaphore(IN_FLIGHT)
        lock = threading.Lock()

        def acknowledged(_: Any, pk: int) -> None:
            with lock:
                acked.add(pk)
                if len(acked) >= kill_after and not killed.is_set():
                    killed.set()
            slots.release()

        for pk in range(total):
            if killed.is_set():
                break
            slots.acquire()
            future = client.execute_async(insert, (pk, pk))
            future.add_callbacks(acknowledged, lambda _e, *_: slots.release(), callback_args=(pk,))
        killed.wait(timeout=300)
        served.kill()  # SIGKILL mid-load: writes in flight, no shutdown, the lease held
        with lock:
            acknowledged_then = set(acked)
        client_cluster.shutdown()
    finally:
        if served.proc.poll() is None:
            served.kill()
    assert len(acknowledged_then) >= kill_after
    # a new driver, no local state: refused while the lease lives, then it takes over
    env = {**driver_env(s3_server, tmp), **LEASE}
    deadline = time.monotonic() + 120
    while True:
        again = start(cluster.master_url, s3_dir, env)
        if again.proc.poll() is None:
            break
        assert "in use" in again.stderr(), again.stderr()  # refused in one line: the holder
        assert time.monotonic() < deadline, again.stderr()
    try:
        client_cluster, client = again.connect()
        present = {r.pk: r.v for r in client.execute("SELECT pk, v FROM kks.k")}
        logged = [r.pk for r in client.execute("SELECT pk FROM kks.k_scylla_cdc_log")]
        client_cluster.shutdown()
    except BaseException:
        again.stop()
        raise
    # the same writes on a local directory, while the driver stops (SIGTERM: it commits)
    with ThreadPoolExecutor(1) as pool:
        stopping = pool.submit(again.stop)
        try:
            local.execute_many([f"INSERT INTO kks.k (pk, v) VALUES ({pk}, {pk})" for pk in present])
            local_rows = {r.pk: r.v for r in local.execute("SELECT pk, v FROM kks.k")}
            local_logged = sorted(
                r.pk for r in local.execute("SELECT pk FROM kks.k_scylla_cdc_log")
            )
        finally:
            code = stopping.result()
    assert code == 0, again.stderr()[-4000:]
    assert stored_objects(s3_server, s3_dir)
    assert acknowledged_then <= present.keys() <= set(range(total))
    assert all(v == pk for pk, v in present.items())
    assert sorted(logged) == sorted(present)  # each write's log row, once
    # the same writes on a local directory give the same table and log
    assert local_rows == present
    assert local_logged == sorted(logged)


@dataclass
class Runs:
    """Both data directories after the workload, and what was read from them."""

    s3_dir: str
    local_dir: Path
    on_cluster: Outcome
    local: Outcome
    conformance: dict[str, Any]
    tasks_on_workers: int
    env: dict[str, str]
    # the one pyspark driver for the rig's probes and spark.read.format("cqlcdc"), started
    # as soon as the cluster is free: its start overlaps the tests that read through the CLI
    reader: ClusterReader


def run_locally(local_dir: Path) -> Outcome:
    """The workload on a local directory, through a server in this process (the session's
    Spark)."""
    session = cqlcdc.connect(data_dir=local_dir, master="local[2]")
    server = CqlServer(session.coordinator, port=0)
    server.start_in_thread()
    try:
        cluster_client, client = connect(server.port)
        run_workload(client)
        local = read_outcome(client)
        cluster_client.shutdown()
    finally:
        server.stop_thread()
        session.close()
    return local


def started_meanwhile(cluster: SparkCluster, s3_dir: str, env: dict[str, str], work: Any) -> Any:
    """A cluster server for ``s3_dir``, started (a driver and its executors: the slowest
    start here) while ``work()`` runs in this thread; returns it and what ``work`` returned.
    A failure of ``work`` kills the server."""
    with ThreadPoolExecutor(1) as pool:
        starting = pool.submit(start, cluster.master_url, s3_dir, env)
        try:
            done = work()
        except BaseException:
            served = starting.result()
            if served.proc.poll() is None:
                served.kill()
            raise
        return starting.result(), done


@pytest.fixture(scope="module")
def runs(
    spark: Any,
    cluster: SparkCluster,
    s3_server: S3Server,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Runs]:
    tmp = tmp_path_factory.mktemp("e2e")
    env = driver_env(s3_server, tmp / "driver-tmp")
    env["CQLCDC_EXECUTOR_MIN_BYTES"] = str(64 * 1024)
    (tmp / "driver-tmp").mkdir()
    s3_dir = f"s3://{BUCKET}/{uuid.uuid4()}"
    script, owners = build_script(CASES)
    (tmp / "conformance.cql").write_text(script)
    # the same work on a local directory (in this process), while the cluster's server
    # starts with the data directory in S3
    local_dir = tmp / "local"
    started, local = started_meanwhile(cluster, s3_dir, env, lambda: run_locally(local_dir))
    with running(started) as served:
        before = sum(cluster.finished_tasks())
        cluster_client, client = served.connect()
        run_workload(client)
        on_cluster = read_outcome(client)
        cluster_client.shutdown()
        tasks = sum(cluster.finished_tasks()) - before
        script_file, address = str(tmp / "conformance.cql"), f"127.0.0.1:{served.port}"
        done = cli(env, "run", script_file, "--format", "json", "--connect", address, timeout=600)
        conformance = collect_runs(CASES, owners, done.stdout)
    # the data directory is in the bucket (not, say, a local directory named "s3:")
    assert stored_objects(s3_server, s3_dir), f"nothing stored under {s3_dir}"
    assert not (tmp / "driver-tmp" / "s3:").exists()
    reader = ClusterReader.start(cluster, s3_dir, env, Path(env["TMPDIR"]))
    try:
        yield Runs(s3_dir, local_dir, on_cluster, local, conformance, tasks, env, reader)
    finally:
        reader.close()


def test_the_workload_on_s3_and_the_cluster_equals_the_local_directory(runs: Runs) -> None:
    local, remote = runs.local, runs.on_cluster
    assert len(local.base) == sum(1 for k in range(KEYS) if k % 3 or k % 5 == 0)
    assert remote.base == local.base
    assert remote.log.keys() == local.log.keys()
    for key, history in local.log.items():
        assert remote.log[key] == history, key
    assert len(local.bulk) == BULK_ROWS
    assert remote.bulk == local.bulk
    assert remote.bulk_log == local.bulk_log


def test_the_bulk_batch_ran_as_tasks_on_the_workers(runs: Runs) -> None:
    """6,000 writes in flight at once make micro-batches of thousands of writes: on a
    cluster the executors do batch work that large (issue 27: a batch of at least
    ``CQLCDC_EXECUTOR_MIN_BYTES`` of payload, lowered here so this small load reaches it),
    and their logs show it."""
    assert runs.tasks_on_workers > 0


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            id=c["id"],
            marks=[pytest.mark.xfail(strict=True, reason="known doc error")]
            if c.get("notes", "").startswith("KNOWN DOC ERROR:")
            else [],
        )
        for c in CASES
        if c.get("kind") != "informative"
    ],
)
def test_seed_case_on_the_cluster(case: dict[str, Any], runs: Runs) -> None:
    check_case(runs.conformance[case["id"]])


def feed_read(data_dir: str | Path, feed: str, env: dict[str, str]) -> list[dict[str, Any]]:
    done = cli(env, "changefeed", "read", feed, "--data-dir", str(data_dir), timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def by_key(records: list[dict[str, Any]]) -> dict[tuple[int, str], list[Any]]:
    """Each key's records in offset order, by (partition, key): a key's partition and the
    order of its records are the feed's promise; offsets across keys are not."""
    out: dict[tuple[int, str], list[Any]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r["partition"], r["offset"])):
        out[(r["partition"], json.dumps(r["key"], sort_keys=True))].append(r["value"])
    return dict(out)


@pytest.mark.parametrize("feed", FEEDS)
def test_changefeed_read_equals_the_local_directory(runs: Runs, feed: str) -> None:
    remote = feed_read(runs.s3_dir, feed, runs.env)
    local = feed_read(runs.local_dir, feed, runs.env)
    assert len(local) >= KEYS * 3
    assert by_key(remote) == by_key(local)
    # offsets are dense from 0 in each partition
    for records in (remote, local):
        for p in {r["partition"] for r in records}:
            offsets = sorted(r["offset"] for r in records if r["partition"] == p)
            assert offsets == list(range(len(offsets)))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tansu]:
    with tansu(tmp_path_factory.mktemp("tansu") / "tansu.log") as running:
        yield running


def test_publish_from_s3_equals_the_local_directory(runs: Runs, broker: Tansu) -> None:
    host, port = broker.bootstrap.split(":")
    published: dict[str, list[dict[str, Any]]] = {}
    for name, data_dir in (("s3", runs.s3_dir), ("local", str(runs.local_dir))):
        topic = f"images-{name}-{uuid.uuid4().hex[:8]}"
        done = cli(
            runs.env,
            *("changefeed", "publish", "cks.t/images", "--data-dir", data_dir),
            *("--bootstrap", broker.bootstrap, "--topic", topic),
        )
        assert done.returncode == 0, done.stderr
        published[name] = [
            {
                "partition": p,
                "offset": int(dict(r.headers)["cqlcdc.offset"] or b"-1"),
                "key": json.loads(r.key or b"null"),
                "value": json.loads(r.value or b"null"),
            }
            for p in range(2)
            for r in read_committed(host, int(port), topic, p)
        ]
    # what was published is what the directory's feed holds, offset for offset
    read = feed_read(runs.s3_dir, "cks.t/images", runs.env)
    key = lambda r: (r["partition"], r["offset"])  # noqa: E731
    assert sorted(published["s3"], key=key) == sorted(read, key=key)
    assert by_key(published["s3"]) == by_key(published["local"])


def spark_rows(rows: list[dict[str, Any]], table: str) -> Any:
    if table.endswith("_scylla_cdc_log"):
        return histories(rows, ("pk", "ck"))
    return sorted((tuple(_plain(v) for _, v in sorted(r.items())) for r in rows), key=repr)


def test_spark_read_format_cqlcdc_on_the_cluster(runs: Runs, spark: Any) -> None:
    remote = runs.reader.read()  # asserts the reads ran as tasks on the workers
    for table, rows in remote.items():
        df = spark.read.format("cqlcdc").option("path", str(runs.local_dir))
        local = [r.asDict(recursive=True) for r in df.option("table", table).load().collect()]
        local = json.loads(json.dumps(local, default=str))  # the same text forms
        assert len(rows) == len(local), table
        assert spark_rows(rows, table) == spark_rows(local, table), table


# The rig's probes (tests/cluster/test_rig.py tells the rest of the rig's story), run by the
# same driver as the read above.


@pytest.fixture(scope="module")
def probe(runs: Runs) -> dict[str, Any]:
    probed = runs.reader.probe()
    # it is there, for the driver
    assert Path(probed["driver_file"]).read_text() == "written by the driver"
    return probed


def test_a_task_cannot_open_a_file_the_driver_wrote(probe: dict[str, Any]) -> None:
    assert len(probe["open"]) == 2
    for task in probe["open"]:
        assert task.get("error") == "FileNotFoundError", task
        assert probe["driver_file"] in task["message"]


def test_tasks_run_on_the_two_workers_not_in_the_driver(probe: dict[str, Any]) -> None:
    driver = probe["driver"]
    assert probe["executors"] == 2
    tasks = probe["who"] + probe["open"]
    # every task ran in an executor JVM's Python worker, in a worker's mount namespace
    assert all(t["executor"] is not None for t in tasks), tasks
    assert all(t["pid"] != driver["pid"] and t["mnt"] != driver["mnt"] for t in tasks), tasks
    # the barrier stage's two tasks ran at once: one on each worker's executor
    assert sorted(t["executor"] for t in probe["who"]) == ["0", "1"]
    assert probe["who"][0]["mnt"] != probe["who"][1]["mnt"]  # a namespace per worker
    # and the workers' executors logged them: what the e2e tests count to show the same
    assert probe["finished_on_workers"] == 4
