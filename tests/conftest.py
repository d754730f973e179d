"""The one SparkSession of a test run (a Spark start costs ~7 s here), and the one S3 server
(moto on loopback) with a fresh ``s3://`` data directory per test."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from cqlcdc.location import Location

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from cqlcdc.pipeline.spark import get_spark

    session = get_spark("local[2]")
    yield session
    session.stop()


# the bucket every object-store test writes under, each test in its own prefix
S3_TEST_BUCKET = "cqlcdc-test"
# the standard AWS environment pointing every client (pyarrow, delta-rs, boto3, executors
# started from this process) at the moto server
_S3_ENV = ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION")


# moto's S3 server in a process of its own: delta-rs holds the GIL in some calls (a table's
# restore), which deadlocks against a server thread in the test's own process
_MOTO_SERVER = (
    "import sys\n"
    "from moto.server import ThreadedMotoServer\n"
    "server = ThreadedMotoServer(ip_address='127.0.0.1', port=0, verbose=False)\n"
    "server.start()\n"
    "print(server.get_host_and_port()[1], flush=True)\n"
    "sys.stdin.read()  # until the test run closes it (or exits)\n"
    "server.stop()\n"
)


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[str]:
    """An S3 API server (moto) on 127.0.0.1 for the whole run, with bucket ``cqlcdc-test``.

    Sets the standard AWS variables in ``os.environ`` for the session (not monkeypatch: it
    is function-scoped, and processes this one starts must inherit them) and puts the old
    values back after. Yields the endpoint URL.
    """
    import boto3

    server = subprocess.Popen(
        [sys.executable, "-c", _MOTO_SERVER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    saved = {name: os.environ.get(name) for name in _S3_ENV}
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        endpoint = f"http://127.0.0.1:{port}"
        os.environ.update(
            AWS_ENDPOINT_URL=endpoint,
            AWS_ACCESS_KEY_ID="test",
            AWS_SECRET_ACCESS_KEY="test",
            AWS_REGION="us-east-1",
        )
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=S3_TEST_BUCKET)
        yield endpoint
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture
def s3_data_dir(moto_s3: str) -> Location:
    """A fresh, empty data directory ``s3://cqlcdc-test/<uuid>`` on the moto server."""
    from cqlcdc.location import Location

    return Location.of(f"s3://{S3_TEST_BUCKET}/{uuid.uuid4().hex}")
