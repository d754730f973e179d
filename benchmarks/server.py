"""`cqlcdc serve` through the real cassandra-driver, beside the in-process Session.

Measures single-row prepared INSERTs with 1, 16 and 64 requests in flight (acknowledged =
durable in the ingest log, as the server acknowledges; the in-process Session is measured
the same way, `execute(..., wait=False)`), one-partition reads on a table of `--rows` rows,
and the stream-window log read a CDC consumer issues. The driver runs in a process of its
own, as a client application does (in the server's process it would share its GIL).
Prints a table, writes `benchmarks/results/server.json`; the last line is one JSON object
with `writes_per_s_64`, `ack_p99_ms_64`, `ack_p50_ms_1`, `read_p50_ms` (and
`node_writes_per_s_64`: the 64-in-flight writes through the Node.js driver, a cheaper client).

    .venv/bin/python benchmarks/server.py            # --rows 1000000 (the issue's table)
    .venv/bin/python benchmarks/server.py --quick    # 20k rows, shorter runs

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
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import pyarrow as pa
from cassandra.cluster import Cluster
from cassandra.policies import RoundRobinPolicy

import cqlcdc
from cqlcdc.server import CqlServer
from cqlcdc.session import Session

RESULTS = Path(__file__).resolve().parent / "results"
ROOT = Path(__file__).resolve().parents[1]
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


def driver_writes(session: Any, in_flight: int, seconds: float, base: int) -> dict[str, float]:
    """Prepared INSERTs, `in_flight` at a time, each timed from send to acknowledgement."""
    insert = session.prepare("INSERT INTO w (pk, v) VALUES (?, ?)")
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
    return _summary(latencies, time.monotonic() - started)


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
    print(json.dumps(driver_writes(cql, in_flight, seconds, in_flight * 10**8)))
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


def node_process(host: str, port: int, in_flight: int, seconds: float) -> dict[str, float]:
    """The same writes through the Node.js cassandra-driver (tests/node, installed by
    ``make setup``), whose cost per request is a fraction of the Python driver's: on a
    small machine the Python client, not the server, is what a 64-in-flight run measures."""
    script = Path(__file__).resolve().parent / "node_writes.js"
    return client_process(
        ["node", str(script), host, str(port), str(in_flight), str(seconds), str(10**12)]
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
    sys.path.insert(0, str(ROOT))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument(
        "--cluster", action="store_true", help="a standalone cluster and an s3:// data directory"
    )
    parser.add_argument("--s3-latency-ms", type=float, default=20.0)
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    if args.client:
        host, port, in_flight, seconds = args.client.split(":")
        client(host, int(port), int(in_flight), float(seconds))
        return
    if args.cluster:
        cluster_main(args)
        return
    rows = args.rows or (20_000 if args.quick else 1_000_000)
    seconds = 8.0 if args.quick else 20.0
    data = Path(tempfile.mkdtemp(prefix="cqlcdc-server-bench-"))
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    s.execute(KS)
    s.execute("CREATE TABLE ks.w (pk bigint PRIMARY KEY, v bigint) WITH cdc = {'enabled': true}")
    s.execute("CREATE TABLE ks.r (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    load = s.prepare("INSERT INTO ks.r (pk, ck, v) VALUES (?, ?, ?)")
    step = 200_000
    for first in range(0, rows, step):
        n = min(step, rows - first)
        ids = pa.array(range(first, first + n), pa.int32())
        s.execute_arrow(load, pa.table({"pk": pa.compute.divide(ids, 10), "ck": ids, "v": ids}))
    server = CqlServer(s.coordinator, port=0)
    host, port = server.start_in_thread()
    cluster = Cluster(
        [host], port=port, protocol_version=5, load_balancing_policy=RoundRobinPolicy()
    )
    cql = cluster.connect("ks")
    results: dict[str, Any] = {"rows": rows, "seconds_per_run": seconds}
    for in_flight in (1, 16, 64):
        results[f"driver_{in_flight}"] = driver_process(host, port, in_flight, seconds)
        results[f"session_{in_flight}"] = session_writes(s, in_flight, seconds, in_flight * 10**7)
    results["node_64"] = node_process(host, port, 64, seconds)
    read = cql.prepare("SELECT * FROM r WHERE pk = ?")
    results["read_p50_ms"] = timed(
        lambda i: cql.execute(read, ((i * 7919) % (rows // 10),)).all(), 50
    )
    local = Session(s.coordinator, "ks")
    local_read = local.prepare("SELECT * FROM r WHERE pk = ?")
    results["session_read_p50_ms"] = timed(
        lambda i: local.execute(local_read, ((i * 7919) % (rows // 10),)).all(), 50
    )
    streams = [
        r.streams
        for r in cql.execute("SELECT streams FROM system_distributed.cdc_streams_descriptions_v2")
    ]
    stream_ids = sorted({sid for group in streams for sid in group})[:4]
    window = cql.prepare(
        'SELECT * FROM w_scylla_cdc_log WHERE "cdc$stream_id" IN ? '
        'AND "cdc$time" > minTimeuuid(?) AND "cdc$time" < maxTimeuuid(?)'
    )
    now = int(time.time() * 1000)
    results["log_window_p50_ms"] = timed(
        lambda i: cql.execute(window, (stream_ids, now - 3_600_000, now)).all(), 10
    )
    cluster.shutdown()
    server.stop_thread()
    s.close()
    print(f"{'':24}{'writes/s':>12}{'ack p50 ms':>12}{'ack p99 ms':>12}")
    for kind in ("driver", "session"):
        for in_flight in (1, 16, 64):
            r = results[f"{kind}_{in_flight}"]
            print(
                f"{kind + f' ({in_flight} in flight)':24}{r['writes_per_s']:>12.1f}"
                f"{r['ack_p50_ms']:>12.1f}{r['ack_p99_ms']:>12.1f}"
            )
    r = results["node_64"]
    print(
        f"{'node driver (64)':24}{r['writes_per_s']:>12.1f}"
        f"{r['ack_p50_ms']:>12.1f}{r['ack_p99_ms']:>12.1f}"
    )
    print(
        f"one-partition read p50 on {rows:,} rows: driver {results['read_p50_ms']:.1f} ms, "
        f"session {results['session_read_p50_ms']:.1f} ms"
    )
    print(f"stream-window log read p50: {results['log_window_p50_ms']:.1f} ms")
    RESULTS.mkdir(exist_ok=True)
    name = "server-quick.json" if args.quick else "server.json"
    (RESULTS / name).write_text(json.dumps(results, indent=1))
    summary = {
        "writes_per_s_64": round(results["driver_64"]["writes_per_s"], 1),
        "node_writes_per_s_64": round(results["node_64"]["writes_per_s"], 1),
        "ack_p99_ms_64": round(results["driver_64"]["ack_p99_ms"], 1),
        "ack_p50_ms_1": round(results["driver_1"]["ack_p50_ms"], 1),
        "read_p50_ms": round(results["read_p50_ms"], 1),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
