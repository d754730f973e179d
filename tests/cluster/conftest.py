"""The cluster rig of this directory (``rig.py``), started once per test session and only
when a test here asks for it: a Spark standalone master with two workers that cannot see
the driver's files, over the run's one S3 server (``s3_server``, tests/conftest.py). Drivers
run as subprocesses (``driver_env``): this pytest process keeps its own local SparkSession
for the other tests."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster.rig import S3Server, SparkCluster, driver_env, spark_cluster


@pytest.fixture(scope="session")
def rig_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cluster-logs")


@pytest.fixture(scope="session")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, rig_logs: Path, s3_server: S3Server
) -> Iterator[SparkCluster]:
    """The driver's temporary roots are hidden from the workers: this session's pytest
    base directory (every ``tmp_path``) and the system temporary directory (Spark's default
    local dirs), but not the checkout and venv the workers run from, wherever they are (a
    clone under ``/tmp``)."""
    hide = [tmp_path_factory.getbasetemp(), Path(tempfile.gettempdir())]
    with spark_cluster(rig_logs, hide, s3_server.env) as running:
        yield running


@pytest.fixture
def driver_tmp(tmp_path: Path) -> Path:
    """A driver's TMPDIR and Spark local dirs: inside ``tmp_path``, hidden from the workers."""
    path = tmp_path / "driver-tmp"
    path.mkdir()
    return path


@pytest.fixture
def cluster_env(s3_server: S3Server, cluster: SparkCluster, driver_tmp: Path) -> dict[str, str]:
    """The environment of a driver process on the cluster."""
    return driver_env(s3_server, driver_tmp)
