"""What a dropped column wrote is not read (``Partition.hide_dropped``, ``base_rows.partitions``
with a schema): cells of columns the schema lacks go, and so do the cells of a column added
again that are not newer than its last drop."""

from __future__ import annotations

import uuid
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cqlcdc.cql import parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import partitions, write_rows
from cqlcdc.storage.cells import Cell, CollectionCells, CounterCell, RowMarker
from cqlcdc.storage.partition import Partition, Row
from cqlcdc.storage.token import serialize_partition_key

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


def _read(schema: TableSchema, part: Partition, hide: bool = True) -> Partition:
    """``part`` written as base rows and read back as ``schema`` sees it (``hide``) or whole."""
    pk = serialize_partition_key(schema, part.pk)
    return partitions(schema, write_rows(schema, pk, part), hide)[pk]


def _schema(tmp_path: Path, *ddl: str) -> TableSchema:
    cat = Catalog(DocumentDirectory.of(tmp_path))
    for text in (KS, *ddl):
        cat.execute(parse_statement(text), "ks")
    schema = cat.table("ks", "t")
    assert schema is not None
    return schema


def test_cells_up_to_the_drop_go_and_newer_ones_stay(tmp_path: Path) -> None:
    schema = _schema(
        tmp_path,
        "CREATE TABLE t (pk int, ck int, v int, w int, l list<int>, s int static, "
        "PRIMARY KEY (pk, ck))",
        "ALTER TABLE t DROP (v, l, s) USING TIMESTAMP 100",
        "ALTER TABLE t ADD v int",
        "ALTER TABLE t ADD l list<int>",
        "ALTER TABLE t ADD s int",  # added back as a regular column
    )
    old, new = uuid.uuid1(), uuid.uuid1()
    part = Partition((1,))
    part.static.cells["s"] = Cell(200, 5)  # newer than the drop, but s is no longer static
    part.rows[(1,)] = Row(None, None, {"v": Cell(100, 1), "w": Cell(50, 2)})  # v at the drop
    part.rows[(2,)] = Row(None, None, {"v": Cell(100, 1)})  # nothing else: the row goes
    part.rows[(3,)] = Row(RowMarker(10), None, {"v": Cell(101, 3), "": Cell(500, b"")})
    part.rows[(4,)] = Row(
        None, None, {"l": CollectionCells(100, {old: Cell(90, 1), new: Cell(150, 2)})}
    )
    read = _read(schema, part)
    assert read.static.cells == {}
    assert read.rows == {
        (1,): Row(None, None, {"w": Cell(50, 2)}),
        # a cell of no dropped column (a COMPACT STORAGE table's hidden value) is kept
        (3,): Row(RowMarker(10), None, {"v": Cell(101, 3), "": Cell(500, b"")}),
        (4,): Row(None, None, {"l": CollectionCells(None, {new: Cell(150, 2)})}),
    }
    # without a schema (compaction) every cell is kept
    assert _read(schema, part, hide=False) == part


def test_a_table_without_drops_reads_every_cell(tmp_path: Path) -> None:
    schema = _schema(tmp_path, "CREATE TABLE t (pk int PRIMARY KEY, v counter)")
    part = Partition((1,))
    part.rows[()] = Row(None, None, {"v": CounterCell(1, 3), "x": Cell(1, 1)})
    assert _read(schema, part) == part


_CELLS = st.lists(
    st.tuples(st.sampled_from(["v", "w", "x"]), st.integers(0, 20), st.integers(0, 3)),
    max_size=12,
)


@given(_CELLS, _CELLS)
def test_hiding_commutes_with_merging(
    first: list[tuple[str, int, int]], second: list[tuple[str, int, int]]
) -> None:
    """Hiding is a timestamp threshold per column, so the newest cell that survives it is
    the one a merge of hidden fragments keeps: reading state merged before or after hiding
    (compaction keeps every cell; a read hides) gives the same row."""
    readded = {"v": 10}
    names = {"v", "w"}

    def part(cells: list[tuple[str, int, int]]) -> Partition:
        p = Partition((0,))
        for name, ts, value in cells:
            row = p.row(())
            mine = row.cells.get(name)
            cell = Cell(ts, value)
            row.cells[name] = cell if not isinstance(mine, Cell) else mine.reconcile(cell)
        return p

    whole = part(first)
    whole.apply(part(second))
    whole.hide_dropped({"v", "x"}, (), names, readded)
    a, b = part(first), part(second)
    a.hide_dropped({"v", "x"}, (), names, readded)
    b.hide_dropped({"v", "x"}, (), names, readded)
    a.apply(b)
    a.prune_empty()
    assert whole == a
