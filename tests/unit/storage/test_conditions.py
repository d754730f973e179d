"""LWT conditions in the core (``cqlcdc.storage.conditions``): which row a condition reads,
how each operator decides, the result rows; the engine's tests are in tests/e2e/test_lwt.py."""

from __future__ import annotations

from typing import Any

import pytest

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import InvalidRequest
from cqlcdc.storage.conditions import (
    Conditional,
    ConditionCheck,
    build_condition,
    evaluate,
    result_columns,
)
from cqlcdc.storage.mutations import WriteContext
from cqlcdc.storage.partition import Partition
from cqlcdc.types import native_type
from cqlcdc.types.values import Duration
from tests.core_model import CoreModel, parse_qualified

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
TABLE = (
    "CREATE TABLE ks.t (pk int, ck int, s int static, v int, m map<text, int>, l list<int>, "
    "PRIMARY KEY (pk, ck))"
)
NOW_S = 1_700_000_100


@pytest.fixture
def model() -> CoreModel:
    m = CoreModel()
    m.run(KS)
    m.run(TABLE)
    return m


def _decide(model: CoreModel, cql: str) -> tuple[bool, list[tuple[Any, ...]]]:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete)
    schema = model.table(parse_qualified("ks.t"))
    ctx = WriteContext(1, NOW_S * 1_000_000, 1)
    ck = None
    if isinstance(stmt, ast.Insert):
        ck = (
            tuple(
                int(v.text)
                for name, v in zip(stmt.columns, stmt.values, strict=True)
                if name == "ck" and isinstance(v, ast.Constant)
            )
            or None
        )
    cond = build_condition(schema, stmt, ctx, ck)
    part: Partition | None = model.states.get(schema.table_id, {}).get((1,))
    return evaluate(schema, Conditional((cond,), result_columns(schema, [stmt])), part, NOW_S)


def test_not_exists_and_exists_read_the_named_row(model: CoreModel) -> None:
    assert _decide(model, "INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 1) IF NOT EXISTS") == (
        True,
        [(None,) * 6],
    )
    model.run("INSERT INTO ks.t (pk, ck, v, s) VALUES (1, 1, 5, 7)")
    applies, rows = _decide(model, "INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 1) IF NOT EXISTS")
    assert not applies
    assert rows == [(1, 1, 7, None, None, 5)]  # pk, ck, s, l, m, v: SELECT * order
    assert _decide(model, "UPDATE ks.t SET v = 2 WHERE pk = 1 AND ck = 2 IF EXISTS")[0] is False
    model.run("DELETE FROM ks.t WHERE pk = 1 AND ck = 1")
    assert _decide(model, "UPDATE ks.t SET v = 2 WHERE pk = 1 AND ck = 1 IF EXISTS")[0] is False


def test_an_expired_row_does_not_exist(model: CoreModel) -> None:
    model.clock_us = (NOW_S - 100) * 1_000_000
    model.run("INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 5) USING TTL 10")
    assert _decide(model, "INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 1) IF NOT EXISTS")[0]


def test_a_static_only_insert_checks_only_the_static_row(model: CoreModel) -> None:
    """ScyllaDB's applies_to: beside clustering rows and no static row, a static-only
    INSERT ... IF NOT EXISTS applies (its result row still shows the partition key)."""
    model.run("INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 5)")
    insert = "INSERT INTO ks.t (pk, s) VALUES (1, 1) IF NOT EXISTS"
    assert _decide(model, insert) == (True, [(1, None, None, None, None, None)])
    assert _decide(model, "UPDATE ks.t SET s = 2 WHERE pk = 1 IF EXISTS")[0] is False
    model.run(insert)
    assert model.run("SELECT pk, ck, s, v FROM ks.t") == [(1, 1, 1, 5)]
    assert _decide(model, insert) == (False, [(1, None, 1, None, None, None)])
    assert _decide(model, "UPDATE ks.t SET s = 2 WHERE pk = 1 IF EXISTS")[0] is True


def test_column_conditions_fall_back_to_the_static_row(model: CoreModel) -> None:
    model.run("INSERT INTO ks.t (pk, s) VALUES (1, 1)")
    assert _decide(model, "UPDATE ks.t SET v = 1 WHERE pk = 1 AND ck = 9 IF s = 1") == (
        True,
        [(1,)],
    )
    assert not _decide(model, "UPDATE ks.t SET v = 1 WHERE pk = 1 AND ck = 9 IF s = 2")[0]


@pytest.mark.parametrize(
    ("condition", "holds"),
    [
        ("v = 5", True), ("v != 5", False), ("v < 6", True), ("v >= 6", False),
        ("v IN (1, 5)", True), ("v IN (1, null)", False), ("v = null", False),
        ("m['a'] = 1", True), ("m['b'] = null", True), ("l[0] = 3", True), ("l[5] = null", True),
        ("m CONTAINS 1", True), ("m CONTAINS KEY 'z'", False), ("l CONTAINS 4", True),
        ("v > 1 AND m['a'] = 2", False),
        ("v NOT IN (1, 2)", True), ("v NOT IN (2, 5)", False), ("v NOT IN (null, 7)", True),
        ("m['b'] NOT IN (null, 7)", False),
    ],
)  # fmt: skip
def test_operators(model: CoreModel, condition: str, holds: bool) -> None:
    model.run("INSERT INTO ks.t (pk, ck, v, m, l) VALUES (1, 1, 5, {'a': 1}, [3, 4])")
    update = f"UPDATE ks.t SET v = 0 WHERE pk = 1 AND ck = 1 IF {condition}"
    assert _decide(model, update)[0] is holds


def test_a_missing_value_compares_as_null() -> None:
    check = ConditionCheck("v", "<", 3, native_type("int"))
    assert not check.holds(None, None)
    assert not check.holds({"v": None}, None)
    assert ConditionCheck("v", "!=", 3).holds({}, None)


def test_a_condition_on_contradicting_key_restrictions_is_refused(model: CoreModel) -> None:
    """cqlpy's test_lwt_empty_clustering_range: ``c = 2 AND c = 2000`` names no row."""
    from cqlcdc.errors import InvalidRequest

    with pytest.raises(InvalidRequest, match="selects no row"):
        model.run("UPDATE ks.t SET v = 1 WHERE pk = 1 AND ck = 2 AND ck = 2000 IF v = 3")


def test_a_bound_in_list_may_hold_null(model: CoreModel) -> None:
    """``IF v IN ?`` bound to ``[1, null, 3]`` (insert_update_if_condition_test's
    testConditionalUpdate): null is a value there, as in ``IN (1, null, 3)``."""
    model.run("INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 3)")
    schema = model.table(parse_qualified("ks.t"))
    part = model.states[schema.table_id][(1,)]
    stmt = parse_statement("UPDATE ks.t SET v = 4 WHERE pk = 1 AND ck = ? IF v IN ?")
    assert isinstance(stmt, ast.Update)

    def decide(ck: int, values: list[Any]) -> bool:
        ctx = WriteContext(1, NOW_S * 1_000_000, 1, bindings=[ck, values])
        cond = build_condition(schema, stmt, ctx)
        return evaluate(schema, Conditional((cond,), ("v",)), part, NOW_S)[0]

    assert decide(1, [1, None, 3])
    assert not decide(1, [1, None])
    assert decide(2, [1, None])  # no row: v is null
    assert not decide(2, [1, 3])


def test_the_wire_form_of_a_bound_in_list() -> None:
    """A null element (-1) is null; an empty int (what the python driver sends for None) is
    ScyllaDB's empty value, equal only to an empty value (docs/types.md); an empty duration
    has no such value and is left out."""
    from cqlcdc.types import InValuesType
    from cqlcdc.types.values import EMPTY

    t = InValuesType(native_type("int"))
    count, size, one, null, empty = (n.to_bytes(4, "big", signed=True) for n in (3, 4, 1, -1, 0))
    data = count + size + one + null + empty
    assert t.deserialize(data) == (1, None, EMPTY)
    assert t.cql_name == "frozen<list<int>>"
    durations = InValuesType(native_type("duration"))
    two, three = (n.to_bytes(4, "big") for n in (2, 3))
    one_ns = b"\x00\x00\x02"  # 0 months, 0 days, 1 ns (zigzag vints)
    assert durations.deserialize(two + three + one_ns + empty) == (Duration(0, 0, 1),)


@pytest.mark.parametrize(
    ("column", "condition", "message"),
    [
        # ScyllaDB's column_condition.cc validate_operation_on_durations
        ("d duration", "d > 1s", "Slice conditions are not supported on durations"),
        ("d duration", "d <= 1s", "Slice conditions are not supported on durations"),
        (
            "d map<int, duration>",
            "d[1] < 1s",
            "Slice conditions are not supported on collections containing durations",
        ),
        (
            "d frozen<list<duration>>",
            "d >= [1s]",
            "Slice conditions are not supported on collections containing durations",
        ),
        (
            "d tuple<int, duration>",
            "d > (1, 1s)",
            "Slice conditions are not supported on tuples containing durations",
        ),
        # a user type is a tuple type in ScyllaDB: its UDT message is never reached
        ("d frozen<dur>", "d > {a: 1s}", "Slice conditions are not supported on tuples"),
    ],
)
def test_slice_conditions_on_durations_are_refused(
    column: str, condition: str, message: str
) -> None:
    model = CoreModel()
    model.run(KS)
    model.run("CREATE TYPE ks.dur (a duration)")
    model.run(f"CREATE TABLE ks.t (pk int PRIMARY KEY, v int, {column})")
    with pytest.raises(InvalidRequest, match=message):
        _decide(model, f"UPDATE ks.t SET v = 1 WHERE pk = 1 IF {condition}")


@pytest.mark.parametrize("condition", ["d = 1s", "d != 1s", "d IN (1s, 2s)"])
def test_equality_conditions_on_durations_are_taken(condition: str) -> None:
    model = CoreModel()
    model.run(KS)
    model.run("CREATE TABLE ks.t (pk int PRIMARY KEY, v int, d duration)")
    applied, _ = _decide(model, f"UPDATE ks.t SET v = 1 WHERE pk = 1 IF {condition}")
    assert applied is (condition == "d != 1s")
