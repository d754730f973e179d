"""Scaling check: does applying a fixed batch get slower as the table grows?

Builds a CDC-enabled table through the engine in large groups (``session.execute_many``),
and at two table sizes times one fixed batch of 10k UPDATEs to existing rows (the same
statements each time): wall time to the commit, and the engine's own split of that batch
(core incl. state reads, commits, maintenance). Compaction runs as configured
(``--no-compaction`` to see the files pile up instead).

    .venv/bin/python benchmarks/scaling.py            # 100k and 1M rows
    .venv/bin/python benchmarks/scaling.py --quick    # 10k and 100k rows

Prints a table and writes benchmarks/results/scaling.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

ROWS_PER_PARTITION = 10


def _settle(session: Any, batches: int) -> None:
    """Wait until the engine has finished (incl. maintenance) `batches` batches."""
    deadline = time.monotonic() + 600
    while session.engine.batch_timings.count < batches and time.monotonic() < deadline:
        time.sleep(0.01)


def _grow(session: Any, first_row: int, last_row: int, group: int) -> float:
    """Insert rows [first_row, last_row) in groups; returns seconds taken."""
    from cqlcdc.cql import parse_statement

    start = time.perf_counter()
    for lo in range(first_row, last_row, group):
        statements = [
            parse_statement(
                f"INSERT INTO bench.t (pk, ck, v) VALUES "
                f"({i // ROWS_PER_PARTITION}, {i % ROWS_PER_PARTITION}, {i})"
            )
            for i in range(lo, min(lo + group, last_row))
        ]
        for result in session.execute_many(statements):
            if isinstance(result, Exception):
                raise result
    return time.perf_counter() - start


def _fixed_batch(session: Any, size: int, partitions: int, round_: int) -> dict[str, float]:
    """The same `size` UPDATEs to rows of the first `partitions` partitions, timed."""
    from cqlcdc.cql import parse_statement

    statements = [
        parse_statement(
            f"UPDATE bench.t SET v = {round_} WHERE pk = {(i * 7) % partitions} "
            f"AND ck = {i % ROWS_PER_PARTITION}"
        )
        for i in range(size)
    ]
    _settle(session, session.engine.batch_timings.count)
    done = session.engine.batch_timings.count
    start = time.perf_counter()
    for result in session.execute_many(statements):
        if isinstance(result, Exception):
            raise result
    wall = time.perf_counter() - start
    _settle(session, done + 1)
    timing = session.engine.batch_timings.since(done)[0]
    return {
        "wall_s": wall,
        "process_s": timing["process_s"],
        "commit_s": timing["commit_s"],
        "maintain_s": timing.get("maintain_s", 0.0),
    }


def _files_per_bucket(session: Any) -> dict[str, int]:
    import pyarrow as pa
    from deltalake import DeltaTable

    schema = session.catalog.table("bench", "t")
    out = {}
    for kind, column in (("base", "min.bucket"), ("log", "min._bucket")):
        path = session.engine.tables_dir / kind / schema.table_id
        actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
        counts = Counter(actions.column(column).to_pylist())
        out[f"{kind}_files_max_per_bucket"] = max(counts.values())
        out[f"{kind}_files"] = sum(counts.values())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10k and 100k rows")
    parser.add_argument("--batch", type=int, default=10_000, help="writes in the fixed batch")
    parser.add_argument("--group", type=int, default=20_000, help="writes per build group")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-compaction", action="store_true")
    args = parser.parse_args()
    sizes = [10_000, 100_000] if args.quick else [100_000, 1_000_000]

    import cqlcdc

    data_dir = tempfile.mkdtemp(prefix="cqlcdc-scaling-")
    session = cqlcdc.connect(data_dir=data_dir, num_buckets=16)
    if args.no_compaction:
        session.engine.maintenance.compactor = None  # maintenance off: every batch's files stay
    session.execute(
        "CREATE KEYSPACE bench WITH replication = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    session.execute(
        "CREATE TABLE bench.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    points = []
    built = 0
    # the fixed batch touches rows that exist at the smaller size already
    hot = sizes[0] // ROWS_PER_PARTITION
    for size in sizes:
        build_s = _grow(session, built, size, args.group)
        built = size
        runs = [_fixed_batch(session, args.batch, hot, r) for r in range(args.repeats)]
        point: dict[str, Any] = {"table_rows": size, "build_s": round(build_s, 1)}
        for key in runs[0]:
            point[key] = round(statistics.median(r[key] for r in runs), 3)
        point.update(_files_per_bucket(session))
        points.append(point)
    compactor = session.engine.maintenance.compactor
    compactions = compactor.compactions if compactor is not None else 0
    session.close()

    header = ["table_rows", "wall_s", "process_s", "commit_s", "maintain_s", "base_files"]
    print(f"fixed batch: {args.batch} UPDATEs, median of {args.repeats}; compactions {compactions}")
    print(" | ".join(f"{h:>12}" for h in header))
    for p in points:
        print(" | ".join(f"{p[h]:>12}" for h in header))
    result = {
        "batch_writes": args.batch,
        "repeats": args.repeats,
        "compaction": not args.no_compaction,
        "compactions": compactions,
        "points": points,
        "slowdown": round(points[-1]["wall_s"] / points[0]["wall_s"], 2),
    }
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    name = "scaling-quick.json" if args.quick else "scaling.json"
    (out / name).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
