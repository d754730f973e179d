"""The rig itself: a cluster with no room for an executor makes ``cqlcdc serve`` fail at
start in one line instead of waiting forever. That tasks run on the two workers (never in
the driver) and that a task cannot open a file the driver just wrote is probed by the one
driver that also reads through Spark (``reader.py``): tests/cluster/test_cluster_e2e.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster.rig import SparkCluster, free_port

pytestmark = [pytest.mark.cluster, pytest.mark.spark]  # Spark on the rig, in subprocesses


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
