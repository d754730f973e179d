"""The executor path on separate executor JVMs (``local-cluster``) gives the local outputs.

Spark runs one master per JVM and the test session already has a local one, so the
``local-cluster[2,1,1024]`` run happens in a child Python process; the local run uses the
session's ``spark`` fixture. Both run the same workload; what is deterministic must match.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import cqlcdc

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
DDL = [
    KS,
    "CREATE TABLE ks.t (pk int, ck int, v text, st set<int>, l list<int>, PRIMARY KEY (pk, ck)) "
    "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}",
]
BULK = [
    f"INSERT INTO ks.t (pk, ck, v, st) VALUES ({i % 40}, {i % 7}, 'v{i}', {{{i}}})"
    for i in range(120)
] + [f"UPDATE ks.t SET l = l + [{i}] WHERE pk = {i % 40} AND ck = {i % 5}" for i in range(40)]
SINGLE = [
    "DELETE FROM ks.t WHERE pk = 1 AND ck > 3",
    "UPDATE ks.t SET v = 'x', st = st - {1} WHERE pk = 1 AND ck = 1",
    "DELETE FROM ks.t WHERE pk = 2",
]
QUERIES = [
    "SELECT pk, ck, v, st, l FROM ks.t",
    'SELECT "cdc$batch_seq_no", "cdc$operation", pk, ck, v, st, l FROM ks.t_scylla_cdc_log',
]


def run_workload(session: Any) -> list[list[str]]:
    """Run the workload on `session`; each query's rows as text, sorted, list keys masked."""
    for text in DDL:
        session.execute(text)
    results = session.execute_many(BULK)
    assert all(not isinstance(r, Exception) for r in results)
    for text in SINGLE:
        session.execute(text)
    return [
        sorted(re.sub(r"UUID\('[0-9a-f-]+'\)", "<key>", repr(tuple(r))) for r in session.execute(q))
        for q in QUERIES
    ]


CHILD = """
import json, sys
import cqlcdc
from tests.e2e.test_local_cluster import run_workload

s = cqlcdc.connect(data_dir=sys.argv[1], master="local-cluster[2,1,1024]", driver_max_rows=0)
try:
    sc = s.coordinator.spark.sparkContext
    assert sc.master.startswith("local-cluster"), sc.master
    # the driver's block manager plus one per executor JVM
    executors = sc._jsc.sc().getExecutorMemoryStatus().size() - 1
    out = run_workload(s)
    json.dump({"executors": executors, "results": out}, sys.stdout)
finally:
    s.close()
"""


def test_local_cluster_matches_local(spark: Any, tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = env.get("PYSPARK_PYTHON", sys.executable)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(tmp_path / "cluster")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        s = cqlcdc.connect(data_dir=tmp_path / "local", master="local[2]")
        try:
            local = run_workload(s)
        finally:
            s.close()
        stdout, stderr = child.communicate(timeout=150)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert child.returncode == 0, stderr[-3000:]
    cluster = json.loads(stdout)
    assert cluster["executors"] == 2
    assert cluster["results"] == local
    assert len(local[0]) > 0 and len(local[1]) > 0
