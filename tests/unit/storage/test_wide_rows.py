"""A wide table's rows cost what their cells cost, not what the table's columns do: the
base rows and CDC log rows of writes that set two of 2,000 columns hold a few hundred bytes
of Arrow buffers per row (a buffer per column per row would be ~50 KB), and building them
allocates Python memory by the cells, not by the columns."""

from __future__ import annotations

import tempfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from cqlcdc.cdc.data_dir import load_generations
from cqlcdc.cdc.log_writer import LogWriter, WriteInfo
from cqlcdc.cdc.outputs import log_rows_to_arrow
from cqlcdc.cql import parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.log_table import log_table_schema
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import BaseRowsBuilder, row_partitions
from cqlcdc.storage.cells import Cell, RowMarker
from cqlcdc.storage.partition import Partition, Row

COLUMNS = 2000
NOW_S = 1_700_000_000


@pytest.fixture(scope="module")
def wide() -> TableSchema:
    catalog = Catalog()
    catalog.execute(
        parse_statement(
            "CREATE KEYSPACE ks WITH replication = "
            "{'class': 'SimpleStrategy', 'replication_factor': 1}"
        ),
        None,
    )
    body = ", ".join(f"c{i} int" for i in range(COLUMNS))
    catalog.execute(
        parse_statement(
            f"CREATE TABLE ks.w (pk int, ck int, {body}, PRIMARY KEY (pk, ck)) "
            "WITH cdc = {'enabled': true}"
        ),
        None,
    )
    schema = catalog.table("ks", "w")
    assert schema is not None
    return schema


def _write(i: int) -> Partition:
    """Row ``(i, i)`` with two of the table's columns set."""
    cells = {"c0": Cell(NOW_S * 10**6, i), "c1999": Cell(NOW_S * 10**6, -i)}
    return Partition((i,), None, Row(), {(i,): Row(RowMarker(NOW_S * 10**6), None, cells)})


def _base_rows(schema: TableSchema, n: int) -> pa.Table:
    builder = BaseRowsBuilder(schema)
    for i in range(n):
        builder.add(0, i.to_bytes(4, "big"), i, i + 1, _write(i))
    return builder.table()


def _log_rows(schema: TableSchema, n: int) -> pa.Table:
    generations = load_generations(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    log = log_table_schema(schema)
    rows = []
    internal: list[tuple[int, bytes, int, int]] = []
    for i in range(n):
        writer = LogWriter(schema, (i,), lambda t, token=i: generations.stream_id(token, t))
        for row in writer.write(_write(i), None, WriteInfo(NOW_S, i, i + 1)):
            internal.append((0, i.to_bytes(4, "big"), i + 1, 0))
            rows.append(row)
    return log_rows_to_arrow(log, rows, internal)


def _per_row(build: Callable[[int], pa.Table]) -> tuple[float, float]:
    """Arrow bytes and peak Python bytes per row, from the difference of 50 and 450 rows
    (what a table costs whatever its rows cancels out)."""
    sizes, peaks = [], []
    for n in (50, 450):
        tracemalloc.start()
        table = build(n)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert table.num_rows == n
        sizes.append(table.get_total_buffer_size())  # a shared buffer counts once
    return (sizes[1] - sizes[0]) / 400, (peaks[1] - peaks[0]) / 400


def test_base_rows_cost_follows_cells(wide: TableSchema) -> None:
    arrow_per_row, python_per_row = _per_row(lambda n: _base_rows(wide, n))
    assert arrow_per_row < 1024, arrow_per_row  # a buffer per column: >= 2,000 x 24 bytes
    assert python_per_row < 4096, python_per_row  # a slot per column: >= 2,000 x 8 bytes
    # and they read back as written
    table = _base_rows(wide, 3)
    parts = dict(row_partitions(wide, table))
    row = parts[(2).to_bytes(4, "big")].rows[(2,)]
    assert {n: c.value for n, c in row.cells.items()} == {"c0": 2, "c1999": -2}


def test_log_rows_cost_follows_cells(wide: TableSchema) -> None:
    arrow_per_row, python_per_row = _per_row(lambda n: _log_rows(wide, n))
    assert arrow_per_row < 2048, arrow_per_row  # the log has ~3 columns per base column
    assert python_per_row < 8192, python_per_row
    table = _log_rows(wide, 2)
    assert table.column("c0").to_pylist() == [0, 1]
    assert table.column("c1999").to_pylist() == [0, -1]
    assert table.column("c5").null_count == 2
