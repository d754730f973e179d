"""`cqlcdc serve` as a process of its own, through the real drivers, beside the in-process
Session: issue 28's targets, each printed beside its measured figure.

The read table is loaded in-process (``execute_arrow``), the session closed, and ``cqlcdc
serve`` started on that directory (``--workers N`` passed on when given). Against it:
single-row prepared INSERTs with 1, 16 and 64 requests in flight through the Python
cassandra-driver and the Node.js driver (``node_writes.js``, the cheaper client), each in a
process of its own (acknowledged = durable in the ingest log; the in-process Session is
measured the same way, ``execute(..., wait=False)``). For each run, from ``/proc``
(``cpu_accounting.py``): the CPU of every process of the server's tree by group (the serving
Python process, protocol workers, its JVM, Spark's Python workers) per acknowledged write,
the serving process's CPU per thread (named by ``py-spy dump``), and the client's own CPU
per request. One more 64-in-flight run is sampled with py-spy and folded into the stages of
a write's path (``cpu_stages.py``). Then one-partition reads on a table of ``--rows`` rows
and the window reads a CDC consumer repeats (``window_reads``: one stream's 1,000 rows and 64
streams' window of a ``--rows``-row log, in a data directory of 64 streams, in a process of
its own with an in-thread server). Prints the tables, writes
``benchmarks/results/server.json`` (and the raw profile, ``server-profile.txt``); the last
line is one JSON object with ``cpu_us_per_write_64``, ``writes_per_s_64``, ``ack_p50_ms_1``,
``ack_p99_ms_64``, ``read_p50_ms``, ``window_read_p50_ms``, ``window64_read_p50_ms`` (the
writes through the cheapest client: Node when it is installed).

The cost of ``--metrics`` (only with ``--metrics-overhead``, an in-thread server): the same
64-in-flight writes with and without a metrics endpoint
(scraped every 5 s, three times as often as a usual 15 s job), in pairs whose order
alternates, printed as the change of throughput (``metrics_overhead_pct``), of the server's
CPU per write (``cpu_overhead_pct``), and the metrics' own CPU measured inside those runs as
a share of the server's (``metrics_cpu_share_pct``): on a machine others load, the first
two move by more than the metrics cost, the last does not.

    .venv/bin/python benchmarks/server.py            # --rows 1000000 (the issue's table), ~6 min
    .venv/bin/python benchmarks/server.py --quick    # 20k rows, shorter runs, ~3 min
    .venv/bin/python benchmarks/server.py --workers 2  # cqlcdc serve --workers 2
    .venv/bin/python benchmarks/server.py --metrics-overhead  # only the --metrics runs
    .venv/bin/python benchmarks/server.py --window-only  # only the window reads (~2 minutes)

``--cluster`` measures ``cqlcdc serve --master spark://... --data-dir s3://...`` instead: a
moto S3 server, the counting proxy (``s3_proxy.py``, ``--s3-latency-ms`` per request, 20 by
default) in front of it, and a Spark standalone master with two workers (the rig of
``tests/cluster``); 64 writes in flight, then the object-store requests per 1,000
acknowledged writes by kind and by object (the ingest appends, each Delta table's commits
and data files, the manifest, the lease...). Writes ``benchmarks/results/server-s3.json``
(``server-s3-<N>ms.json`` at another latency).

    .venv/bin/python benchmarks/server.py --cluster [--seconds 20] [--in-flight 64]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import numpy as np
import pyarrow as pa
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

import cqlcdc
from cqlcdc.server import CqlServer
from cqlcdc.session import Session

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cpu_accounting import GROUPS  # noqa: E402
from benchmarks.serve_process import (  # noqa: E402
    counters,
    idle_cpu,
    measured_run,
    node_client_argv,
    py_spy,
    python_client_argv,
    start_served,
)
from benchmarks.targets import format_rows, target_rows  # noqa: E402
from tests.e2e.served_process import ServedProcess  # noqa: E402

CLUSTER_DATA_DIR = "s3://cqlcdc-test/server-bench"  # the rig's bucket
IDLE_S = 3.0  # no object write (but the lease's) for this long: the acknowledged writes are in
KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


def _summary(latencies: list[float], elapsed: float) -> dict[str, float]:
    return {
        "writes_per_s": len(latencies) / elapsed,
        "ack_p50_ms": _pct(latencies, 0.5),
        "ack_p99_ms": _pct(latencies, 0.99),
        "writes": float(len(latencies)),
    }


def driver_writes(
    session: Any, in_flight: int, seconds: float, base: int, announce: bool = False
) -> dict[str, float]:
    """Prepared INSERTs, `in_flight` at a time, each timed from send to acknowledgement;
    with ``client_cpu_s``, this process's CPU over the loop (every thread: the driver's
    event loop too). ``announce`` prints ``go`` as the loop starts (``serve_process``)."""
    insert = session.prepare("INSERT INTO w (pk, v) VALUES (?, ?)")
    if announce:
        print("go", flush=True)
    cpu0 = time.process_time()
    latencies: list[float] = []
    failures: list[Any] = []
    cond = threading.Condition()
    outstanding = [0]
    deadline = time.monotonic() + seconds
    counter = iter(range(base, base + 10**9))
    started = time.monotonic()

    def send() -> None:
        with cond:
            if time.monotonic() >= deadline or failures:
                cond.notify_all()
                return
            outstanding[0] += 1
            n = next(counter)
        t0 = time.perf_counter()
        future = session.execute_async(insert, (n, n))

        def finished(err: Any = None) -> None:
            with cond:
                outstanding[0] -= 1
                if err is None:
                    latencies.append(time.perf_counter() - t0)
                else:
                    failures.append(err)
                cond.notify_all()
            send()

        future.add_callbacks(lambda _: finished(), finished)

    for _ in range(in_flight):
        send()
    with cond:
        cond.wait_for(lambda: time.monotonic() >= deadline and outstanding[0] == 0, seconds + 60)
    if failures:
        raise RuntimeError(f"writes failed: {failures[0]}")
    return {
        **_summary(latencies, time.monotonic() - started),
        "client_cpu_s": time.process_time() - cpu0,
    }


def session_writes(s: Any, threads: int, seconds: float, base: int) -> dict[str, float]:
    """The same INSERTs from `threads` threads sharing one in-process coordinator."""
    latencies: list[float] = []
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def work(n: int) -> None:
        session = Session(s.coordinator, "ks")
        insert = session.prepare("INSERT INTO w (pk, v) VALUES (?, ?)")
        i = 0
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            session.execute(insert, (base + n * 10**6 + i, i), wait=False)
            with lock:
                latencies.append(time.perf_counter() - t0)
            i += 1

    started = time.monotonic()
    pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return _summary(latencies, time.monotonic() - started)


def timed(fn: Any, count: int) -> float:
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def client(host: str, port: int, in_flight: int, seconds: float) -> None:
    """The driver's side of one write run, in its own process: prints its summary as JSON."""
    cluster = Cluster(
        [host], port=port, load_balancing_policy=RoundRobinPolicy(), protocol_version=5
    )
    cql = cluster.connect("ks")
    print(json.dumps(driver_writes(cql, in_flight, seconds, in_flight * 10**8, announce=True)))
    cluster.shutdown()


def client_process(argv: list[str]) -> dict[str, float]:
    """Run a client of one write run in its own process; its last line is its summary."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"the client {argv[0]} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def driver_process(host: str, port: int, in_flight: int, seconds: float) -> dict[str, float]:
    """The writes through the Python cassandra-driver (``client``)."""
    return client_process(
        [sys.executable, __file__, "--client", f"{host}:{port}:{in_flight}:{seconds}"]
    )


NODE_CONNECTIONS = 8  # the Node client's connections: --workers spreads connections, by a hash


def node_process(host: str, port: int, in_flight: int, seconds: float) -> dict[str, float]:
    """The same writes through the Node.js cassandra-driver (tests/node, installed by
    ``make setup``), whose cost per request is a fraction of the Python driver's: on a
    small machine the Python client, not the server, is what a 64-in-flight run measures.
    Over ``NODE_CONNECTIONS`` connections, so that every protocol worker has some."""
    script = Path(__file__).resolve().parent / "node_writes.js"
    return client_process(
        ["node", str(script), host, str(port), str(in_flight), str(seconds), str(10**12),
         str(NODE_CONNECTIONS)]
    )  # fmt: skip


SCRAPE_INTERVAL_S = 5.0  # a third of the 15 s a Prometheus job is usually given


def _scraper(url: str, stop: threading.Event) -> threading.Thread:
    """Scrape ``url`` every ``SCRAPE_INTERVAL_S`` until ``stop`` (a Prometheus server)."""
    import urllib.request

    def run() -> None:
        while not stop.wait(SCRAPE_INTERVAL_S):
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()

    thread = threading.Thread(target=run, name="scraper", daemon=True)
    thread.start()
    return thread


class _Meter:
    """Thread CPU spent inside the metrics code while a run goes on: every counting call
    (the connection's ``note_request``, the engine's ``group_committed`` and
    ``batch_finished``) and every collector's ``collect`` is wrapped to add its
    ``time.thread_time`` to ``seconds``. What the metrics cost, measured in the real run,
    as a share of the server's CPU: immune to the machine's other load, unlike
    throughput."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()
        self._undo: list[tuple[Any, str, Any]] = []

    def wrap(self, owner: Any, name: str) -> None:
        original = getattr(owner, name)

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.thread_time()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.thread_time() - t0
                with self._lock:
                    self.seconds += spent

        setattr(owner, name, timed)
        self._undo.append((owner, name, original))

    def __enter__(self) -> _Meter:
        from cqlcdc.observe import events
        from cqlcdc.server import connection, metrics

        self.wrap(connection, "note_request")
        self.wrap(events, "group_committed")
        self.wrap(events, "batch_finished")
        self.wrap(metrics.ServerCollector, "collect")
        self.wrap(metrics.PipelineCollector, "collect")
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)


def metrics_overhead(
    server: CqlServer, host: str, port: int, seconds: float, pairs: int
) -> dict[str, Any]:
    """64-in-flight writes without and with the metrics endpoint, in ``pairs`` pairs whose
    order alternates (off-on, on-off...: a drift of the machine's load cancels out); the
    overhead is the median of the pairs' drops of throughput. Also the CPU the metrics take,
    measured apart: per answered request, and per scrape."""
    from cqlcdc.observe import instruments
    from cqlcdc.server.metrics import MetricsEndpoint

    writes = node_process if _has_node() else driver_process
    runs: dict[str, list[float]] = {"off": [], "on": []}
    # the server's CPU per write (this process: the server, its engine's driver side): on a
    # machine others load, it varies far less than the throughput does
    cpu_us: dict[str, list[float]] = {"off": [], "on": []}
    shares: list[float] = []  # the metrics' CPU over the server's, in each run with them
    for pair in range(pairs):
        for mode in ("off", "on") if pair % 2 == 0 else ("on", "off"):
            endpoint = None
            stop = threading.Event()
            if mode == "on":
                endpoint = MetricsEndpoint.start(server, "127.0.0.1:0", "bench")
                scraper = _scraper(endpoint.url, stop)
            else:
                instruments.enabled = False  # as a server started without --metrics
            try:
                with _Meter() as meter:
                    cpu0 = time.process_time()
                    result = writes(host, port, 64, seconds)
                    cpu_s = time.process_time() - cpu0
                if mode == "on":
                    shares.append(meter.seconds / cpu_s * 100)
                cpu_us[mode].append(cpu_s / result["writes"] * 1e6)
                runs[mode].append(result["writes_per_s"])
            finally:
                if endpoint is not None:
                    stop.set()
                    scraper.join()
                    endpoint.close()
    drops = [(off - on) / off * 100 for off, on in zip(runs["off"], runs["on"], strict=True)]
    cpu_rises = [
        (on - off) / off * 100 for off, on in zip(cpu_us["off"], cpu_us["on"], strict=True)
    ]
    request_us, scrape_ms = _metrics_cpu(server)
    on_s = statistics.mean(runs["on"])
    # CPU seconds per second the metrics take at that throughput, scraped every 15 s
    cpu_pct = (on_s * request_us / 1e6 + scrape_ms / 1e3 / 15) * 100
    return {
        "client": writes.__name__,
        "writes_per_s_off": runs["off"],
        "writes_per_s_on": runs["on"],
        "pair_drops_pct": [round(d, 2) for d in drops],
        "metrics_overhead_pct": round(statistics.median(drops), 2),
        "server_cpu_us_per_write_off": [round(v, 1) for v in cpu_us["off"]],
        "server_cpu_us_per_write_on": [round(v, 1) for v in cpu_us["on"]],
        "cpu_overhead_pct": round(statistics.median(cpu_rises), 2),
        "metrics_cpu_share_pct": [round(v, 3) for v in shares],
        "request_us": round(request_us, 2),
        "scrape_ms": round(scrape_ms, 2),
        "metrics_cpu_pct_of_a_core": round(cpu_pct, 3),
    }


def _metrics_cpu(server: CqlServer) -> tuple[float, float]:
    """CPU time of counting one answered write (``note_request``) in µs, and of one scrape
    of the whole registry in ms (both in this process, single-threaded)."""
    from prometheus_client import generate_latest

    from cqlcdc.observe import instruments
    from cqlcdc.server.metrics import MetricsEndpoint, note_request
    from cqlcdc.server.results import VoidResult

    endpoint = MetricsEndpoint.start(server, "127.0.0.1:0", "bench")
    try:
        count = 100_000
        t0 = time.process_time()
        for _ in range(count):
            note_request(server, "EXECUTE", VoidResult(), time.perf_counter())
        request_us = (time.process_time() - t0) / count * 1e6
        scrapes = 20
        t0 = time.process_time()
        for _ in range(scrapes):
            generate_latest(instruments.REGISTRY)
        scrape_ms = (time.process_time() - t0) / scrapes * 1e3
    finally:
        endpoint.close()
    return request_us, scrape_ms


def _has_node() -> bool:
    modules = Path(__file__).resolve().parents[1] / "tests" / "node" / "node_modules"
    return shutil.which("node") is not None and modules.is_dir()


def print_overhead(result: dict[str, Any]) -> None:
    off = ", ".join(f"{v:,.0f}" for v in result["writes_per_s_off"])
    on = ", ".join(f"{v:,.0f}" for v in result["writes_per_s_on"])
    print(f"64 in flight ({result['client']}), writes/s without --metrics: {off}")
    print(f"64 in flight ({result['client']}), writes/s with --metrics:    {on}")
    drops = ", ".join(f"{d:.2f}%" for d in result["pair_drops_pct"])
    print(
        f"metrics overhead: {result['metrics_overhead_pct']:.2f}% of write throughput "
        f"(median of the pairs' drops: {drops})"
    )
    cpu_off = ", ".join(f"{v:,.0f}" for v in result["server_cpu_us_per_write_off"])
    cpu_on = ", ".join(f"{v:,.0f}" for v in result["server_cpu_us_per_write_on"])
    print(
        f"server CPU per write (us) without --metrics: {cpu_off}; with: {cpu_on}; median rise "
        f"{result['cpu_overhead_pct']:.2f}%"
    )
    share = ", ".join(f"{v:.2f}%" for v in result["metrics_cpu_share_pct"])
    print(f"the metrics' CPU, measured inside the runs with --metrics, of the server's: {share}")
    print(
        f"metrics CPU: {result['request_us']:.1f} us per request, {result['scrape_ms']:.1f} ms "
        f"per scrape: {result['metrics_cpu_pct_of_a_core']:.3f}% of a core at that throughput "
        "with a scrape every 15 s"
    )


def overhead_only(seconds: float, pairs: int) -> None:
    """Only the --metrics comparison, on a fresh directory (no read table to load)."""
    data = Path(tempfile.mkdtemp(prefix="cqlcdc-metrics-bench-"))
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    s.execute(KS)
    s.execute("CREATE TABLE ks.w (pk bigint PRIMARY KEY, v bigint) WITH cdc = {'enabled': true}")
    server = CqlServer(s.coordinator, port=0)
    host, port = server.start_in_thread()
    try:
        writes = node_process if _has_node() else driver_process
        writes(host, port, 64, seconds)  # warm up: Spark's first batches, the JIT of both
        result = metrics_overhead(server, host, port, seconds, pairs)
    finally:
        server.stop_thread()
        s.close()
        shutil.rmtree(data, ignore_errors=True)
    print_overhead(result)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "server-metrics.json").write_text(json.dumps(result, indent=1))
    print(
        json.dumps(
            {
                "metrics_overhead_pct": result["metrics_overhead_pct"],
                "cpu_overhead_pct": result["cpu_overhead_pct"],
                "metrics_cpu_share_pct": max(result["metrics_cpu_share_pct"]),
            }
        )
    )


def _object_writes(objects: dict[str, int]) -> int:
    """PUTs and POSTs (multipart uploads) to anything but the lease, which is renewed on a
    clock whether or not anything is written."""
    return sum(
        n
        for shape, n in objects.items()
        if shape.split(" ", 1)[0] in ("PUT", "POST") and "lease" not in shape
    )


def wait_idle(proxy: Any, timeout_s: float = 300.0) -> float:
    """Wait until the engine has applied what was acknowledged: no object write but the
    lease's for ``IDLE_S``. Returns the seconds waited."""
    started = time.monotonic()
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() - started < timeout_s:
        writes = _object_writes(proxy.objects())
        if writes != last:
            last, quiet_since = writes, time.monotonic()
        elif time.monotonic() - quiet_since >= IDLE_S:
            break
        time.sleep(0.25)
    return time.monotonic() - started


def per_thousand(counts: dict[str, int], writes: float) -> dict[str, float]:
    return {k: round(v * 1000 / writes, 2) for k, v in counts.items() if v}


def cluster_main(args: argparse.Namespace) -> None:
    """``cqlcdc serve`` on a standalone cluster with its data directory on S3 (moto behind
    the latency proxy); the writes through the Python cassandra-driver in its own process."""
    from benchmarks.s3_proxy import S3Proxy
    from tests.cluster.rig import S3Server, driver_env, moto_server, spark_cluster
    from tests.cluster.served import serving

    scratch = Path(tempfile.mkdtemp(prefix="cqlcdc-server-s3-"))
    logs, driver_tmp = scratch / "logs", scratch / "driver"
    logs.mkdir()
    driver_tmp.mkdir()
    latency_s = args.s3_latency_ms / 1000
    results: dict[str, Any] = {
        "data_dir": CLUSTER_DATA_DIR,
        "latency_ms": args.s3_latency_ms,
        "in_flight": args.in_flight,
        "seconds": args.seconds,
    }
    with moto_server(logs) as s3, S3Proxy(s3.endpoint, latency_s=latency_s) as proxy:
        env = {**s3.env, "AWS_ENDPOINT_URL": proxy.endpoint}  # executors' requests too
        with spark_cluster(logs, [driver_tmp], env) as cluster:
            served_env = driver_env(S3Server(proxy.endpoint, env), driver_tmp)
            print(f"cluster {cluster.master_url}, data {CLUSTER_DATA_DIR}", flush=True)
            with serving(cluster.master_url, CLUSTER_DATA_DIR, served_env) as served:
                cql_cluster, cql = served.connect()
                cql.execute(KS, timeout=120)
                cql.execute(
                    "CREATE TABLE ks.w (pk bigint PRIMARY KEY, v bigint) "
                    "WITH cdc = {'enabled': true}",
                    timeout=120,
                )
                cql_cluster.shutdown()
                # the first batches start the executors' Python workers: not measured
                driver_process("127.0.0.1", served.port, args.in_flight, 5.0)
                wait_idle(proxy)
                proxy.reset_all()
                run = driver_process("127.0.0.1", served.port, args.in_flight, args.seconds)
                during = proxy.reset_all()
                settle_s = wait_idle(proxy)
                after = proxy.reset_all()
                results["tasks_per_worker"] = cluster.finished_tasks()
    writes = run["writes"]
    kinds = ("PUT", "GET", "HEAD", "LIST", "DELETE", "POST")
    counts = {k: during["counts"][k] + after["counts"][k] for k in kinds}
    objects: dict[str, int] = {}
    for part in (during, after):
        for shape, n in part["objects"].items():
            objects[shape] = objects.get(shape, 0) + n
    results.update(
        {
            "writes": run,
            "settle_s": round(settle_s, 1),
            "requests": counts,
            "requests_per_1000_writes": per_thousand(counts, writes),
            "object_writes_per_1000": round(_object_writes(objects) * 1000 / writes, 2),
            "objects_per_1000_writes": per_thousand(
                dict(sorted(objects.items(), key=lambda kv: -kv[1])), writes
            ),
            "during_writes": during["counts"],
            "after_writes": after["counts"],
        }
    )
    RESULTS.mkdir(exist_ok=True)
    name = (
        "server-s3.json" if args.s3_latency_ms == 20 else f"server-s3-{args.s3_latency_ms:g}ms.json"
    )
    (RESULTS / name).write_text(json.dumps(results, indent=1) + "\n")
    print(
        f"{args.in_flight} in flight, +{args.s3_latency_ms:g} ms a request: "
        f"{run['writes_per_s']:.1f} writes/s, ack p50 {run['ack_p50_ms']:.1f} ms, "
        f"p99 {run['ack_p99_ms']:.1f} ms ({writes:.0f} writes; applied {settle_s:.1f} s after)"
    )
    print("requests per 1,000 acknowledged writes:")
    print(
        "  " + ", ".join(f"{k} {results['requests_per_1000_writes'].get(k, 0):.1f}" for k in kinds)
    )
    print(f"object writes (PUT/POST, not the lease) per 1,000: {results['object_writes_per_1000']}")
    print("by object, per 1,000 acknowledged writes:")
    for shape, n in list(results["objects_per_1000_writes"].items())[:40]:
        print(f"  {n:>10.2f}  {shape}")
    print(
        json.dumps(
            {
                "writes_per_s_64": round(run["writes_per_s"], 1),
                "ack_p50_ms": round(run["ack_p50_ms"], 1),
                "ack_p99_ms": round(run["ack_p99_ms"], 1),
                "object_writes_per_1000": results["object_writes_per_1000"],
            }
        )
    )


WINDOW_STREAMS = 64  # the window data directory's buckets: a 64-stream read names 64 live streams
WINDOW_ROWS = 1_000


def window_reads(rows: int) -> dict[str, Any]:
    """The reads ScyllaDB's CDC libraries repeat for every stream, through the server (the
    cassandra-driver, default page size 5,000) and in-process, on a log of ``rows`` rows in
    a data directory of 64 streams: one stream's window of 1,000 rows (``= ? AND >= ? AND
    <= ?``), and all 64 streams' window of about 1,000 rows in all (``IN ? AND >
    minTimeuuid(?) AND < maxTimeuuid(?)``, as scylla-cdc-go and the docs' consumers send
    it). Each is timed cold (the first read after the load: footers and row groups not yet
    decoded) and as the p50 of the reads after it, as a consumer polls."""
    from cqlcdc.storage.vectorized import timeuuid_ticks

    data = Path(tempfile.mkdtemp(prefix="cqlcdc-window-bench-"))
    s = cqlcdc.connect(data_dir=data, master="local[2]", num_buckets=WINDOW_STREAMS)
    s.execute(KS)
    s.execute(
        "CREATE TABLE ks.c (pk int, ck int, v int, name text, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    load = s.prepare("INSERT INTO ks.c (pk, ck, v, name) VALUES (?, ?, ?, ?)")
    for first in range(0, rows, 500_000):
        ids = pa.array(range(first, min(rows, first + 500_000)), pa.int32())
        names = pa.compute.binary_join_element_wise(
            "n", pa.compute.cast(pa.compute.bit_wise_and(ids, 1023), pa.string()), ""
        )
        s.execute_arrow(
            load,
            pa.table({"pk": pa.compute.divide(ids, 100), "ck": ids, "v": ids, "name": names}),
            wait=False,
        )
    s.flush()
    local = Session(s.coordinator, "ks")
    log = local.execute('SELECT "cdc$stream_id", "cdc$time" FROM c_scylla_cdc_log').table
    assert log is not None and log.num_rows == rows
    ids, ticks = log.column(0), timeuuid_ticks(log.column(1))
    counts = pa.compute.value_counts(ids).to_pylist()
    stream = max(counts, key=lambda c: c["counts"])["values"]
    mine = np.flatnonzero(pa.compute.equal(ids, pa.scalar(stream, pa.binary())).to_numpy(False))
    mine = mine[np.argsort(ticks[mine], kind="stable")]
    size = min(WINDOW_ROWS, len(mine) // 2)
    start = len(mine) // 2 - size // 2
    times = log.column(1)
    low, high = (uuid.UUID(times[int(mine[i])].as_py()) for i in (start, start + size - 1))
    everything = np.sort(ticks)
    middle = len(everything) // 2
    since = datetime.datetime(1582, 10, 15, tzinfo=datetime.UTC)
    stamps = [
        since + datetime.timedelta(microseconds=int(everything[i]) // 10)
        for i in (middle, min(middle + WINDOW_ROWS, len(everything) - 1))
    ]
    # every stream of the generation, as the libraries list them
    described = local.execute("SELECT streams FROM system_distributed.cdc_streams_descriptions_v2")
    streams = sorted({sid for row in described for sid in row[0]})
    one = (
        'SELECT * FROM c_scylla_cdc_log WHERE "cdc$stream_id" = ? '
        'AND "cdc$time" >= ? AND "cdc$time" <= ?'
    )
    many = (
        'SELECT * FROM c_scylla_cdc_log WHERE "cdc$stream_id" IN ? '
        'AND "cdc$time" > minTimeuuid(?) AND "cdc$time" < maxTimeuuid(?)'
    )
    server = CqlServer(s.coordinator, port=0)
    host, port = server.start_in_thread()
    cluster = Cluster(
        [host], port=port, protocol_version=5, load_balancing_policy=RoundRobinPolicy()
    )
    cql = cluster.connect("ks")
    one_q, many_q = cql.prepare(one), cql.prepare(many)
    one_args, many_args = (stream, low, high), (streams, *stamps)
    out: dict[str, Any] = {"rows": rows, "streams": len(streams)}
    t0 = time.perf_counter()
    out["window_rows"] = len(cql.execute(one_q, one_args).all())
    out["window_cold_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    t0 = time.perf_counter()
    out["window64_rows"] = len(cql.execute(many_q, many_args).all())
    out["window64_cold_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    out["window_read_p50_ms"] = round(timed(lambda i: cql.execute(one_q, one_args).all(), 30), 1)
    out["window64_read_p50_ms"] = round(
        timed(lambda i: cql.execute(many_q, many_args).all(), 30), 1
    )
    local_one, local_many = local.prepare(one), local.prepare(many)
    out["session_window_read_p50_ms"] = round(
        timed(lambda i: local.execute(local_one, one_args).all(), 30), 1
    )
    out["session_window64_read_p50_ms"] = round(
        timed(lambda i: local.execute(local_many, many_args).all(), 30), 1
    )
    cluster.shutdown()
    server.stop_thread()
    s.close()
    shutil.rmtree(data, ignore_errors=True)
    return out


def print_windows(w: dict[str, Any]) -> None:
    """The window rows, each with its target beside it."""
    ratio = w["window_read_p50_ms"] / w["session_window_read_p50_ms"]
    print(
        f"CDC window reads, {w['rows']:,}-row log in {w['streams']} streams (driver / in-process):"
    )
    one = f"one stream, {w['window_rows']:,} rows"
    many = f"{w['streams']} streams, {w['window64_rows']:,} rows"
    print(
        f"  {one:34}{w['window_read_p50_ms']:>8.1f} ms{w['session_window_read_p50_ms']:>8.1f} ms"
        f"  ({ratio:.1f}x)   target <= 20 ms, <= 2x   (cold {w['window_cold_ms']:.0f} ms)"
    )
    print(
        f"  {many:34}{w['window64_read_p50_ms']:>8.1f} ms"
        f"{w['session_window64_read_p50_ms']:>8.1f} ms"
        f"          target <= 50 ms   (cold {w['window64_cold_ms']:.0f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument(
        "--metrics-overhead", action="store_true", help="only the runs with and without --metrics"
    )
    parser.add_argument("--pairs", type=int, default=3, help="off/on pairs of --metrics runs")
    parser.add_argument(
        "--window-only", action="store_true", help="only the CDC consumer's window reads"
    )
    parser.add_argument(
        "--cluster", action="store_true", help="a standalone cluster and an s3:// data directory"
    )
    parser.add_argument("--s3-latency-ms", type=float, default=20.0)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--workers", type=int, default=None, help="passed to cqlcdc serve (default: its own)"
    )
    args = parser.parse_args()
    if args.client:
        host, port, in_flight, seconds = args.client.split(":")
        client(host, int(port), int(in_flight), float(seconds))
        return
    if args.cluster:
        cluster_main(args)
        return
    rows = args.rows or (20_000 if args.quick else 1_000_000)
    seconds = 8.0 if args.quick else 15.0
    if args.metrics_overhead:
        overhead_only(8.0 if args.quick else 20.0, args.pairs)
        return
    if args.window_only:
        window = window_reads(rows)
        print_windows(window)
        RESULTS.mkdir(exist_ok=True)
        name = "server-window-quick.json" if args.quick else "server-window.json"
        (RESULTS / name).write_text(json.dumps(window, indent=1))
        print(json.dumps(window))
        return
    served_main(args, rows, seconds)


def served_main(args: argparse.Namespace, rows: int, seconds: float) -> None:
    """The default run: the read table loaded in-process (and the in-process baselines),
    then ``cqlcdc serve`` on that directory as a process of its own, the write runs of each
    client measured from ``/proc``, a profiled run, the reads through it; then the window
    reads in a process of their own."""
    data = Path(tempfile.mkdtemp(prefix="cqlcdc-server-bench-")) / "data"
    s = cqlcdc.connect(data_dir=data, master=MASTER)
    s.execute(KS)
    s.execute("CREATE TABLE ks.w (pk bigint PRIMARY KEY, v bigint) WITH cdc = {'enabled': true}")
    s.execute("CREATE TABLE ks.r (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    load = s.prepare("INSERT INTO ks.r (pk, ck, v) VALUES (?, ?, ?)")
    step = 200_000
    for first in range(0, rows, step):
        n = min(step, rows - first)
        ids = pa.array(range(first, first + n), pa.int32())
        s.execute_arrow(load, pa.table({"pk": pa.compute.divide(ids, 10), "ck": ids, "v": ids}))
    results: dict[str, Any] = {"rows": rows, "seconds_per_run": seconds, "workers": args.workers}
    # the same writes and reads without the wire, for comparison (half as long)
    for in_flight in IN_FLIGHT:
        results[f"session_{in_flight}"] = session_writes(
            s, in_flight, seconds / 2, in_flight * 10**7
        )
    local = Session(s.coordinator, "ks")
    local_read = local.prepare("SELECT * FROM r WHERE pk = ?")
    results["session_read_p50_ms"] = timed(
        lambda i: local.execute(local_read, ((i * 7919) % (rows // 10),)).all(), 50
    )
    s.close()
    results["load_average_before"] = os.getloadavg()
    served = start_served(data, MASTER, args.workers)
    try:
        results.update(served_runs(served, data, rows, seconds, args.quick))
    finally:
        served.stop_cleanly()
        shutil.rmtree(data.parent, ignore_errors=True)
    results["load_average_after"] = os.getloadavg()
    # in a process of its own: a data directory of 64 streams, its own Spark session
    argv = [sys.executable, __file__, "--window-only", "--rows", str(rows)]
    results["window"] = client_process(argv + (["--quick"] if args.quick else []))
    RESULTS.mkdir(exist_ok=True)
    name = "server-quick.json" if args.quick else "server.json"
    (RESULTS / name).write_text(json.dumps(results, indent=1))
    summary = summarize(results)
    print_served(results, summary)
    print(json.dumps(summary))


MASTER = "local[2]"
IN_FLIGHT = (1, 16, 64)
WARM_UP_S = 5.0  # Spark's first batches start its Python workers: not measured
IDLE_WINDOW_S = 3.0


def committed_batch(data: Path) -> int:
    """The engine's last committed micro-batch (``manifest.json``): the batches a run took."""
    batch: int = json.loads((data / "manifest.json").read_text())["batch_id"]
    return batch


def served_runs(
    served: ServedProcess, data: Path, rows: int, seconds: float, quick: bool
) -> dict[str, Any]:
    """The write runs (each client, 1, 16 and 64 in flight), the profiled run and the
    one-partition reads, against a running server on ``data``."""
    pid, port = served.proc.pid, served.port
    cluster = Cluster(
        ["127.0.0.1"], port=port, protocol_version=5, load_balancing_policy=RoundRobinPolicy()
    )
    cql = cluster.connect("ks")
    cql.default_timeout = 120
    applied = cql.prepare("SELECT v FROM w WHERE pk = ?")

    def settle() -> None:  # a read waits for every acknowledged write to be applied
        cql.execute(applied, (0,)).all()

    bases = iter(range(1, 1000))
    clients: dict[str, Any] = {
        "driver": lambda n, secs: python_client_argv(__file__, port, n, secs),
    }
    if _has_node():
        clients["node"] = lambda n, secs: node_client_argv(port, n, secs, next(bases) * 10**12)
    cheapest = "node" if "node" in clients else "driver"
    out: dict[str, Any] = {"cheapest_client": cheapest}
    batches = {"batch_id": lambda: committed_batch(data), "counters": lambda: counters(served)}
    measured_run(pid, clients[cheapest](64, WARM_UP_S), settle)
    out["idle_cores"] = idle_cpu(pid, IDLE_WINDOW_S)
    for in_flight in IN_FLIGHT:
        for kind, argv in clients.items():
            out[f"{kind}_{in_flight}"] = measured_run(
                pid, argv(in_flight, seconds), settle, **batches
            )
            print(f"{kind} {in_flight} in flight: {_brief(out[f'{kind}_{in_flight}'])}", flush=True)
    if py_spy() is not None:
        RESULTS.mkdir(exist_ok=True)
        profile_path = RESULTS / ("server-profile-quick.txt" if quick else "server-profile.txt")
        profile_path.unlink(missing_ok=True)
        out["profile_64"] = measured_run(
            pid, clients[cheapest](64, seconds), settle, seconds - 1, profile_path, **batches
        )
    read = cql.prepare("SELECT * FROM r WHERE pk = ?")
    out["read_p50_ms"] = timed(lambda i: cql.execute(read, ((i * 7919) % (rows // 10),)).all(), 50)
    cluster.shutdown()
    return out


def _brief(r: dict[str, Any]) -> str:
    return (
        f"{r['writes_per_s']:,.0f} writes/s, ack p50 {r['ack_p50_ms']:.1f} ms, "
        f"server {r['server_cpu_us_per_write']:.0f} µs/write, "
        f"client {r['client_cpu_us_per_request']:.0f} µs/request, "
        f"{r['writes_per_batch']:.1f} writes and {r['server_cpu_ms_per_batch']:.1f} ms CPU "
        f"per micro-batch, {r['engine']['appends_per_1000_writes']:.0f} appends per 1,000 writes"
    )


def summarize(results: dict[str, Any]) -> dict[str, Any]:
    """The last line's figures: the writes through the cheapest client."""
    cheap = results["cheapest_client"]
    window = results["window"]
    return {
        "cpu_us_per_write_64": round(results[f"{cheap}_64"]["server_cpu_us_per_write"], 1),
        "writes_per_s_64": round(results[f"{cheap}_64"]["writes_per_s"], 1),
        "ack_p50_ms_1": round(results[f"{cheap}_1"]["ack_p50_ms"], 2),
        "ack_p99_ms_64": round(results[f"{cheap}_64"]["ack_p99_ms"], 1),
        "read_p50_ms": round(results["read_p50_ms"], 2),
        "window_read_p50_ms": window["window_read_p50_ms"],
        "window64_read_p50_ms": window["window64_read_p50_ms"],
        "window_ratio": round(
            window["window_read_p50_ms"] / window["session_window_read_p50_ms"], 2
        ),
        "writes_per_core_s_64": round(1e6 / results[f"{cheap}_64"]["server_cpu_us_per_write"], 1),
        "client": cheap,
        "driver_writes_per_s_64": round(results["driver_64"]["writes_per_s"], 1),
        "driver_cpu_us_per_write_64": round(results["driver_64"]["server_cpu_us_per_write"], 1),
        "workers": results["workers"],
        "load_average": results["load_average_after"][0],
    }


def print_served(results: dict[str, Any], summary: dict[str, Any]) -> None:
    """The write runs with their CPU per write by process group, the server's threads, the
    profile's stages, the reads, the window reads, then the targets."""
    kinds = [k for k in ("driver", "node") if f"{k}_1" in results]
    groups = list(GROUPS)
    print(
        f"\n{'writes (µs/write)':22}{'writes/s':>10}{'p50 ms':>8}{'p99 ms':>8}"
        + "".join(f"{g[:12]:>13}" for g in groups)
        + f"{'server':>9}{'client':>9}{'w/batch':>9}{'ms/batch':>9}"
    )
    for kind in kinds:
        for in_flight in IN_FLIGHT:
            r = results[f"{kind}_{in_flight}"]
            print(
                f"{kind + f' ({in_flight} in flight)':22}{r['writes_per_s']:>10,.0f}"
                f"{r['ack_p50_ms']:>8.1f}{r['ack_p99_ms']:>8.1f}"
                + "".join(f"{r['cpu_us_per_write'][g]:>13.1f}" for g in groups)
                + f"{r['server_cpu_us_per_write']:>9.1f}{r['client_cpu_us_per_request']:>9.1f}"
                + f"{r['writes_per_batch']:>9.1f}{r['server_cpu_ms_per_batch']:>9.1f}"
            )
    for in_flight in IN_FLIGHT:
        r = results[f"session_{in_flight}"]
        print(
            f"{f'in-process ({in_flight} threads)':22}{r['writes_per_s']:>10,.0f}"
            f"{r['ack_p50_ms']:>8.1f}{r['ack_p99_ms']:>8.1f}"
        )
    print(
        f"\n{'appends, micro-batches':22}{'appends/1k':>11}{'rec/append':>11}{'batches':>8}"
        f"{'batch ms':>9}  phases, wall ms per micro-batch"
    )
    for kind in kinds:
        for in_flight in IN_FLIGHT:
            e = results[f"{kind}_{in_flight}"]["engine"]
            phases = ", ".join(
                f"{k[len('micro_batch_') : -len('_ms')]} {v:.0f}"
                for k, v in e.items()
                if k.startswith("micro_batch_") and k.endswith("_ms") and k != "micro_batch_wall_ms"
            )
            print(
                f"{kind + f' ({in_flight} in flight)':22}{e['appends_per_1000_writes']:>11.1f}"
                f"{e['records_per_append']:>11.1f}{e['micro_batches']:>8.0f}"
                f"{e.get('micro_batch_wall_ms', 0):>9.0f}  {phases}"
            )
    idle = results["idle_cores"]
    print(
        "idle server (no client), cores: "
        + ", ".join(f"{g} {idle[g]:.3f}" for g in groups if idle[g] > 0)
    )
    cheap = results[f"{results['cheapest_client']}_64"]
    print(f"\nthe server's threads, µs per write ({results['cheapest_client']}, 64 in flight):")
    for name, us in list(cheap["thread_cpu_us_per_write"].items())[:12]:
        print(f"  {name:40}{us:>8.1f}")
    profile = results.get("profile_64")
    if profile is None:
        print("\nno stage profile: py-spy is not installed (pip install -e '.[dev]')")
    for pid, p in (profile or {}).get("stages", {}).items():
        print(
            f"\nstages of process {pid} (py-spy, {p['samples']} on-CPU samples; "
            f"{profile['writes_per_s']:,.0f} writes/s while sampled), µs per write:"
        )
        for stage, us in p["us_per_write"].items():
            print(f"  {stage:66}{us:>8.1f}")
            for module, part in p["us_per_write_by_module"].get(stage, {}).items():
                if part >= 5:
                    print(f"      {module:62}{part:>8.1f}")
    print(
        f"\none-partition read p50 on {results['rows']:,} rows: server "
        f"{results['read_p50_ms']:.1f} ms, in-process {results['session_read_p50_ms']:.1f} ms"
    )
    print_windows(results["window"])
    load = results["load_average_after"]
    print(f"\ntargets ({summary['client']} client; load average {load[0]:.1f} {load[1]:.1f}):")
    for line in format_rows(target_rows(summary)):
        print("  " + line)
    # what more cores would give: the figures per core of CPU, measured here
    client_us = results[f"{summary['client']}_64"]["client_cpu_us_per_request"]
    print(
        f"  per core: {summary['writes_per_core_s_64']:,.0f} writes/s of the server's CPU "
        f"(1 s / {summary['cpu_us_per_write_64']:,.0f} µs), and the client's "
        f"{client_us:,.0f} µs a request besides"
    )


if __name__ == "__main__":
    main()
