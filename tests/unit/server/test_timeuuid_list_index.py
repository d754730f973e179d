"""``l[SCYLLA_TIMEUUID_LIST_INDEX(?)] = ?``: the marker inside the function is the element's
key, received as ScyllaDB's ``lists::uuid_index_spec_of`` gives it (``uuid_idx(l)`` of type
uuid), not as a position (``idx(l)``, int), which scylla-cdc-go's replicator binds a
timeuuid to."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from cqlcdc.cql import parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.schema.catalog import Catalog
from cqlcdc.server.binds import bind_receivers

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.mark.parametrize(
    ("cql", "receivers"),
    [
        (
            "UPDATE ks.t USING TTL ? SET l[SCYLLA_TIMEUUID_LIST_INDEX(?)] = ? WHERE k = ?",
            [("[ttl]", "int"), ("uuid_idx(l)", "uuid"), ("value(l)", "text"), ("k", "int")],
        ),
        (
            "UPDATE ks.t SET l[scylla_timeuuid_list_index(?)] = null WHERE k = ?",
            [("uuid_idx(l)", "uuid"), ("k", "int")],
        ),
        ("UPDATE ks.t SET l[?] = ? WHERE k = 1", [("idx(l)", "int"), ("value(l)", "text")]),
    ],
)
def test_the_list_index_markers(cql: str, receivers: list[tuple[str, str]]) -> None:
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(parse_statement("CREATE TABLE ks.t (k int PRIMARY KEY, l list<text>)"), None)
    schema = catalog.table("ks", "t")
    assert schema is not None
    found = bind_receivers(parse_statement(cql), lambda _: schema)
    assert [(r.name, r.type.cql_name) for r in found] == receivers
