"""``benchmarks/s3_proxy.py``: every request forwarded to the S3 server, counted by kind,
each delayed by the injected latency."""

from __future__ import annotations

import time
from collections.abc import Iterator

import boto3
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from benchmarks.s3_proxy import S3Proxy, object_shape, request_kind

from tests.cluster.rig import BUCKET, S3Server

pytestmark = pytest.mark.cluster
LATENCY_S = 0.05


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[S3Proxy]:
    with S3Proxy(s3_server.endpoint, latency_s=LATENCY_S) as running:
        yield running


def _client(endpoint: str) -> object:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )


def test_request_kinds() -> None:
    assert request_kind("GET", "/b?list-type=2&prefix=x%2F") == "LIST"
    assert request_kind("GET", "/b/") == "LIST"
    assert request_kind("GET", "/b?location") == "GET"  # GetBucketLocation lists nothing
    assert request_kind("GET", "/b/k?list-type=2") == "GET"  # a key is an object read
    assert request_kind("POST", "/b/k?uploads") == "POST"
    assert object_shape("PUT", "/b/d1/ingest/00000000000000000042.arrow") == "PUT d1/ingest/N.arrow"
    part = "/b/d1/t/part-00001-0f1e2d3c-aaaa-bbbb-cccc-0123456789ab-c000.snappy.parquet"
    assert object_shape("PUT", part) == "PUT d1/t/part-N-UUID-cN.snappy.parquet"
    assert object_shape("LIST", "/b?list-type=2&prefix=d1%2Fingest%2F") == "LIST d1/ingest/"


def test_boto3_calls_are_counted_by_kind_and_delayed(proxy: S3Proxy) -> None:
    s3: object = _client(proxy.endpoint)
    key = f"proxy/{time.time_ns()}"
    started = time.monotonic()
    s3.put_object(Bucket=BUCKET, Key=key, Body=b"x" * 1000)  # type: ignore[attr-defined]
    s3.put_object(Bucket=BUCKET, Key=key + "-2", Body=b"y")  # type: ignore[attr-defined]
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()  # type: ignore[attr-defined]
    head = s3.head_object(Bucket=BUCKET, Key=key)  # type: ignore[attr-defined]
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix="proxy/")  # type: ignore[attr-defined]
    s3.delete_object(Bucket=BUCKET, Key=key + "-2")  # type: ignore[attr-defined]
    elapsed = time.monotonic() - started
    assert body == b"x" * 1000 and head["ContentLength"] == 1000
    assert {o["Key"] for o in listed["Contents"]} >= {key, key + "-2"}
    assert proxy.counts() == {
        "PUT": 2,
        "GET": 1,
        "HEAD": 1,
        "LIST": 1,
        "DELETE": 1,
        "POST": 0,
        "OTHER": 0,
    }
    assert proxy.bytes_sent()["PUT"] == 1001
    objects = proxy.objects()  # by object sort: the key's numbers folded
    assert objects["PUT proxy/N"] == 1 and objects["PUT proxy/N-2"] == 1
    assert objects["LIST proxy/"] == 1 and objects["DELETE proxy/N-2"] == 1
    assert elapsed >= 6 * LATENCY_S  # six requests, one after another, each delayed
    assert proxy.reset()["PUT"] == 2
    assert sum(proxy.counts().values()) == 0


def test_latency_applies_per_request_in_parallel(proxy: S3Proxy) -> None:
    """Requests in flight at once wait their latency side by side (S3 is not a queue)."""
    from concurrent.futures import ThreadPoolExecutor

    s3: object = _client(proxy.endpoint)
    s3.put_object(Bucket=BUCKET, Key="proxy/p", Body=b"p")  # type: ignore[attr-defined]
    started = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: s3.head_object(Bucket=BUCKET, Key="proxy/p"), range(8)))  # type: ignore[attr-defined]
    elapsed = time.monotonic() - started
    assert proxy.counts()["HEAD"] == 8
    assert LATENCY_S <= elapsed < 8 * LATENCY_S


def test_pyarrow_and_a_list_through_the_proxy(proxy: S3Proxy) -> None:
    fs = pafs.S3FileSystem(
        endpoint_override=proxy.endpoint,
        access_key="test",
        secret_key="test",
        region="us-east-1",
        scheme="http",
    )
    with fs.open_output_stream(f"{BUCKET}/pa/one.bin") as out:
        out.write(b"one")
    infos = fs.get_file_info(pafs.FileSelector(f"{BUCKET}/pa"))
    assert [i.base_name for i in infos] == ["one.bin"]
    counts = proxy.counts()
    assert counts["PUT"] >= 1 and counts["LIST"] >= 1


def test_delta_rs_writes_and_reads_through_the_proxy(proxy: S3Proxy) -> None:
    """delta-rs (Rust, reqwest) through the proxy, in this process: its Python bindings hold
    the GIL while they wait on S3, so a proxy in this interpreter would never answer them."""
    from deltalake import DeltaTable, write_deltalake

    uri = f"s3://{BUCKET}/proxy-delta/{time.time_ns()}"
    options = {
        "AWS_ENDPOINT_URL": proxy.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_REGION": "us-east-1",
        "aws_conditional_put": "etag",
        "timeout": "20s",
    }
    assert not DeltaTable.is_deltatable(uri, storage_options=options)
    listed = proxy.reset()
    assert listed["LIST"] >= 1 and listed["PUT"] == 0
    write_deltalake(uri, pa.table({"a": [1, 2, 3]}), storage_options=options)
    write_deltalake(uri, pa.table({"a": [4]}), storage_options=options, mode="append")
    written = proxy.reset()
    # two commits, each one data file and one log entry: at least four object writes
    assert written["PUT"] >= 4 and written["OTHER"] == 0
    table = DeltaTable(uri, storage_options=options)
    assert table.version() == 1
    assert sorted(table.to_pyarrow_table().column("a").to_pylist()) == [1, 2, 3, 4]
    read = proxy.counts()
    assert read["PUT"] == 0 and read["GET"] >= 2  # the two data files at least
    assert read["LIST"] + read["GET"] + read["HEAD"] >= 3
