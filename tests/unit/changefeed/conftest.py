"""The changefeed tests' table: atomic columns, a static column, a map, a set, a list, a UDT."""

from __future__ import annotations

import pytest

from cqlcdc.cql import parse_statement
from cqlcdc.schema.catalog import Catalog
from cqlcdc.schema.model import TableSchema

DDL = (
    "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
    "CREATE TYPE ks.addr (street text, zip int)",
    "CREATE TABLE ks.t (pk int, ck text, s int static, v text, n bigint, b blob, "
    "m map<text, int>, st set<int>, l list<text>, a addr, PRIMARY KEY (pk, ck))",
)


def make_table(*ddl: str) -> TableSchema:
    """Run DDL through the real catalog and return the last table it created."""
    catalog = Catalog()
    for text in DDL[:2] + ddl:
        catalog.execute(parse_statement(text), None)
    name = ddl[-1].split("TABLE ", 1)[1].split(" ", 1)[0]
    keyspace, table = name.split(".")
    schema = catalog.table(keyspace, table)
    assert schema is not None
    return schema


@pytest.fixture
def table() -> TableSchema:
    return make_table(DDL[2])
