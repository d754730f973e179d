"""The one SparkSession of a test run (a Spark start costs ~7 s here), and the one S3 server
(moto on loopback, the cluster rig's launcher; the cluster tests use it too) with a fresh
``s3://`` data directory per test."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from cqlcdc.location import Location
    from tests.cluster.rig import S3Server

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that asks for the SparkSession, itself or through a fixture, is a Spark test
    whether its file says so or not: ``-m "not spark"`` (``make unit``) leaves it out."""
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from cqlcdc.pipeline.spark import get_spark

    session = get_spark("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """The one S3 API server (moto) on 127.0.0.1 of the whole run, with bucket
    ``cqlcdc-test``: the cluster rig's (``tests/cluster/rig.moto_server``, a process of its
    own, its log in this run's ``moto-logs``), for the cluster tests and ``moto_s3`` alike."""
    from tests.cluster.rig import moto_server

    with moto_server(tmp_path_factory.mktemp("moto-logs")) as s3:
        yield s3


@pytest.fixture(scope="session")
def moto_s3(s3_server: S3Server) -> Iterator[str]:
    """``s3_server`` for this process's own clients: sets the standard AWS variables in
    ``os.environ`` for the session (not monkeypatch: it is function-scoped, and processes
    this one starts must inherit them) and puts the old values back after. Yields the
    endpoint URL.
    """
    saved = {name: os.environ.get(name) for name in s3_server.env}
    os.environ.update(s3_server.env)
    try:
        yield s3_server.endpoint
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture
def s3_data_dir(moto_s3: str) -> Location:
    """A fresh, empty data directory ``s3://cqlcdc-test/<uuid>`` on the moto server."""
    from cqlcdc.location import Location
    from tests.cluster.rig import BUCKET

    return Location.of(f"s3://{BUCKET}/{uuid.uuid4().hex}")
