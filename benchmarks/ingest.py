"""Ingest baseline: mutations/s and write-ack latency through the real engine.

Workload: UPDATEs over a number of partitions of a CDC-enabled table, written through the
session in groups (one ingest append and one wait per group, as a client pipelining writes
would), then single acknowledged writes for the latency distribution.

    .venv/bin/python benchmarks/ingest.py --updates 200000 --partitions 20000

Prints a table and writes benchmarks/results/ingest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--group", type=int, default=5_000, help="writes per pipelined group")
    parser.add_argument("--latency-writes", type=int, default=200)
    args = parser.parse_args()

    import cqlcdc

    data_dir = tempfile.mkdtemp(prefix="cqlcdc-bench-")
    session = cqlcdc.connect(data_dir=data_dir)
    session.execute(
        "CREATE KEYSPACE bench WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute(
        "CREATE TABLE bench.t (pk int, ck int, v int, w text, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    from cqlcdc.cql import parse_statement

    start = time.perf_counter()
    for lo in range(0, args.updates, args.group):
        group = [
            parse_statement(
                f"UPDATE bench.t SET v = {i}, w = 'x{i}' "
                f"WHERE pk = {i % args.partitions} AND ck = {i % 20}"
            )
            for i in range(lo, min(lo + args.group, args.updates))
        ]
        for result in session.execute_many(group):
            if isinstance(result, Exception):
                raise result
    elapsed = time.perf_counter() - start
    rate = args.updates / elapsed

    latencies = []
    for i in range(args.latency_writes):
        t0 = time.perf_counter()
        session.execute(f"UPDATE bench.t SET v = {i} WHERE pk = 1 AND ck = 1")
        latencies.append((time.perf_counter() - t0) * 1000)
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    session.close()

    result = {
        "updates": args.updates,
        "partitions": args.partitions,
        "elapsed_s": round(elapsed, 2),
        "mutations_per_s": round(rate, 1),
        "ack_p50_ms": round(p50, 1),
        "ack_p99_ms": round(p99, 1),
    }
    print(f"{'metric':<20}{'value':>14}")
    for k, v in result.items():
        print(f"{k:<20}{v:>14}")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "ingest.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
