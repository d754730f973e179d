"""INSERT ... JSON as the INSERT it stands for: the same mutation, so the same CDC log rows
(update_statement.cc ``insert_prepared_json_statement``; CT below is Cassandra's JsonTest as
ported to ScyllaDB in test/cqlpy/cassandra_tests/validation/entities/json_test.py)."""

from __future__ import annotations

from typing import Any

import pytest

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import InvalidRequest
from cqlcdc.storage.insert_json import json_insert_values
from tests.core_model import CoreModel

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = (
    "CREATE TABLE ks.t (k int, c int, s int static, v1 int, v2 text, l list<int>, "
    "m map<text, int>, PRIMARY KEY (k, c)) WITH cdc = {'enabled': true, 'preimage': true}"
)


def _model() -> CoreModel:
    m = CoreModel()
    m.run(KS)
    m.run(TABLE)
    return m


def _insert_json(m: CoreModel, cql: str) -> list[dict[str, Any]]:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.Insert)
    return m.write(json_insert_values(m.table(stmt.table), stmt, None))


@pytest.mark.parametrize(
    ("json_cql", "equivalent"),
    [
        (
            "INSERT INTO ks.t JSON "
            """'{"k": 1, "c": 2, "v1": 3, "v2": "x", "l": [1, 2], "m": {"a": 1}}'""",
            "INSERT INTO ks.t (k, c, v1, v2, l, m) VALUES (1, 2, 3, 'x', [1, 2], {'a': 1})",
        ),
        # DEFAULT NULL (the default): the columns left out are written as nulls
        (
            """INSERT INTO ks.t JSON '{"k": 1, "c": 2, "v1": 3}'""",
            "INSERT INTO ks.t (k, c, v1, v2, l, m) VALUES (1, 2, 3, null, null, null)",
        ),
        (
            """INSERT INTO ks.t JSON '{"k": 1, "c": 2, "v1": 3}' DEFAULT NULL USING TTL 5""",
            "INSERT INTO ks.t (k, c, v1, v2, l, m) VALUES (1, 2, 3, null, null, null) USING TTL 5",
        ),
        # DEFAULT UNSET: they are left alone
        (
            """INSERT INTO ks.t JSON '{"k": 1, "c": 2, "v2": null}' DEFAULT UNSET""",
            "INSERT INTO ks.t (k, c, v2) VALUES (1, 2, null)",
        ),
        # numbers as strings, case-insensitive keys, quoted case-sensitive ones (CT)
        (
            """INSERT INTO ks.t JSON '{"K": "1", "\\"c\\"": 2.0, "V1": "3"}' DEFAULT UNSET""",
            "INSERT INTO ks.t (k, c, v1) VALUES (1, 2, 3)",
        ),
    ],
)
def test_logs_like_the_equivalent_insert(json_cql: str, equivalent: str) -> None:
    a, b = _model(), _model()
    for m in (a, b):  # a row to overwrite, so preimages show too
        m.run("INSERT INTO ks.t (k, c, v1, v2, l) VALUES (1, 2, 0, 'old', [9])")
    logged = _insert_json(a, json_cql)
    assert logged == b.run(equivalent)
    assert next(r["cdc$operation"] for r in logged if r["cdc$operation"]) == 2  # an insert
    assert a.run("SELECT * FROM ks.t") == b.run("SELECT * FROM ks.t")


def test_default_null_writes_nulls_in_the_delta() -> None:
    m = _model()
    [delta] = _insert_json(m, """INSERT INTO ks.t JSON '{"k": 1, "c": 2, "v1": 3}'""")
    assert (delta["v1"], delta.get("v2"), delta["cdc$deleted_v2"], delta["cdc$deleted_l"]) == (
        3,
        None,
        True,
        True,
    )


@pytest.mark.parametrize(
    ("json", "message"),
    [
        ('{"k": 1, "c": 1, "zzz": 0}', "JSON values map contains unrecognized column: zzz"),
        (
            '{"k": 1, "c": 1, "v1": "notanint"}',
            "marshaling error: Invalid number format 'notanint'",
        ),
        ('"notamap"', 'Could not decode JSON string as a map: "notamap" is not an object'),
        ("12.34", "Could not decode JSON string as a map: 12.34 is not an object"),
        ("null", "Got null for INSERT JSON values"),
        (
            "{",
            "Could not decode JSON string as a map: Parsing JSON failed: Missing a name for "
            "object member. at 1",
        ),
        ('{"c": 1}', "Missing mandatory PRIMARY KEY part k"),
        ('{"k": 1, "c": null}', "Missing mandatory PRIMARY KEY part c"),
        (
            '{"k": 1, "c": 1, "s": 1}',
            "INSERT ... JSON cannot set static column s: ScyllaDB ignores static columns in "
            "INSERT JSON; set it with INSERT ... VALUES or UPDATE",
        ),
    ],
)
def test_refused(json: str, message: str) -> None:
    m = _model()
    with pytest.raises(InvalidRequest) as err:
        _insert_json(m, f"INSERT INTO ks.t JSON '{json}'")
    assert err.value.message == message
    assert m.run("SELECT * FROM ks.t") == []


def test_counters_cannot_be_set() -> None:
    m = _model()
    m.run("CREATE TABLE ks.n (k int PRIMARY KEY, n counter)")
    with pytest.raises(InvalidRequest, match=r"^Cannot set the value of counter column n in JSON$"):
        _insert_json(m, """INSERT INTO ks.n JSON '{"k": 1, "n": 3}'""")


def test_bound_json_and_static_columns_left_alone() -> None:
    m = _model()
    m.run("INSERT INTO ks.t (k, c, s) VALUES (1, 1, 7)")
    stmt = parse_statement("INSERT INTO ks.t JSON ?")
    assert isinstance(stmt, ast.Insert)

    class Bound:
        now_us = 0

        def bound_value(self, marker: ast.BindMarker) -> Any:
            return '{"k": 1, "c": 2, "v1": 5}'

    m.write(json_insert_values(m.table(stmt.table), stmt, Bound()))  # type: ignore[arg-type]
    # DEFAULT NULL nulls the regular columns only: the static column keeps its value
    assert m.run("SELECT k, c, s, v1 FROM ks.t") == [(1, 1, 7, None), (1, 2, 7, 5)]
