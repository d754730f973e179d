"""``spark.read.format("cqlcdc")`` beside pyarrow reading the very same Delta files, in one run.

One CDC table (no images) gets `--rows` single-row INSERTs through the bulk path, so its log
holds that many rows. Then:

    spark log read      spark.read.format("cqlcdc") of the whole log, every column, into
                        Spark's noop sink (one task per data file, Arrow batches)
    pyarrow log read    DeltaTable(log, version).to_pyarrow_dataset().to_table(): the same
                        files at the same version, every column, in this process
    spark stream read   spark.readStream.format("cqlcdc") of the whole log into the noop
                        sink, with a checkpoint (one micro-batch)
    spark stream-id     the log filtered to one cdc$stream_id (pushed down: its bucket's files)
    spark base read     spark.read.format("cqlcdc") of the base table: merged per partition in
                        Python, one task per bucket

Prints a table, writes `benchmarks/results/table_source.json` (`table_source-quick.json`);
the last line is one JSON object.

    .venv/bin/python benchmarks/table_source.py            # 1M rows
    .venv/bin/python benchmarks/table_source.py --quick    # 200k rows
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import cqlcdc
from cqlcdc.cdc.outputs import log_output
from cqlcdc.cql.ast import QualifiedName
from cqlcdc.datadir.commit import table_dir

RESULTS = Path(__file__).resolve().parent / "results"
KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
LOG = "ks.t_scylla_cdc_log"


def load(s: Any, rows: int) -> None:
    """INSERT `rows` rows, 100 clustering rows per partition (as benchmarks/reads.py)."""
    insert = s.prepare("INSERT INTO ks.t (pk, ck, v, name) VALUES (?, ?, ?, ?)")
    step = 500_000
    for first in range(0, rows, step):
        n = min(step, rows - first)
        ids = pa.array(np.arange(first, first + n, dtype=np.int32))
        names = pc.binary_join_element_wise(
            "n", pc.cast(pc.bit_wise_and(ids, 1023), pa.string()), ""
        )
        table = pa.table({"pk": pc.divide(ids, 100), "ck": ids, "v": ids, "name": names})
        s.execute_arrow(insert, table, wait=False)
    s.flush()


def best_s(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """The median time of ``runs`` calls (after one warm-up call) and the last result."""
    result = fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=None)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    rows = args.rows or (200_000 if args.quick else 1_000_000)
    data = Path(tempfile.mkdtemp(prefix="cqlcdc-table-source-bench-"))
    s = cqlcdc.connect(data_dir=data, master="local[2]")
    try:
        s.execute(KS)
        s.execute(
            "CREATE TABLE ks.t (pk int, ck int, v int, name text, PRIMARY KEY (pk, ck)) "
            "WITH cdc = {'enabled': true}"
        )
        load(s, rows)
        results = measure(s, data, rows, args.runs)
    finally:
        s.close()
        shutil.rmtree(data, ignore_errors=True)
    name = "table_source-quick.json" if args.quick else "table_source.json"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / name).write_text(json.dumps(results, indent=1) + "\n")
    print(f"{'read':<22}{'rows':>12}{'seconds':>10}{'rows/s':>14}")
    for key in ("spark_log", "pyarrow_log", "spark_stream", "spark_stream_id", "spark_base"):
        r = results[key]
        print(f"{key:<22}{r['rows']:>12,}{r['s']:>10.2f}{r['rows_per_s']:>14,.0f}")
    print(
        f"spark log read / pyarrow log read: {results['spark_vs_pyarrow']:.2f}x "
        f"({results['log_files']} data files)"
    )
    print(json.dumps(results))


def measure(s: Any, data: Path, rows: int, runs: int) -> dict[str, Any]:
    spark = s.coordinator.spark
    schema = s.coordinator.table(QualifiedName("ks", "t"), None)
    snap = s.coordinator.engine.snapshot()
    output = log_output(schema)
    version = snap.version_of(output)
    from deltalake import DeltaTable

    log = DeltaTable(str(table_dir(snap.tables_dir, output)), version=version)
    results: dict[str, Any] = {"rows": rows, "log_files": len(log.file_uris())}

    def entry(seconds: float, count: int) -> dict[str, Any]:
        return {"rows": count, "s": round(seconds, 3), "rows_per_s": round(count / seconds)}

    def reader(table: str) -> Any:
        return spark.read.format("cqlcdc").option("path", str(data)).option("table", table)

    def noop(df: Any) -> None:
        df.write.format("noop").mode("overwrite").save()

    seconds, _ = best_s(lambda: noop(reader(LOG).load()), runs)
    results["spark_log"] = entry(seconds, rows)
    seconds, table = best_s(lambda: log.to_pyarrow_dataset().to_table(), runs)
    assert table.num_rows == rows
    results["pyarrow_log"] = entry(seconds, rows)
    results["spark_vs_pyarrow"] = round(
        results["spark_log"]["rows_per_s"] / results["pyarrow_log"]["rows_per_s"], 3
    )

    def stream() -> None:
        checkpoint = Path(tempfile.mkdtemp(prefix="cqlcdc-table-source-ckpt-"))
        df = spark.readStream.format("cqlcdc").option("path", str(data)).option("table", LOG)
        query = (
            df.load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .start()
        )
        try:
            query.processAllAvailable()
            assert query.exception() is None
        finally:
            query.stop()
            shutil.rmtree(checkpoint, ignore_errors=True)

    seconds, _ = best_s(stream, runs)
    results["spark_stream"] = entry(seconds, rows)

    stream_id = table["cdc$stream_id"][0].as_py()
    one = reader(LOG).load().where(f"`cdc$stream_id` = X'{stream_id.hex()}'")
    seconds, count = best_s(one.count, runs)
    results["spark_stream_id"] = entry(seconds, count)

    seconds, _ = best_s(lambda: noop(reader("ks.t").load()), 1)
    results["spark_base"] = entry(seconds, rows)
    return results


if __name__ == "__main__":
    main()
