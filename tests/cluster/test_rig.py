"""The rig itself: tasks run on the two workers (never in the driver), a task that opens a
file the driver just wrote fails, and a cluster with no room for an executor makes
``cqlcdc serve`` fail at start in one line instead of waiting forever."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.rig import SparkCluster, free_port

pytestmark = [pytest.mark.cluster, pytest.mark.spark]  # Spark on the rig, in subprocesses

PROBE = r"""
import json, os, sys, time
from pathlib import Path

from pyspark import BarrierTaskContext

from cqlcdc.pipeline.spark import executor_count, get_spark

master, driver_file = sys.argv[1], Path(sys.argv[2])
driver_file.write_text("written by the driver")
spark = get_spark(master)
deadline = time.monotonic() + 60
while executor_count(spark) < 2 and time.monotonic() < deadline:
    time.sleep(0.2)  # the barrier stage below needs both slots registered
sc = spark.sparkContext


def where():
    # the executor JVM is an ancestor of this Python worker: its command line names it
    pid, executor = os.getpid(), None
    while pid > 1 and executor is None:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        if b"--executor-id" in args:
            executor = args[args.index(b"--executor-id") + 1].decode()
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return {"pid": os.getpid(), "executor": executor, "mnt": os.readlink("/proc/self/ns/mnt"),
            "host": os.uname().nodename}


def try_open(_):
    try:
        return [{"opened": Path(str(driver_file)).read_text(), **where()}]
    except FileNotFoundError as e:
        return [{"error": type(e).__name__, "message": str(e), **where()}]


def who(_):
    BarrierTaskContext.get().barrier()  # both tasks at once: one on each worker's slot
    return [where()]


out = {
    "driver": {"pid": os.getpid(), "mnt": os.readlink("/proc/self/ns/mnt"),
               "host": os.uname().nodename},
    "executors": executor_count(spark),
    "open": sc.parallelize(range(2), 2).mapPartitions(try_open).collect(),
    "who": sc.parallelize(range(2), 2).barrier().mapPartitions(who).collect(),
}
spark.stop()
print("PROBE " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def probe(
    cluster: SparkCluster, tmp_path_factory: pytest.TempPathFactory, s3_server: Any
) -> dict[str, Any]:
    """One driver process on the cluster runs both probes (a Spark start is the cost)."""
    from tests.cluster.rig import driver_env

    before = sum(cluster.finished_tasks())
    tmp = tmp_path_factory.mktemp("probe")
    env = driver_env(s3_server, tmp)
    driver_file = tmp / "driver-only.txt"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, cluster.master_url, str(driver_file)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("PROBE ")]
    assert done.returncode == 0 and lines, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(lines[-1][len("PROBE ") :])
    result["driver_file"] = str(driver_file)
    result["finished_on_workers"] = sum(cluster.finished_tasks()) - before
    assert driver_file.read_text() == "written by the driver"  # it is there, for the driver
    return result


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


def test_no_room_for_an_executor_fails_at_start_in_one_line(
    cluster_env: dict[str, str], cluster: SparkCluster, tmp_path: Path
) -> None:
    """The workers offer 1g each; an executor of 2g fits on none, which Spark would wait
    for forever without a word."""
    env = {**cluster_env, "SPARK_EXECUTOR_MEMORY": "2g", "CQLCDC_EXECUTOR_WAIT_S": "4"}
    done = subprocess.run(
        [
            *(sys.executable, "-m", "cqlcdc.cli", "serve", "--master", cluster.master_url),
            *("--data-dir", str(tmp_path / "data"), "--port", str(free_port())),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1, done.stderr
    # the error is one line; the event log's lines (taking and giving back the data
    # directory) are not errors
    lines = [line for line in done.stderr.strip().splitlines() if ": INFO: " not in line]
    assert len(lines) == 1, done.stderr
    assert f"no Spark executor registered with {cluster.master_url} within 4 s" in lines[0]
    assert "spark.executor.memory = 2g" in lines[0]
    assert len(cluster.alive_workers()) == 2  # the workers are untouched
    assert os.path.exists(tmp_path / "data")
