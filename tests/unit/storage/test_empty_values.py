"""The empty value in storage: the ingest and fragment codec, base rows (the residual row
keeps what holds it), the last-write-wins tie, and the write-time refusals of what cqlcdc
cannot keep (``storage.empty_values``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from cqlcdc.cql import parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.base_rows import FRAGMENT, partitions, write_rows
from cqlcdc.storage.cells import Cell, CollectionCells, RowMarker
from cqlcdc.storage.codec import WritePayload, decode_payload, encode_payload
from cqlcdc.storage.empty_values import check_empty_values
from cqlcdc.storage.mutations import ListOp, Mutation
from cqlcdc.storage.partition import Partition, Row
from cqlcdc.storage.token import serialize_partition_key
from cqlcdc.types.values import EMPTY

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


def _schema(tmp_path: Path, ddl: str) -> TableSchema:
    cat = Catalog(DocumentDirectory.of(tmp_path))
    for text in (KS, ddl):
        cat.execute(parse_statement(text), "ks")
    schema = cat.table("ks", "t")
    assert schema is not None
    return schema


def _partition() -> Partition:
    part = Partition((EMPTY, 1))
    part.static.cells["s"] = Cell(5, EMPTY, 60, 1000)
    part.rows[(EMPTY,)] = Row(RowMarker(10), None, {"v": Cell(10, 3), "w": Cell(10, 4)})
    part.rows[(7,)] = Row(RowMarker(11), None, {"v": Cell(11, EMPTY), "w": Cell(11, 9)})
    return part


def test_the_codec_keeps_it(tmp_path: Path) -> None:
    part = _partition()
    decoded = decode_payload(encode_payload(WritePayload(part, (), 1, 2)))
    assert isinstance(decoded, WritePayload)
    assert decoded.partition.pk == (EMPTY, 1) and decoded.partition.pk[0] is EMPTY
    assert decoded.partition.rows == part.rows
    assert decoded.partition.static.cells == part.static.cells


def test_base_rows_keep_it_in_the_residual_row(tmp_path: Path) -> None:
    schema = _schema(
        tmp_path,
        "CREATE TABLE t (a timestamp, b int, c int, s bigint static, v int, w int, "
        "PRIMARY KEY ((a, b), c))",
    )
    part = _partition()
    pk = serialize_partition_key(schema, part.pk)
    rows = write_rows(schema, pk, part)
    # the row keyed by an empty c, the empty v and s: in the residual; w of c=7 typed
    assert rows.column(FRAGMENT).null_count == rows.num_rows - 1
    typed = [r for r in rows.to_pylist() if r[FRAGMENT] is None]
    assert [r["k$c"] for r in typed] == [7]
    assert typed[0]["v$w$int"]["value"] == 9 and typed[0]["v$v$int"] is None
    read = partitions(schema, rows)[pk]
    assert read.pk == (EMPTY, 1)
    assert read.rows == part.rows and read.static.cells == part.static.cells
    # an ordinary value written later replaces it, and the other way round
    later = Partition(part.pk)
    later.rows[(7,)] = Row(None, None, {"v": Cell(12, 1)})
    later.rows[(EMPTY,)] = Row(None, None, {"v": Cell(12, EMPTY)})
    both = write_rows(schema, pk, part).to_batches() + write_rows(schema, pk, later, 1).to_batches()
    merged = partitions(schema, pa.Table.from_batches(both))[pk]
    assert merged.rows[(7,)].cells["v"] == Cell(12, 1)
    assert merged.rows[(EMPTY,)].cells["v"] == Cell(12, EMPTY)


def test_an_empty_value_loses_a_timestamp_tie() -> None:
    # ScyllaDB compares the values' bytes: none are the least
    assert Cell(5, EMPTY).reconcile(Cell(5, 0)) == Cell(5, 0)
    assert Cell(5, 0).reconcile(Cell(5, EMPTY)) == Cell(5, 0)
    assert Cell(5, EMPTY).reconcile(Cell(5, EMPTY)) == Cell(5, EMPTY)


def test_what_cannot_be_kept_is_refused(tmp_path: Path) -> None:
    plain = _schema(
        tmp_path / "plain",
        "CREATE TABLE t (p int, c int, v int, m map<int, int>, l list<int>, PRIMARY KEY (p, c))",
    )
    part = Partition((1,))
    part.rows[(EMPTY,)] = Row(None, None, {"v": Cell(1, EMPTY)})
    check_empty_values(plain, Mutation(plain.table_id, part))  # kept: nothing raised
    coll = Partition((1,))
    coll.rows[(1,)] = Row(None, None, {"m": CollectionCells(None, {EMPTY: Cell(1, 2)})})
    with pytest.raises(InvalidRequest, match="Empty value for m of type map<int, int>"):
        check_empty_values(plain, Mutation(plain.table_id, coll))
    op = ListOp("set_index", (1,), "l", 1, index=0, value=EMPTY)
    with pytest.raises(InvalidRequest, match="Empty value for l of type list<int>"):
        check_empty_values(plain, Mutation(plain.table_id, Partition((1,)), [op]))
    logged = _schema(
        tmp_path / "logged",
        "CREATE TABLE t (p int, c int, v int, PRIMARY KEY (p, c)) WITH cdc = {'enabled': true}",
    )
    for where, bad in (("v", {"v": Cell(1, EMPTY)}), ("c", {"v": Cell(1, 1)})):
        part = Partition((1,))
        part.rows[(EMPTY if where == "c" else 1,)] = Row(None, None, bad)
        with pytest.raises(InvalidRequest, match=f"Empty value for {where} of type int"):
            check_empty_values(logged, Mutation(logged.table_id, part))
