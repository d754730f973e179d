"""Bind markers of element accesses get their element's receiver (what PREPARE returns as
bind metadata and EXECUTE decodes the values with)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from cqlcdc.cql import parse_statement
from cqlcdc.schema.catalog import Catalog
from cqlcdc.server.binds import bind_receivers

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.mark.parametrize(
    ("cql", "receivers"),
    [
        ("DELETE s[?] FROM ks.t WHERE k = ?", [("value(s)", "text"), ("k", "int")]),
        ("DELETE m[?] FROM ks.t WHERE k = 1", [("key(m)", "int")]),
        ("DELETE l[?] FROM ks.t WHERE k = 1", [("idx(l)", "int")]),
        (
            "SELECT k FROM ks.t WHERE m[?] = ? ALLOW FILTERING",
            [("key(m)", "int"), ("value(m)", "bigint")],
        ),
        (
            "SELECT k FROM ks.t WHERE l[?] > ? ALLOW FILTERING",
            [("idx(l)", "int"), ("value(l)", "blob")],
        ),
    ],
)
def test_element_markers_have_their_element_types(
    cql: str, receivers: list[tuple[str, str]]
) -> None:
    catalog = Catalog(Path(tempfile.mkdtemp()))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(
        parse_statement(
            "CREATE TABLE ks.t (k int PRIMARY KEY, s set<text>, m map<int, bigint>, l list<blob>)"
        ),
        None,
    )
    schema = catalog.table("ks", "t")
    assert schema is not None
    found = bind_receivers(parse_statement(cql), lambda _: schema)
    assert [(r.name, r.type.cql_name) for r in found] == receivers
