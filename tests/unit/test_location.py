"""Location: what a --data-dir value names, and the same file operations on a disk and in S3."""

from __future__ import annotations

import pickle
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cqlcdc.location import Location, UnsupportedLocation, parse_storage_options


def test_a_local_path_is_made_absolute_and_an_s3_uri_is_normalized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert Location.of("data").uri == str(tmp_path / "data")
    assert Location.of(f"file://{tmp_path}/d").uri == str(tmp_path / "d")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    s3 = Location.of("s3://bucket/a/b/")
    assert (s3.uri, s3.options, s3.is_local) == ("s3://bucket/a/b", (), False)
    assert (s3 / "ingest" / "x.parquet").uri == "s3://bucket/a/b/ingest/x.parquet"
    assert (s3 / "ingest").parent == s3 and s3.name == "b"


@pytest.mark.parametrize("uri", ["gs://bucket/d", "hdfs://nn/d", "s3://", "abfss://c@a/d"])
def test_other_schemes_are_refused_in_one_line(uri: str) -> None:
    with pytest.raises(UnsupportedLocation) as refused:
        Location.of(uri)
    assert "\n" not in str(refused.value) and uri in str(refused.value)


def test_the_environment_s_endpoint_and_region_travel_with_the_location(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    s3 = pickle.loads(pickle.dumps(Location.of("s3://bucket/d", {"aws_region": "us-east-2"})))
    options = dict(s3.options)
    assert options == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "aws_region": "us-east-2"}
    delta = s3.delta_options() or {}
    assert delta["AWS_ALLOW_HTTP"] == "true" and delta["aws_conditional_put"] == "etag"


def test_storage_options_are_key_value_pairs() -> None:
    assert parse_storage_options(["AWS_REGION=x", "a=b=c"]) == {"AWS_REGION": "x", "a": "b=c"}
    with pytest.raises(UnsupportedLocation, match="KEY=VALUE"):
        parse_storage_options(["novalue"])


@pytest.fixture(params=["local", "s3"])
def data_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Location:
    if request.param == "local":
        return Location.of(tmp_path)
    loc: Location = request.getfixturevalue("s3_data_dir")
    return loc


def test_write_read_list_delete(data_dir: Location) -> None:
    doc = data_dir / "sub" / "doc.json"
    data_dir.child("sub").makedirs()
    assert doc.read_text() is None and not doc.exists()
    doc.write_atomically('{"a": 1}')
    doc.write_atomically('{"a": 2}')
    assert doc.read_text() == '{"a": 2}'
    assert doc.is_file()
    assert data_dir.child("sub").list_names() == ["doc.json"]
    doc.delete()
    doc.delete()
    assert not doc.exists()
    with pytest.raises(FileNotFoundError):
        doc.read_bytes()


def test_each_s3_data_dir_is_fresh(s3_data_dir: Location) -> None:
    assert s3_data_dir.uri.startswith("s3://cqlcdc-test/")
    assert s3_data_dir.list_names() == []


def test_delta_table_round_trip(data_dir: Location) -> None:
    table = data_dir / "tables" / "t"
    write_deltalake(table.delta_uri, pa.table({"k": [1, 2]}), storage_options=table.delta_options())
    read = DeltaTable(table.delta_uri, storage_options=table.delta_options()).to_pyarrow_table()
    assert sorted(read.column("k").to_pylist()) == [1, 2]
