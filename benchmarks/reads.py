"""CQL reads through cqlcdc beside DuckDB on the same Delta files, in one run.

One CDC table (no images) gets `--rows` single-row INSERTs through the bulk path, so its
base table and its log each hold that many rows. Then, through cqlcdc's CQL read path
(`Session.execute`) and through DuckDB's Parquet reader over the very files of the committed
snapshot:

    base partition read     SELECT * FROM ks.t WHERE pk = ?            (DuckDB: the stored rows
                                                                         of that partition key)
    log window read         one stream, a cdc$time window of 1,000 rows (what a CDC consumer
                            issues: "cdc$stream_id" = ? AND "cdc$time" >= ? AND <= ?)
    log count               SELECT COUNT(*) ... WHERE "cdc$operation" = 2 ALLOW FILTERING,
                            as rows of the log scanned per second

Prints a table, writes `benchmarks/results/reads.json` (`reads-quick.json`); the last line
is one JSON object with `base_read_p50_ms`, `log_window_read_p50_ms`, `log_count_rows_per_s`,
the three `duckdb_*` figures and `rows`.

    .venv/bin/python benchmarks/reads.py            # 10M rows (the issue's tables)
    .venv/bin/python benchmarks/reads.py --quick    # 1M rows
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import cqlcdc
from cqlcdc.cdc.outputs import base_output, log_output
from cqlcdc.cql.ast import QualifiedName
from cqlcdc.datadir.commit import open_table, table_dir
from cqlcdc.storage.token import serialize_partition_key
from cqlcdc.storage.vectorized import timeuuid_ticks

RESULTS = Path(__file__).resolve().parent / "results"
KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
WINDOW_ROWS = 1_000
# DuckDB's view of a timeuuid's timestamp: the 60 bits of time_hi, time_mid and time_low
DUCK_TICKS = (
    '(\'0x\' || substr("cdc$time", 16, 3) || substr("cdc$time", 10, 4) '
    '|| substr("cdc$time", 1, 8))::BIGINT'
)


def p50_ms(fn: Callable[[int], Any], count: int) -> float:
    times = []
    for i in range(count):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def load(s: Any, rows: int) -> float:
    """INSERT `rows` rows of 100 clustering rows per partition; returns rows/s."""
    insert = s.prepare("INSERT INTO ks.t (pk, ck, v, name) VALUES (?, ?, ?, ?)")
    step = 500_000
    started = time.perf_counter()
    for first in range(0, rows, step):
        n = min(step, rows - first)
        ids = pa.array(np.arange(first, first + n, dtype=np.int32))
        names = pc.binary_join_element_wise(
            "n", pc.cast(pc.bit_wise_and(ids, 1023), pa.string()), ""
        )
        table = pa.table({"pk": pc.divide(ids, 100), "ck": ids, "v": ids, "name": names})
        s.execute_arrow(insert, table, wait=False)
    s.flush()
    return rows / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=None)
    args = parser.parse_args()
    rows = args.rows or (1_000_000 if args.quick else 10_000_000)
    data = Path(tempfile.mkdtemp(prefix="cqlcdc-reads-bench-"))
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    s.execute(KS)
    s.execute(
        "CREATE TABLE ks.t (pk int, ck int, v int, name text, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    load_rate = load(s, rows)
    schema = s.coordinator.table(QualifiedName("ks", "t"), None)
    snap = s.coordinator.engine.snapshot()
    tables = str(snap.tables_dir)
    duck = duckdb.connect()
    for name, output in (("base", base_output(schema)), ("log", log_output(schema))):
        # DuckDB's own Parquet reader over exactly the snapshot's files (its row-group
        # pruning included): the strongest reading of the same data we have here
        files = open_table(str(table_dir(tables, output)), snap.version_of(output)).file_uris()
        listed = ", ".join(f"'{f}'" for f in files)
        duck.execute(
            f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{listed}], union_by_name = true)"
        )
    partitions = rows // 100
    results: dict[str, Any] = {"rows": rows, "load_rows_per_s": round(load_rate)}

    # base partition read
    read = s.prepare("SELECT * FROM ks.t WHERE pk = ?")
    keys = [(i * 7919) % partitions for i in range(60)]
    assert len(s.execute(read, (keys[0],)).all()) == 100
    results["base_read_p50_ms"] = p50_ms(lambda i: s.execute(read, (keys[i],)).all(), 60)
    stored = [serialize_partition_key(schema, (k,)) for k in keys]
    results["duckdb_base_read_p50_ms"] = p50_ms(
        lambda i: duck.execute("SELECT * FROM base WHERE pk = ?", [stored[i]]).fetchall(), 60
    )

    # a stream's window of WINDOW_ROWS rows
    stream = duck.execute(
        'SELECT "cdc$stream_id" FROM log GROUP BY 1 ORDER BY count(*) DESC LIMIT 1'
    ).fetchone()[0]
    times = duck.execute(
        f'SELECT "cdc$time", {DUCK_TICKS} AS ticks FROM log WHERE "cdc$stream_id" = ? '
        "ORDER BY ticks",
        [stream],
    ).fetchall()
    start = len(times) // 2
    low, high = times[start][0], times[min(start + WINDOW_ROWS, len(times)) - 1][0]
    window = s.prepare(
        'SELECT * FROM ks.t_scylla_cdc_log WHERE "cdc$stream_id" = ? '
        'AND "cdc$time" >= ? AND "cdc$time" <= ?'
    )
    bounds = (stream, uuid.UUID(low), uuid.UUID(high))
    got = len(s.execute(window, bounds).all())
    low_ticks = int(timeuuid_ticks(pa.array([low]))[0])
    high_ticks = int(timeuuid_ticks(pa.array([high]))[0])
    duck_window = f'SELECT * FROM log WHERE "cdc$stream_id" = ? AND {DUCK_TICKS} BETWEEN ? AND ?'
    duck_got = len(duck.execute(duck_window, [stream, low_ticks, high_ticks]).fetchall())
    results["log_window_rows"] = got
    results["duckdb_log_window_rows"] = duck_got
    results["log_window_read_p50_ms"] = p50_ms(lambda i: s.execute(window, bounds).all(), 15)
    results["duckdb_log_window_read_p50_ms"] = p50_ms(
        lambda i: duck.execute(duck_window, [stream, low_ticks, high_ticks]).fetchall(), 15
    )

    # COUNT(*) with a filter over the whole log
    count = 'SELECT COUNT(*) FROM ks.t_scylla_cdc_log WHERE "cdc$operation" = 2 ALLOW FILTERING'
    n_ours = s.execute(count).one()[0]
    n_duck = duck.execute('SELECT count(*) FROM log WHERE "cdc$operation" = 2').fetchone()[0]
    assert n_ours == n_duck == rows, (n_ours, n_duck)
    ours_ms = p50_ms(lambda i: s.execute(count).one(), 5)
    duck_ms = p50_ms(
        lambda i: duck.execute('SELECT count(*) FROM log WHERE "cdc$operation" = 2').fetchone(),
        5,
    )
    results["log_count_rows_per_s"] = round(rows / (ours_ms / 1000))
    results["duckdb_log_count_rows_per_s"] = round(rows / (duck_ms / 1000))
    s.close()

    print(f"{'':28}{'cqlcdc':>14}{'DuckDB':>14}")
    print(
        f"{'base partition read p50':28}{results['base_read_p50_ms']:>11.1f} ms"
        f"{results['duckdb_base_read_p50_ms']:>11.1f} ms"
    )
    print(
        f"{f'log window ({got} rows) p50':28}{results['log_window_read_p50_ms']:>11.1f} ms"
        f"{results['duckdb_log_window_read_p50_ms']:>11.1f} ms"
    )
    print(
        f"{'log COUNT(*) with a filter':28}{results['log_count_rows_per_s'] / 1e6:>9.1f} M/s"
        f"{results['duckdb_log_count_rows_per_s'] / 1e6:>11.1f} M/s"
    )
    print(f"({rows:,} rows in the base table and in the log, loaded at {load_rate:,.0f} rows/s)")
    RESULTS.mkdir(exist_ok=True)
    name = "reads-quick.json" if args.quick else "reads.json"
    (RESULTS / name).write_text(json.dumps(results, indent=1))
    keys_out = (
        "base_read_p50_ms",
        "log_window_read_p50_ms",
        "log_count_rows_per_s",
        "duckdb_base_read_p50_ms",
        "duckdb_log_window_read_p50_ms",
        "duckdb_log_count_rows_per_s",
        "rows",
    )
    print(
        json.dumps(
            {
                k: (round(results[k], 1) if isinstance(results[k], float) else results[k])
                for k in keys_out
            }
        )
    )


if __name__ == "__main__":
    main()
