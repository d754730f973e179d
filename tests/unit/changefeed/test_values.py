"""CQL values as changefeed JSON and as DynamoDB AttributeValues: one row per type
(docs/changefeeds.md, "Type mapping")."""

from __future__ import annotations

import ipaddress
import math
import uuid
from decimal import Decimal
from typing import Any

import pytest

from cqlcdc.changefeed.values import iso_date, iso_timestamp, to_attribute_value, to_json
from cqlcdc.types import (
    CqlType,
    Duration,
    ListType,
    MapType,
    MapValue,
    SetType,
    TupleType,
    UdtValue,
    UserType,
    VectorType,
    native_type,
)

U = uuid.UUID("65df1ec1-a97d-47b2-ae56-3c023da6ee8c")
T = native_type
ADDR = UserType("ks", "addr", ("street", "zip"), (T("text"), T("int")))

CASES: list[tuple[CqlType, Any, Any, dict[str, Any]]] = [
    (T("ascii"), "abc", "abc", {"S": "abc"}),
    (T("text"), "héllo", "héllo", {"S": "héllo"}),
    (T("varchar"), "x", "x", {"S": "x"}),
    (T("tinyint"), -1, -1, {"N": "-1"}),
    (T("smallint"), 300, 300, {"N": "300"}),
    (T("int"), 42, 42, {"N": "42"}),
    (T("bigint"), 9223372036854775807, 9223372036854775807, {"N": "9223372036854775807"}),
    (T("counter"), 5, 5, {"N": "5"}),
    (T("varint"), 10**30, "1" + "0" * 30, {"N": "1" + "0" * 30}),
    (T("decimal"), Decimal("1.50"), "1.50", {"N": "1.50"}),
    (T("decimal"), Decimal("1.5E+10"), "1.5E+10", {"N": "1.5E+10"}),
    (T("double"), 0.1, 0.1, {"N": "0.1"}),
    (T("double"), math.nan, "nan", {"S": "nan"}),
    (T("double"), -math.inf, "-inf", {"S": "-inf"}),
    (T("float"), 0.10000000149011612, 0.1, {"N": "0.1"}),  # binary32 0.1: shortest text
    (T("float"), math.inf, "inf", {"S": "inf"}),
    (T("boolean"), True, True, {"BOOL": True}),
    (T("blob"), b"\x01\x02\xff", "AQL/", {"B": "AQL/"}),
    (T("uuid"), U, str(U), {"S": str(U)}),
    (
        T("timeuuid"),
        uuid.UUID("9d764f58-2f32-11eb-ac58-84f095630d16"),
        "9d764f58-2f32-11eb-ac58-84f095630d16",
        {"S": "9d764f58-2f32-11eb-ac58-84f095630d16"},
    ),
    (T("inet"), ipaddress.ip_address("127.0.0.1"), "127.0.0.1", {"S": "127.0.0.1"}),
    (T("inet"), ipaddress.ip_address("::1"), "::1", {"S": "::1"}),
    (T("date"), 19045, "2022-02-22T00:00:00.000000Z", {"S": "2022-02-22T00:00:00.000000Z"}),
    (
        T("timestamp"),
        1670803200123,
        "2022-12-12T00:00:00.123000Z",
        {"S": "2022-12-12T00:00:00.123000Z"},
    ),
    (T("time"), 29574123456789, "08:12:54.123456789", {"S": "08:12:54.123456789"}),
    (T("duration"), Duration(1, 2, 3_000_000_000), "1mo2d3s", {"S": "1mo2d3s"}),
    (ListType(T("text")), ("b", "a"), ["b", "a"], {"L": [{"S": "b"}, {"S": "a"}]}),
    (SetType(T("int")), frozenset({3, 1, 2}), [1, 2, 3], {"NS": ["1", "2", "3"]}),
    (SetType(T("text")), frozenset({"b", "a"}), ["a", "b"], {"SS": ["a", "b"]}),
    (SetType(T("uuid")), frozenset({U}), [str(U)], {"SS": [str(U)]}),
    (SetType(T("blob")), frozenset({b"\x01"}), ["AQ=="], {"BS": ["AQ=="]}),
    (SetType(T("boolean")), frozenset({True}), [True], {"L": [{"BOOL": True}]}),
    (SetType(T("int"), frozen=True), frozenset(), [], {"L": []}),  # DynamoDB has no empty set
    (
        MapType(T("text"), T("int")),
        MapValue([("a", 1), ("b", None)]),
        {"a": 1, "b": None},
        {"M": {"a": {"N": "1"}, "b": {"NULL": True}}},
    ),
    (
        MapType(T("int"), T("text")),
        MapValue([(2, "y"), (1, "x")], sort_key=T("int").sort_key),
        {"1": "x", "2": "y"},
        {"M": {"1": {"S": "x"}, "2": {"S": "y"}}},
    ),
    (
        MapType(TupleType((T("int"), T("text"))).frozen(), T("int")),
        MapValue([((1, "a"), 7)]),
        {'[1,"a"]': 7},
        {"M": {'[1,"a"]': {"N": "7"}}},
    ),
    (
        TupleType((T("int"), T("text"))),
        (1, None),
        [1, None],
        {"L": [{"N": "1"}, {"NULL": True}]},
    ),
    (
        ADDR,
        UdtValue(("street", "zip"), {"street": "Main"}),
        {"street": "Main", "zip": None},
        {"M": {"street": {"S": "Main"}, "zip": {"NULL": True}}},
    ),
    (VectorType(T("float"), 2), (1.5, -3.0), [1.5, -3.0], {"L": [{"N": "1.5"}, {"N": "-3.0"}]}),
]


@pytest.mark.parametrize(("cql_type", "value", "json_value", "attribute"), CASES)
def test_renderings(cql_type: CqlType, value: Any, json_value: Any, attribute: Any) -> None:
    assert to_json(cql_type, value) == json_value
    assert to_attribute_value(cql_type, value) == attribute


def test_every_native_type_is_covered() -> None:
    from cqlcdc.types import NATIVE_TYPES

    covered = {t.cql_name for t, *_ in CASES}
    assert set(NATIVE_TYPES) - covered == {"varchar"}  # an alias: native_type gives text


def test_null() -> None:
    assert to_json(T("int"), None) is None
    assert to_attribute_value(T("int"), None) == {"NULL": True}


def test_dates_outside_years_0_to_9999_use_expanded_years() -> None:
    assert iso_date(0) == "1970-01-01T00:00:00.000000Z"
    assert iso_date(-719529) == "-0001-12-31T00:00:00.000000Z"
    assert iso_date(2932897) == "+10000-01-01T00:00:00.000000Z"
    assert iso_timestamp(-1) == "1969-12-31T23:59:59.999000Z"


def test_set_with_nan_is_a_list() -> None:
    value = to_attribute_value(SetType(T("double")), frozenset({1.0, math.nan}))
    assert value == {"L": [{"N": "1.0"}, {"S": "nan"}]}
