"""Location on a local directory and on S3 (moto): the same bytes come back from both."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cqlcdc.location import Location


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
