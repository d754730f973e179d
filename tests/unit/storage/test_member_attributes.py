"""WRITETIME() and TTL() of one element of a non-frozen map or set, or one field of a
non-frozen UDT, and field selection through nested UDTs (issue 26, section 4), with
ScyllaDB's semantics (its test/cqlpy test_select_collection_element.py and test_udt.py)."""

from __future__ import annotations

import pytest

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import InvalidRequest
from cqlcdc.storage.selection import plan_selection
from tests.core_model import CoreModel

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture
def model() -> CoreModel:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TYPE ks.inner_t (a int, b text)")
    m.run("CREATE TYPE ks.outer_t (x frozen<inner_t>, y int)")
    m.run(
        "CREATE TABLE ks.t (p int PRIMARY KEY, m map<int, int>, s set<int>, l list<int>, "
        "u inner_t, f frozen<inner_t>, b outer_t, fm frozen<map<int, int>>, v int)"
    )
    return m


def _names(model: CoreModel, cql: str) -> list[str]:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.Select)
    return [n for n, _ in plan_selection(model.table(stmt.table), stmt).result_columns()]


def test_writetime_and_ttl_of_map_and_set_elements(model: CoreModel) -> None:
    model.run(
        "INSERT INTO ks.t (p, m, s) VALUES (1, {1: 10, 2: 20}, {10, 20}) USING TIMESTAMP 1000"
    )
    model.run(
        "UPDATE ks.t USING TIMESTAMP 2000 AND TTL 3600 SET m = m + {2: 30}, s = s + {30} "
        "WHERE p = 1"
    )
    query = (
        "SELECT m, m[2], WRITETIME(m[1]), writetime(m[2]), ttl(m[1]), ttl(m[2]), "
        "writetime(m[99]), writetime(m[null]) FROM ks.t WHERE p = 1"
    )
    [(m, m2, *attributes)] = model.run(query)
    assert (dict(m), m2) == ({1: 10, 2: 30}, 30)
    assert attributes == [1000, 2000, None, 3600, None, None]
    assert _names(model, query)[2:4] == ["writetime(m[1])", "writetime(m[2])"]
    query = "SELECT writetime(s[10]), writetime(s[30]), ttl(s[30]), ttl(s[99]) FROM ks.t"
    assert model.run(query) == [(1000, 2000, 3600, None)]
    model.run("INSERT INTO ks.t (p) VALUES (2)")
    assert model.run("SELECT writetime(m[1]), ttl(s[1]) FROM ks.t WHERE p = 2") == [(None, None)]
    assert model.run("SELECT writetime(m[1]) FROM ks.t WHERE p = 3") == []


def test_writetime_and_ttl_of_udt_fields(model: CoreModel) -> None:
    model.run("UPDATE ks.t USING TIMESTAMP 3000 SET u.a = 42 WHERE p = 1")
    model.run("UPDATE ks.t USING TIMESTAMP 4000 AND TTL 100 SET u.b = 'z' WHERE p = 1")
    query = "SELECT writetime(u.a), WRITETIME(u.b), ttl(u.a), TTL(u.b) FROM ks.t WHERE p = 1"
    assert model.run(query) == [(3000, 4000, None, 100)]
    assert _names(model, query) == ["writetime(u.a)", "writetime(u.b)", "ttl(u.a)", "ttl(u.b)"]


def test_fields_of_nested_udts(model: CoreModel) -> None:
    model.run("UPDATE ks.t SET b = {x: {a: 5, b: 'q'}, y: 7} WHERE p = 1")
    model.run("UPDATE ks.t SET b.y = 8 WHERE p = 2")
    query = "SELECT b.x.a, b.x.b, b.y FROM ks.t WHERE p IN (1, 2)"
    assert model.run(query) == [(5, "q", 7), (None, None, 8)]
    assert _names(model, query) == ["b.x.a", "b.x.b", "b.y"]


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        ("SELECT writetime(l[0]) FROM ks.t",
         "WRITETIME on a subscript is only valid for non-frozen map or set columns"),
        ("SELECT ttl(fm[1]) FROM ks.t",
         "TTL on a subscript is only valid for non-frozen map or set columns"),
        ("SELECT ttl(f.a) FROM ks.t",
         "TTL on a field selection is only valid for non-frozen UDT columns"),
        ("SELECT writetime(v[3]) FROM ks.t",
         "Column v is not a map/set/list, cannot be subscripted"),
        ("SELECT ttl(v.a) FROM ks.t", "Invalid field selection: v of type int is not a user type"),
        ("SELECT writetime(b.x.a) FROM ks.t",
         "WRITETIME on a field selection expects a column, got b.x"),
        ("SELECT b.y.a FROM ks.t", "Invalid field selection: b.y of type int is not a user type"),
        ("SELECT b.x.c FROM ks.t", "inner_t has no field c"),
        ("SELECT writetime(m) FROM ks.t",
         "WRITETIME expects an atomic column, but m is a non-frozen collection"),
    ],
)  # fmt: skip
def test_what_scylla_refuses(model: CoreModel, cql: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        model.run(cql)
    assert caught.value.message == message


def test_writetime_of_a_frozen_key_member_is_refused() -> None:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.k (pk frozen<map<int, int>> PRIMARY KEY)")
    with pytest.raises(InvalidRequest) as caught:
        m.run("SELECT WRITETIME(pk[1]) FROM ks.k")
    assert caught.value.message == "WRITETIME is not legal on primary key component pk"
