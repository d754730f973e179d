"""Bind markers of element accesses get their element's receiver (what PREPARE returns as
bind metadata and EXECUTE decodes the values with)."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest

from cqlcdc.cql import parse_statement
from cqlcdc.documents import DocumentDirectory
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.catalog import Catalog
from cqlcdc.server.binds import Receiver, bind_receivers

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
            [("index(l)", "int"), ("value(l)", "blob")],
        ),
    ],
)
def test_element_markers_have_their_element_types(
    cql: str, receivers: list[tuple[str, str]]
) -> None:
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
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


SCHEMA = (
    "CREATE TABLE ks.n (p int, q int, c int, d int, l list<int>, s set<int>, m map<int, text>, "
    "t frozen<tuple<int, text>>, v vector<float, 2>, u timeuuid, PRIMARY KEY ((p, q), c, d))"
)


def _receivers(cql: str) -> list[tuple[str, str]]:
    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(parse_statement(SCHEMA), None)
    schema = catalog.table("ks", "n")
    assert schema is not None
    return [
        (r.name, r.type.cql_name) for r in bind_receivers(parse_statement(cql), lambda _: schema)
    ]


# ScyllaDB's receiver names (cql3/expr/prepare_expr.cc, functions::make_arg_spec,
# lists::index_spec_of, attributes.cc, select_statement.cc's limit receivers)
@pytest.mark.parametrize(
    ("cql", "receivers"),
    [
        (
            "SELECT * FROM ks.n WHERE p = ? AND q = ? AND c = ? AND u > minTimeuuid(?) "
            "AND u < maxTimeuuid(?) ALLOW FILTERING",
            [
                ("p", "int"),
                ("q", "int"),
                ("c", "int"),
                ("arg0(system.mintimeuuid)", "timestamp"),
                ("arg0(system.maxtimeuuid)", "timestamp"),
            ],
        ),
        (
            "SELECT * FROM ks.n WHERE p IN ? AND q = ? AND c NOT IN ? ALLOW FILTERING",
            [("IN(p)", "frozen<list<int>>"), ("q", "int"), ("NOT IN(c)", "frozen<list<int>>")],
        ),
        (
            "SELECT * FROM ks.n WHERE p = 1 AND q = 1 AND c IN (?, ?)",
            [("value(IN(c))", "int"), ("value(IN(c))", "int")],
        ),
        (
            "SELECT * FROM ks.n WHERE p = 1 AND q = 1 AND (c, d) IN ?",
            [("IN((c,d))", "frozen<list<frozen<tuple<int, int>>>>")],
        ),
        (
            "SELECT * FROM ks.n WHERE p = 1 AND q = 1 AND (c, d) > (?, ?)",
            [("(c,d)[0]", "int"), ("(c,d)[1]", "int")],
        ),
        (
            "SELECT * FROM ks.n WHERE token(p, q) > ? LIMIT ?",
            [("partition key token", "bigint"), ("[limit]", "int")],
        ),
        (
            "SELECT * FROM ks.n WHERE p = 1 AND q = 1 PER PARTITION LIMIT ?",
            [("[per_partition_limit]", "int")],
        ),
        (
            "SELECT * FROM ks.n WHERE l CONTAINS ? AND s CONTAINS ? AND m CONTAINS ? "
            "AND m CONTAINS KEY ? ALLOW FILTERING",
            [("value(l)", "int"), ("value(s)", "int"), ("value(m)", "text"), ("key(m)", "int")],
        ),
        (
            "INSERT INTO ks.n (p, q, c, d, l, s, m, t, v) VALUES "
            "(?, ?, ?, ?, [?], {?}, {?: ?}, (?, ?), [?, ?]) USING TTL ? AND TIMESTAMP ?",
            [
                ("p", "int"),
                ("q", "int"),
                ("c", "int"),
                ("d", "int"),
                ("value(l)", "int"),
                ("value(s)", "int"),
                ("key(m)", "int"),
                ("value(m)", "text"),
                ("t[0]", "int"),
                ("t[1]", "text"),
                ("value(v)", "float"),
                ("value(v)", "float"),
                ("[ttl]", "int"),
                ("[timestamp]", "bigint"),
            ],
        ),
        (
            "UPDATE ks.n SET l[?] = ?, m[?] = ? WHERE p = blobAsInt(?) AND q = ? AND c = 1 "
            "AND d = 1",
            [
                ("idx(l)", "int"),
                ("value(l)", "int"),
                ("key(m)", "int"),
                ("value(m)", "text"),
                ("arg0(system.blobasint)", "blob"),
                ("q", "int"),
            ],
        ),
        (
            "UPDATE ks.n SET l = ? WHERE p = 1 AND q = 1 AND c = 1 AND d = 1 "
            "IF m[?] = ? AND l[?] = ? AND s IN ?",
            [
                ("l", "list<int>"),
                ("key(m)", "int"),
                ("value(m)", "text"),
                ("index(l)", "int"),
                ("value(l)", "int"),
                ("IN(s)", "frozen<list<frozen<set<int>>>>"),
            ],
        ),
        (
            "INSERT INTO ks.n (p, q, c, d) VALUES ((int)?, (int):b, ?, ?)",
            [("(int)?", "int"), ("b", "int"), ("c", "int"), ("d", "int")],
        ),
        (
            "SELECT * FROM ks.n WHERE p = :a AND q = :b AND c = :c",
            [("a", "int"), ("b", "int"), ("c", "int")],
        ),
    ],
)
def test_markers_are_named_as_scylladb_names_them(
    cql: str, receivers: list[tuple[str, str]]
) -> None:
    assert _receivers(cql) == receivers


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        (
            "SELECT * FROM ks.n WHERE l CONTAINS KEY ? ALLOW FILTERING",
            "Cannot use CONTAINS KEY on non-map column l",
        ),
        (
            "SELECT * FROM ks.n WHERE c CONTAINS ? ALLOW FILTERING",
            'Cannot use CONTAINS on non-collection column "c"',
        ),
        (
            "SELECT * FROM ks.n WHERE p = 1 AND q = 1 AND s != ? ALLOW FILTERING",
            'Unsupported "!=" relation: s != ?',
        ),
    ],
)
def test_contains_of_the_wrong_kind_of_column_is_refused(cql: str, message: str) -> None:
    with pytest.raises(InvalidRequest, match=re.escape(message)):
        _receivers(cql)


def test_a_name_used_twice_is_one_variable_that_routes_by_both_receivers() -> None:
    from cqlcdc.server.statements import pk_indexes

    catalog = Catalog(DocumentDirectory.of(Path(tempfile.mkdtemp())))
    catalog.execute(parse_statement(KS), None)
    catalog.execute(parse_statement(SCHEMA), None)
    schema = catalog.table("ks", "n")
    assert schema is not None

    def receivers(cql: str) -> list[Receiver]:
        return bind_receivers(parse_statement(cql), lambda _: schema)

    found = receivers("SELECT * FROM ks.n WHERE p = :x AND q = :x AND c = :y")
    assert [(r.index, r.name) for r in found] == [(0, "x"), (1, "y")]
    assert pk_indexes(found) == (0, 0)
    found = receivers("SELECT * FROM ks.n WHERE c = :x AND p = :x AND q = :z AND d = :z")
    assert pk_indexes(found) == (0, 1)
    assert pk_indexes(receivers("SELECT * FROM ks.n WHERE p = :a AND q = :b")) == (0, 1)
    with pytest.raises(InvalidRequest, match="variable :x has type int which doesn't match l"):
        receivers("SELECT * FROM ks.n WHERE p = :x AND l = :x ALLOW FILTERING")
