"""A log row that meets the empty value: only an image of a value written before the table
had CDC can (writes of one to a CDC table are refused), and it is logged as null, as
every driver reads an empty value, rather than failing the table's pipeline."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from cqlcdc.cdc.outputs import log_rows_to_arrow
from cqlcdc.cql import parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.schema.physical import python_values
from cqlcdc.types.values import EMPTY

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.mark.parametrize("column", ["v", "ts"])
def test_an_empty_image_value_is_logged_as_null(tmp_path: Path, column: str) -> None:
    cat = Catalog(DocumentDirectory.of(tmp_path))
    for text in (
        KS,
        "CREATE TABLE ks.t (p int PRIMARY KEY, v int, ts timestamp, w int) "
        "WITH cdc = {'enabled': true, 'preimage': 'full'}",
    ):
        cat.execute(parse_statement(text), "ks")
    base = cat.table("ks", "t")
    assert base is not None
    log = log_table_schema(base)
    row = {
        "cdc$stream_id": bytes(16),
        "cdc$time": uuid.uuid1(),
        "cdc$batch_seq_no": 0,
        "cdc$operation": 0,
        "p": 1,
        "v": 3,
        "ts": 5,
        "w": 7,
    }
    rows = [row, {**row, "cdc$batch_seq_no": 1, column: EMPTY}]
    table = log_rows_to_arrow(log, rows, [(0, b"\x00\x00\x00\x01", 1, 0)] * 2)
    assert python_values(base.column(column).type, table[column]) == [row[column], None]
    assert python_values(base.column("w").type, table["w"]) == [7, 7]
