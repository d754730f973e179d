"""Key length limits (ScyllaDB's test_key_length.py): checked when a write is made, on the
row path and the bulk path alike, so the pipeline never meets a key it cannot store."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from cqlcdc.cql import ast, parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.bulk import ChunkWrites, keys_usable, make_chunks, plan_bulk
from cqlcdc.storage.mutations import (
    WriteContext,
    build_delete,
    build_insert,
    write_key_bytes,
)
from cqlcdc.storage.token import MAX_KEY_BYTES, key_length, serialize_partition_key

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TOO_LONG = "Key length of {} is longer than maximum of 65535"


def _table(columns: str) -> TableSchema:
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(parse_statement(f"CREATE TABLE ks.t ({columns})"), None)
    schema = catalog.table("ks", "t")
    assert schema is not None
    return schema


SINGLE = "p text, c text, v int, PRIMARY KEY (p, c)"
COMPOUND = "p1 text, p2 text, c1 text, c2 text, v int, PRIMARY KEY ((p1, p2), c1, c2)"


def _insert_key(schema: TableSchema, cql: str, params: tuple[Any, ...]) -> bytes:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.Insert)
    (mutation,) = build_insert(schema, stmt, WriteContext(1, 1, 0, bindings=params), 0)
    return write_key_bytes(schema, mutation.partition)


def test_key_length_counts_like_scylla() -> None:
    assert key_length([65535]) == 65535  # one component: as is
    assert key_length([100, 65431]) == 65535  # several: 2 bytes of length each


@pytest.mark.parametrize("where", ["p", "c"])
def test_a_single_component_key_may_reach_65535_bytes(where: str) -> None:
    schema = _table(SINGLE)
    big = "x" * MAX_KEY_BYTES
    params = (big, "c") if where == "p" else ("p", big)
    key = _insert_key(schema, "INSERT INTO ks.t (p, c) VALUES (?, ?)", params)
    assert len(key) == (MAX_KEY_BYTES if where == "p" else 1)


@pytest.mark.parametrize("where", ["p", "c"])
def test_a_65k_key_is_rejected_with_cassandras_message(where: str) -> None:
    schema = _table(SINGLE)
    big = "x" * (65 * 1024)
    params = (big, "c") if where == "p" else ("p", big)
    with pytest.raises(InvalidRequest, match=TOO_LONG.format(66560)):
        _insert_key(schema, "INSERT INTO ks.t (p, c) VALUES (?, ?)", params)


def test_compound_keys_are_limited_in_total() -> None:
    schema = _table(COMPOUND)
    cql = "INSERT INTO ks.t (p1, p2, c1, c2) VALUES (?, ?, ?, ?)"
    fits = "y" * (MAX_KEY_BYTES - 4 - 100)  # two components of 2 + n bytes: 65,535 in all
    _insert_key(schema, cql, ("a" * 100, fits, "c", "d"))
    _insert_key(schema, cql, ("a", "b", "c" * 100, fits))
    half = "z" * (65536 // 2)
    with pytest.raises(InvalidRequest, match=TOO_LONG.format(65540)):
        _insert_key(schema, cql, (half, half, "c", "d"))
    with pytest.raises(InvalidRequest, match=TOO_LONG.format(65540)):
        _insert_key(schema, cql, ("a", "b", half, half))


def test_range_deletion_bounds_are_keys_too() -> None:
    schema = _table(COMPOUND)
    stmt = parse_statement("DELETE FROM ks.t WHERE p1 = 'a' AND p2 = 'b' AND c1 > ?")
    assert isinstance(stmt, ast.Delete)
    ctx = WriteContext(1, 1, 0, bindings=("x" * 70_000,))
    (mutation,) = build_delete(schema, stmt, ctx)
    with pytest.raises(InvalidRequest, match="Key length of 70002"):
        write_key_bytes(schema, mutation.partition)


def test_an_empty_single_partition_key_is_rejected_but_not_a_compound_one() -> None:
    with pytest.raises(InvalidRequest, match=r"^Key may not be empty$"):
        _insert_key(_table(SINGLE), "INSERT INTO ks.t (p, c) VALUES (?, ?)", ("", "c"))
    key = _insert_key(
        _table(COMPOUND), "INSERT INTO ks.t (p1, p2, c1, c2) VALUES (?, ?, ?, ?)", ("", "", "", "")
    )
    assert key == b"\x00\x00\x00" * 2


def test_reads_with_an_oversized_key_get_an_error_not_a_crash() -> None:
    schema = _table(COMPOUND)
    with pytest.raises(InvalidRequest, match="Key length"):
        serialize_partition_key(schema, ("x" * 70_000, "y"))


def _bulk(schema: TableSchema, cql: str, columns: dict[str, list[Any]]) -> Any:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.Insert)
    plan = plan_bulk(schema, stmt, None, 0)
    assert plan is not None
    table = pa.table({n: pa.array(v, pa.string()) for n, v in columns.items()})
    n = table.num_rows
    writes = ChunkWrites(
        (plan,),
        np.zeros(n, np.int8),
        table,
        np.arange(n, dtype=np.int64),
        np.arange(n, dtype=np.uint64),
    )
    return keys_usable(schema, table), make_chunks(schema, writes, 1, 1, 16)


def test_the_bulk_path_leaves_oversized_and_empty_keys_to_the_row_path() -> None:
    schema = _table(COMPOUND)
    cql = "INSERT INTO ks.t (p1, p2, c1, c2) VALUES (?, ?, ?, ?)"
    fits = "y" * (MAX_KEY_BYTES - 4 - 1)
    usable, chunks = _bulk(schema, cql, {"p1": ["a"], "p2": [fits], "c1": ["c"], "c2": [fits]})
    assert usable and chunks is not None
    usable, chunks = _bulk(schema, cql, {"p1": ["a"], "p2": ["b"], "c1": ["c"], "c2": [fits + "!"]})
    assert not usable  # clustering key one byte over
    usable, chunks = _bulk(schema, cql, {"p1": ["a"], "p2": [fits + "!"], "c1": ["c"], "c2": ["d"]})
    assert chunks is None  # partition key one byte over
    single = _table(SINGLE)
    usable, chunks = _bulk(single, "INSERT INTO ks.t (p, c) VALUES (?, ?)", {"p": [""], "c": ["c"]})
    assert chunks is None  # the row path says "Key may not be empty"
