"""COMPACT STORAGE is refused as ScyllaDB refuses it by default, and a compact table left
by an older version takes no writes: no acknowledged write can vanish into one."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from cqlcdc.cql import parse_statement
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.table_ddl import COMPACT_STORAGE_DISABLED

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.mark.parametrize(
    "columns",
    [
        "pk int, ck int, PRIMARY KEY (pk, ck)",  # the key-only table
        "pk int PRIMARY KEY, v int",
        "pk int, ck int, v int, PRIMARY KEY (pk, ck)",
    ],
)
def test_create_table_with_compact_storage_is_refused_with_scyllas_message(columns: str) -> None:
    catalog = Catalog(Path(tempfile.mkdtemp()))
    catalog.execute(parse_statement(KS), None)
    stmt = parse_statement(
        f"CREATE TABLE ks.cs ({columns}) WITH COMPACT STORAGE AND cdc = {{'enabled': true}}"
    )
    with pytest.raises(InvalidRequest) as info:
        catalog.execute(stmt, None)
    assert info.value.message == COMPACT_STORAGE_DISABLED
    assert "'enable_create_table_with_compact_storage' config option" in COMPACT_STORAGE_DISABLED
    assert catalog.table("ks", "cs") is None
    assert catalog.table("ks", "cs_scylla_cdc_log") is None


def test_earlier_errors_come_first_as_in_scylla() -> None:
    catalog = Catalog(Path(tempfile.mkdtemp()))
    catalog.execute(parse_statement(KS), None)
    stmt = parse_statement("CREATE TABLE ks.cs (pk int PRIMARY KEY, pk int) WITH COMPACT STORAGE")
    with pytest.raises(InvalidRequest, match="Multiple definition of identifier pk"):
        catalog.execute(stmt, None)


def test_writes_to_a_compact_table_from_an_older_version_are_refused() -> None:
    from cqlcdc.writes import check_table_writable

    catalog = Catalog(Path(tempfile.mkdtemp()))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(
        parse_statement("CREATE TABLE ks.cs (pk int, ck int, PRIMARY KEY (pk, ck))"), None
    )
    schema = catalog.table("ks", "cs")
    assert schema is not None
    check_table_writable(schema)
    with pytest.raises(InvalidRequest, match=r"COMPACT STORAGE tables .* are read-only"):
        check_table_writable(replace(schema, compact_storage=True))
