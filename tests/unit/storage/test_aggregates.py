"""Aggregates, GROUP BY and SELECT JSON, evaluated by the core (``storage.select``).

Expected results follow ScyllaDB: cql3/functions/aggregate_fcts.cc (types and arithmetic),
cql3/selection/selection.cc ``result_set_builder`` (groups and limits),
cql3/statements/select_statement.cc (errors), and its tests test/cqlpy/test_aggregate.py,
test_group_by.py and test_json.py (``ST`` below).
"""

from __future__ import annotations

import decimal
import math
import uuid
from typing import Any

import pytest

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import CqlSyntaxError, InvalidRequest
from cqlcdc.storage.aggregates import aggregate
from cqlcdc.storage.select import result_columns
from cqlcdc.types import native_type
from tests.core_model import CoreModel

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture
def model() -> CoreModel:
    m = CoreModel()
    m.run(KS)
    m.run(
        "CREATE TABLE ks.t (p int, c int, v int, d double, f float, dc decimal, vi varint, "
        "ti tinyint, b bigint, s text, PRIMARY KEY (p, c))"
    )
    return m


def _fill(m: CoreModel) -> None:
    rows = [(1, 1, 4), (1, 2, 5), (1, 3, 6), (2, 1, 7), (2, 2, None)]
    for p, c, v in rows:
        m.run(f"INSERT INTO ks.t (p, c, v) VALUES ({p}, {c}, {'null' if v is None else v})")


def test_empty_input(model: CoreModel) -> None:
    # ST test_count_empty_eq, test_count_and_p_empty_eq, test_count_empty_in
    assert model.run("SELECT count(*) FROM ks.t WHERE p = 1") == [(0,)]
    assert model.run("SELECT min(v) FROM ks.t WHERE p = 1") == [(None,)]
    assert model.run("SELECT sum(v) FROM ks.t WHERE p = 1") == [(0,)]
    assert model.run("SELECT avg(v) FROM ks.t WHERE p = 1") == [(0,)]
    assert model.run("SELECT p, count(*) FROM ks.t WHERE p = 1") == [(None, 0)]
    assert model.run("SELECT count(*), count(v), min(v), sum(v) FROM ks.t WHERE p IN ()") == [
        (0, 0, None, 0)
    ]
    assert model.run("SELECT sum(dc), avg(f) FROM ks.t") == [(decimal.Decimal(0), 0.0)]


def test_count_min_max_sum_avg(model: CoreModel) -> None:
    _fill(model)
    assert model.run("SELECT count(*), count(v), min(v), max(v), sum(v), avg(v) FROM ks.t") == [
        (5, 4, 4, 7, 22, 5)  # avg of ints truncates: 22 / 4
    ]
    assert model.run("SELECT count(1) FROM ks.t WHERE p = 2") == [(2,)]


def test_plain_columns_take_the_first_row(model: CoreModel) -> None:
    _fill(model)
    assert model.run("SELECT p, c, max(v) FROM ks.t WHERE p = 1") == [(1, 1, 6)]
    assert model.run("SELECT p, c, max(v) FROM ks.t WHERE p = 1 ORDER BY c DESC") == [(1, 3, 6)]


def test_result_types_and_names() -> None:
    m = CoreModel()
    m.run(KS)
    m.run(
        "CREATE TABLE ks.t (p int, c int, v int, d double, f float, dc decimal, vi varint, "
        'ti tinyint, b bigint, s text, "Odd" int, PRIMARY KEY (p, c))'
    )
    m.run("CREATE TABLE ks.c (p int PRIMARY KEY, n counter)")

    def columns(cql: str) -> list[tuple[str, str]]:
        stmt = parse_statement(cql)
        assert isinstance(stmt, ast.Select)
        return [(n, t.cql_name) for n, t in result_columns(m.table(stmt.table), stmt)]

    assert columns(
        'SELECT count(*), count(v), sum(ti), avg(vi), sum(dc), avg(f), max(s), min("Odd") FROM ks.t'
    ) == [
        ("count", "bigint"),
        ("system.count(v)", "bigint"),
        ("system.sum(ti)", "tinyint"),
        ("system.avg(vi)", "varint"),
        ("system.sum(dc)", "decimal"),
        ("system.avg(f)", "float"),
        ("system.max(s)", "text"),
        ("system.min(Odd)", "int"),
    ]
    # a counter sums as bigint (expression_test_assignment)
    assert columns("SELECT sum(n), avg(n) FROM ks.c") == [
        ("system.sum(n)", "bigint"),
        ("system.avg(n)", "bigint"),
    ]
    assert columns("SELECT tojson(max(v)) AS j, writetime(v) FROM ks.t") == [
        ("j", "text"),
        ("writetime(v)", "bigint"),
    ]
    assert columns("SELECT JSON p, max(v) FROM ks.t") == [("[json]", "text")]


@pytest.mark.parametrize(
    ("type_name", "inputs", "expected_sum", "expected_avg"),
    [
        ("tinyint", [100, 20, 7], 127, 42),
        ("smallint", [-3, -4], -7, -3),  # truncation toward zero, as C++ divides
        ("int", [2147483647, -2147483647, 5], 5, 1),
        ("bigint", [9223372036854775807, -1], 9223372036854775806, 4611686018427387903),
        ("varint", [10**30, 10**30, 1], 2 * 10**30 + 1, (2 * 10**30 + 1) // 3),
        ("double", [0.1, 0.2], 0.1 + 0.2, (0.1 + 0.2) / 2),
        # float adds in binary32: 0.1f + 0.2f = 0.3f, not the double sum
        ("float", [0.1, 0.2], 0.30000001192092896, 0.15000000596046448),
        # decimal: exact sum at the larger scale; avg keeps that scale, half to even
        ("decimal", ["1", "2"], decimal.Decimal("3"), decimal.Decimal("2")),
        ("decimal", ["1.0", "2"], decimal.Decimal("3.0"), decimal.Decimal("1.5")),
        ("decimal", ["1", "2", "2", "3"], decimal.Decimal("8"), decimal.Decimal("2")),
        ("decimal", ["1.1", "1.2"], decimal.Decimal("2.3"), decimal.Decimal("1.2")),
    ],
)
def test_sum_and_avg_per_type(
    type_name: str, inputs: list[Any], expected_sum: Any, expected_avg: Any
) -> None:
    ctype = native_type(type_name)
    values = [ctype.validate(decimal.Decimal(v) if isinstance(v, str) else v, "v") for v in inputs]
    for name, expected in (("sum", expected_sum), ("avg", expected_avg)):
        function = aggregate(name, ctype)
        assert function.result_type == ctype
        acc = function.start()
        for v in [*values, None]:
            acc.add(v)
        result = acc.result()
        assert result == expected and type(result) is type(expected), (name, result)


def test_sum_overflow_and_non_finite() -> None:
    acc = aggregate("sum", native_type("tinyint")).start()
    for v in (100, 100):
        acc.add(v)
    with pytest.raises(InvalidRequest, match=r"^Sum overflow. Values should be casted to a wider"):
        acc.result()
    # ST test_aggregation_inf_nan: inf + -inf is NaN, not an error
    acc = aggregate("sum", native_type("double")).start()
    acc.add(math.inf)
    assert acc.result() == math.inf
    acc.add(-math.inf)
    assert math.isnan(acc.result())


def test_min_max_use_the_type_order() -> None:
    # ST test_timeuuid: timeuuids compare by time, not by bytes
    timeuuid = native_type("timeuuid")
    in_2038 = uuid.UUID("13814000-1dd2-11ff-8080-808080808080")
    in_2020 = uuid.UUID("6b1b3620-33fd-11eb-8080-808080808080")
    for name, expected in (("min", in_2020), ("max", in_2038)):
        acc = aggregate(name, timeuuid).start()
        for v in (in_2038, in_2020):
            acc.add(v)
        assert acc.result() == expected
    acc = aggregate("max", native_type("text")).start()
    for v in ("b", "ab", None):
        acc.add(v)
    assert acc.result() == "b"


def test_sum_of_text_is_refused(model: CoreModel) -> None:
    with pytest.raises(InvalidRequest) as err:
        model.run("SELECT sum(s) FROM ks.t")
    assert err.value.message == (
        "Invalid call to function sum, none of its type signatures match (known type "
        "signatures: " + ", ".join(["system.sum"] * 8) + ")"
    )
    with pytest.raises(InvalidRequest, match=r"^Invalid call to function avg, none"):
        model.run("SELECT avg(s) FROM ks.t")


def test_group_by_results(model: CoreModel) -> None:
    _fill(model)
    # ST test_count_and_group_by_row, test_count_and_group_by_partition
    assert model.run("SELECT p, c, count(v) FROM ks.t WHERE p = 1 GROUP BY p, c") == [
        (1, 1, 1),
        (1, 2, 1),
        (1, 3, 1),
    ]
    assert sorted(model.run("SELECT p, count(v), count(*) FROM ks.t GROUP BY p")) == [
        (1, 3, 3),
        (2, 1, 2),
    ]
    # ST test_count_and_group_by_row_none: no group, no row
    assert model.run("SELECT p, count(v) FROM ks.t WHERE p = 3 GROUP BY p") == []
    # GROUP BY without an aggregate: each group's first row (CT testJsonWithGroupBy)
    assert sorted(model.run("SELECT p, c, v FROM ks.t GROUP BY p")) == [(1, 1, 4), (2, 1, 7)]
    # a key column restricted by = may be skipped (prepare_group_by)
    assert model.run("SELECT c, max(v) FROM ks.t WHERE p = 1 GROUP BY c") == [
        (1, 4),
        (2, 5),
        (3, 6),
    ]


def test_group_by_limits(model: CoreModel) -> None:
    _fill(model)
    tokens = [row[0] for row in model.run("SELECT p FROM ks.t GROUP BY p")]
    # LIMIT counts groups, PER PARTITION LIMIT the groups of each partition
    assert model.run("SELECT p, count(*) FROM ks.t GROUP BY p LIMIT 1") == [
        (tokens[0], 3 if tokens[0] == 1 else 2)
    ]
    rows = model.run("SELECT p, c, v FROM ks.t GROUP BY p, c PER PARTITION LIMIT 2")
    assert sorted(rows) == [(1, 1, 4), (1, 2, 5), (2, 1, 7), (2, 2, None)]
    rows = model.run("SELECT p, c FROM ks.t GROUP BY p, c PER PARTITION LIMIT 1 LIMIT 1")
    assert len(rows) == 1
    # filtering applies before grouping
    assert model.run("SELECT p, count(*) FROM ks.t WHERE v > 4 GROUP BY p ALLOW FILTERING") in (
        [(1, 2), (2, 1)],
        [(2, 1), (1, 2)],
    )


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        ("SELECT sum(v) FROM ks.t GROUP BY v", "Group by non-primary-key column v"),
        ("SELECT sum(v) FROM ks.t GROUP BY x", "Group by unknown column x"),
        ("SELECT sum(v) FROM ks.t GROUP BY c", "Group by column c is out of order"),
        ("SELECT sum(v) FROM ks.t GROUP BY c, p", "Group by column c is out of order"),
        ("SELECT sum(v) FROM ks.t GROUP BY p, c, c", "Group by column c is out of order"),
        (
            "SELECT count(*) FROM ks.t PER PARTITION LIMIT 2",
            "PER PARTITION LIMIT is not allowed with aggregate queries.",
        ),
        ("SELECT max(sum(v)) FROM ks.t", "SELECT clause contains aggeregation of an aggregation"),
        ("SELECT min(v, c) FROM ks.t", "min() function requires only 1 argument"),
        (
            "SELECT DISTINCT p FROM ks.t GROUP BY p, c",
            "Grouping on clustering columns is not allowed for SELECT DISTINCT queries",
        ),
        ("SELECT tojson(v, c) FROM ks.t", "toJson() accepts 1 argument only"),
        (
            "SELECT fromjson(s) FROM ks.t",
            "fromJson() can only be called if receiver type is known",
        ),
        ("SELECT count(*) FROM ks.t LIMIT 0", "LIMIT must be strictly positive"),
    ],
)
def test_refused(model: CoreModel, cql: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as err:
        model.run(cql)
    assert err.value.message == message


def test_group_by_must_cover_the_partition_key() -> None:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t2 (a int, b int, c int, v int, PRIMARY KEY ((a, b), c))")
    with pytest.raises(InvalidRequest, match=r"^GROUP BY must include the entire partition key$"):
        m.run("SELECT count(*) FROM ks.t2 GROUP BY a")
    m.run("INSERT INTO ks.t2 (a, b, c, v) VALUES (1, 1, 1, 1)")
    assert m.run("SELECT count(*) FROM ks.t2 WHERE a = 1 AND b = 1 GROUP BY c") == [(1,)]


def test_star_only_in_count(model: CoreModel) -> None:
    with pytest.raises(CqlSyntaxError):
        model.run("SELECT sum(*) FROM ks.t")


def test_select_json(model: CoreModel) -> None:
    model.run("INSERT INTO ks.t (p, c, v, d, s) VALUES (1, 1, 17, 1.5, 'a\"b')")
    # SELECT * in select order: keys, then regular columns by name
    assert model.run("SELECT JSON * FROM ks.t") == [
        (
            '{"p": 1, "c": 1, "b": null, "d": 1.5, "dc": null, "f": null, "s": "a\\"b", '
            '"ti": null, "v": 17, "vi": null}',
        )
    ]
    # ST test_select_json_with_alias, test_select_json_function_call (count, ttl)
    assert model.run('SELECT JSON v AS "Hello", p AS xyz, ttl(v) FROM ks.t') == [
        ('{"\\"Hello\\"": 17, "xyz": 1, "ttl(v)": null}',)
    ]
    assert model.run("SELECT JSON count(*) FROM ks.t") == [('{"count": 1}',)]
    assert model.run("SELECT JSON tojson(v) FROM ks.t") == [('{"system.tojson(v)": "17"}',)]
    assert model.run("SELECT toJson(s), toJson(d) FROM ks.t") == [('"a\\"b"', "1.5")]
