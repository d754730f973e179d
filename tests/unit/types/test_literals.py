"""Literal parsing: accepted forms, ScyllaDB's error messages, function terms, collections."""

from __future__ import annotations

import decimal
import ipaddress
import uuid
from typing import Any

import pytest

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import (
    Duration,
    ListType,
    MapType,
    SetType,
    TupleType,
    UserType,
    VectorType,
    native_type,
    parse_literal,
)
from cqlcdc.types.base import CqlType
from cqlcdc.types.temporal import timeuuid_ms

from .helpers import FixedContext, literal_term

INT = native_type("int")
TEXT = native_type("text")
UT = UserType("ks", "ut", ("a", "b", "c"), (INT, INT, INT))

ACCEPTED: list[tuple[CqlType, str, Any]] = [
    (INT, "42", 42),
    (INT, "-2147483648", -(2**31)),
    (native_type("tinyint"), "-128", -128),
    (native_type("smallint"), "32767", 32767),
    (native_type("bigint"), "9223372036854775807", 2**63 - 1),
    (native_type("counter"), "5", 5),
    (native_type("varint"), "123456789012345678901234567890", 123456789012345678901234567890),
    (native_type("double"), "1", 1.0),
    (native_type("double"), "1.5e10", 1.5e10),
    (native_type("float"), "0.5", 0.5),
    (native_type("decimal"), "1", decimal.Decimal(1)),
    (native_type("decimal"), "1.50", decimal.Decimal("1.50")),
    (TEXT, "'it''s'", "it's"),
    (native_type("varchar"), "'x'", "x"),
    (native_type("ascii"), "'abc'", "abc"),
    (native_type("blob"), "0xCAFE", b"\xca\xfe"),
    (native_type("blob"), "0x", b""),
    (native_type("boolean"), "true", True),
    (native_type("boolean"), "FALSE", False),
    (native_type("date"), "'2020-11-26'", 18592),
    (native_type("date"), "'-0001-01-01'", -719893),
    (native_type("date"), "2147483648", 0),
    (native_type("time"), "'08:12:54.123456789'", 29574123456789),
    (native_type("time"), "'08:12:54'", 29574000000000),
    (native_type("time"), "'08:12:54.1'", 29574100000000),
    (native_type("timestamp"), "'2020-11-26 11:30:25.588+0000'", 1606390225588),
    (native_type("timestamp"), "'2020-11-26T11:30:25.588Z'", 1606390225588),
    (native_type("timestamp"), "'2020-11-26 12:30:25.588+01:00'", 1606390225588),
    (native_type("timestamp"), "'2020-11-26 11:30'", 1606390200000),
    (native_type("timestamp"), "'2020-11-26'", 1606348800000),
    (native_type("timestamp"), "'2020-11-26 11:30:25.5 UTC'", 1606390225500),
    (native_type("timestamp"), "1606390225588", 1606390225588),
    (native_type("timestamp"), "'1606390225588'", 1606390225588),
    (native_type("inet"), "'127.0.0.1'", ipaddress.ip_address("127.0.0.1")),
    (native_type("inet"), "'::1'", ipaddress.ip_address("::1")),
    (
        native_type("uuid"),
        "123e4567-e89b-12d3-a456-426614174000",
        uuid.UUID("123e4567-e89b-12d3-a456-426614174000"),
    ),
    (
        native_type("timeuuid"),
        "9d764f58-2f32-11eb-ac58-84f095630d16",
        uuid.UUID("9d764f58-2f32-11eb-ac58-84f095630d16"),
    ),
    (native_type("duration"), "1h30m", Duration(0, 0, 5_400_000_000_000)),
    (native_type("duration"), "1y2mo3w4d", Duration(14, 25, 0)),
    (native_type("duration"), "-2d", Duration(0, -2, 0)),
    (native_type("duration"), "P1Y2M3DT4H5M6S", Duration(14, 3, 14_706_000_000_000)),
    (native_type("duration"), "P2W", Duration(0, 14, 0)),
    (native_type("duration"), "P0001-02-03T04:05:06", Duration(14, 3, 14_706_000_000_000)),
    (native_type("duration"), "1ms2us3ns", Duration(0, 0, 1_002_003)),
    (ListType(INT), "[1, 2, 1]", (1, 2, 1)),
    (ListType(INT, frozen=True), "[]", ()),
    (ListType(INT), "[]", None),  # an empty multi-cell collection does not exist
    (SetType(INT), "{3, 1, 3}", frozenset({1, 3})),
    (SetType(INT, frozen=True), "{}", frozenset()),
    (SetType(INT), "{}", None),
    (MapType(INT, TEXT), "{1: 'a', 1: 'b'}", {1: "a"}),  # ScyllaDB keeps the first
    (MapType(INT, TEXT, frozen=True), "{}", {}),
    (TupleType((INT, TEXT)), "(1, 'a')", (1, "a")),
    (TupleType((INT, TEXT, INT)), "(1, null)", (1, None, None)),
    (UT, "{a: 1, b: 2}", {"a": 1, "b": 2, "c": None}),
    (UT.frozen(), "{c: 3}", {"a": None, "b": None, "c": 3}),
    (VectorType(native_type("float"), 3), "[1, 2.5, 3]", (1.0, 2.5, 3.0)),
    (INT, "null", None),
    (ListType(INT), "null", None),
]


@pytest.mark.parametrize(("cql_type", "text", "value"), ACCEPTED)
def test_accepted_literals(cql_type: CqlType, text: str, value: Any) -> None:
    assert cql_type.parse_literal(literal_term(text), "v") == value


def test_frozen_and_non_frozen_read_the_same_literals() -> None:
    for kind in (ListType(INT), SetType(INT), MapType(INT, INT), UT):
        text = {"list": "[1, 2]", "set": "{1, 2}", "map": "{1: 2}"}.get(
            kind.cql_name.split("<")[0], "{a: 1}"
        )
        assert kind.parse_literal(literal_term(text), "v") == kind.frozen().parse_literal(
            literal_term(text), "v"
        )


REJECTED: list[tuple[CqlType, str, str]] = [
    (INT, "'foo'", 'Invalid STRING constant (foo) for "v" of type int'),
    (TEXT, "1", 'Invalid INTEGER constant (1) for "v" of type text'),
    (INT, "1.5", 'Invalid FLOAT constant (1.5) for "v" of type int'),
    (native_type("boolean"), "1", 'Invalid INTEGER constant (1) for "v" of type boolean'),
    (native_type("blob"), "'cafe'", 'Invalid STRING constant (cafe) for "v" of type blob'),
    (
        native_type("uuid"),
        "'123e4567-e89b-12d3-a456-426614174000'",
        'Invalid STRING constant (123e4567-e89b-12d3-a456-426614174000) for "v" of type uuid',
    ),
    (native_type("time"), "1", 'Invalid INTEGER constant (1) for "v" of type time'),
    (native_type("duration"), "'1h'", 'Invalid STRING constant (1h) for "v" of type duration'),
    (INT, "[1]", "Invalid list literal for v of type int"),
    (INT, "{1}", "Invalid set literal for v of type int"),
    (INT, "{}", "Invalid set literal for v of type int"),
    (INT, "{1: 2}", "Invalid map literal for v of type int"),
    (INT, "{a: 2}", "Invalid user type literal for v of type int"),
    (INT, "(1, 2)", "Invalid tuple type literal for v of type int"),
    (
        INT,
        "2147483648",
        "Value out of range for type org.apache.cassandra.db.marshal.Int32Type: '2147483648'",
    ),
    (
        native_type("tinyint"),
        "128",
        "Value out of range for type org.apache.cassandra.db.marshal.ByteType: '128'",
    ),
    (native_type("bigint"), "9223372036854775808", "Invalid number format '9223372036854775808'"),
    (native_type("float"), "1e40", "Invalid number format '1e40'"),
    (native_type("decimal"), "NaN", "unable to make BigDecimal from 'NaN'"),
    (native_type("ascii"), "'é'", "Invalid ASCII character in string literal: 'é'"),
    (native_type("blob"), "0xabc", "A hex string representing bytes must have an even length"),
    (
        native_type("timeuuid"),
        "123e4567-e89b-42d3-a456-426614174000",
        "Unsupported UUID version (4)",
    ),
    (native_type("inet"), "'nope'", "Failed to parse inet_addr from 'nope'"),
    (
        native_type("date"),
        "'2020-13-01'",
        "Unable to coerce '2020-13-01' to a formatted date (long)",
    ),
    (native_type("time"), "'25:00:00'", "Hour out of bounds (25)."),
    (native_type("time"), "'8'", "Timestamp format must be hh:mm:ss[.fffffffff]"),
    (
        native_type("timestamp"),
        "'yesterday'",
        "unable to parse date 'yesterday': Unable to parse timestamp from 'yesterday'",
    ),
    (
        native_type("timestamp"),
        "'2020-11-26 11:30:25.5881'",
        "unable to parse date '2020-11-26 11:30:25.5881': Milliseconds length exceeds expected (4)",
    ),
    (native_type("duration"), "1h2d", "Invalid duration. The hours should be after days"),
    (native_type("duration"), "1h1h", "Invalid duration. The hours are specified multiple times"),
    (native_type("counter"), "null", "Invalid null value for counter increment/decrement"),
    (ListType(INT), "['a']", "Invalid list literal for v: value 'a' is not of type int"),
    (ListType(INT), "[1, null]", "null is not supported inside collections"),
    (ListType(INT), "{1}", "Invalid set literal for v of type list<int>"),
    (SetType(INT), "{'a'}", "Invalid set literal for v: value 'a' is not of type int"),
    (SetType(INT), "[1]", "Invalid list literal for v of type set<int>"),
    (SetType(INT), "{null}", "null is not supported inside collections"),
    (MapType(INT, TEXT), "{'a': 'b'}", "Invalid map literal for v: key 'a' is not of type int"),
    (MapType(INT, TEXT), "{1: 2}", "Invalid map literal for v: value 2 is not of type text"),
    (MapType(INT, TEXT), "{1: null}", "null is not supported inside collections"),
    (MapType(INT, TEXT), "{1}", "Invalid set literal for v of type map<int, text>"),
    (
        MapType(INT, TEXT, frozen=True),
        "[1]",
        "Invalid list literal for v of type frozen<map<int, text>>",
    ),
    (UT, "{x: 1}", "Unknown field 'x' in value of user defined type ut"),
    (UT, "{a: 'x'}", "Invalid user type literal for v: field a is not of type int"),
    (UT, "{1: 2}", "Invalid map literal for v of type ut"),
    (
        TupleType((INT,)),
        "(1, 2)",
        "Invalid tuple literal for v: too many elements. "
        "Type frozen<tuple<int>> expects 1 but got 2",
    ),
    (
        TupleType((INT, TEXT)),
        "(1, 2)",
        "Invalid tuple literal for v: component 1 is not of type text",
    ),
    (
        VectorType(INT, 3),
        "[1, 2]",
        "Invalid vector literal for v: type vector<int, 3> expects 3 elements but got 2",
    ),
    (INT, "unknownfn()", "Unknown function unknownfn called"),
    (
        INT,
        "now()",
        "Type error: cannot assign result of function system.now (type timeuuid) to v (type int)",
    ),
    (
        native_type("timeuuid"),
        "uuid()",
        "Type error: cannot assign result of function system.uuid (type uuid) to v (type timeuuid)",
    ),
]


@pytest.mark.parametrize(("cql_type", "text", "message"), REJECTED)
def test_rejected_literals(cql_type: CqlType, text: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        cql_type.parse_literal(literal_term(text), "v", FixedContext())
    assert info.value.message == message
    assert info.value.code == 0x2200


def test_bind_marker_must_be_bound() -> None:
    with pytest.raises(InvalidRequest, match="must be bound"):
        INT.parse_literal(ast.BindMarker(), "v")
    with pytest.raises(InvalidRequest, match="must be bound"):
        ListType(INT).parse_literal(ast.ListLiteral((ast.BindMarker(),)), "v")


def test_functions_need_a_context() -> None:
    with pytest.raises(InvalidRequest):
        native_type("timeuuid").parse_literal(literal_term("now()"), "v")
    with pytest.raises(InvalidRequest):
        native_type("timestamp").parse_literal(literal_term("'now'"), "v")


def test_function_terms() -> None:
    ctx = FixedContext(now_us=1_606_390_225_588_123)
    now = native_type("timeuuid").parse_literal(literal_term("now()"), "v", ctx)
    assert now.version == 1 and timeuuid_ms(now) == 1_606_390_225_588
    assert native_type("uuid").parse_literal(literal_term("now()"), "v", ctx).version == 1
    assert native_type("uuid").parse_literal(literal_term("uuid()"), "v", ctx).version == 4
    assert (
        native_type("timestamp").parse_literal(literal_term("currenttimestamp()"), "v", ctx)
        == 1_606_390_225_588
    )
    assert native_type("date").parse_literal(literal_term("currentdate()"), "v", ctx) == 18592
    assert (
        native_type("time").parse_literal(literal_term("currenttime()"), "v", ctx)
        == (1_606_390_225_588_123 % 86_400_000_000) * 1000
    )
    assert (
        native_type("timestamp").parse_literal(literal_term("totimestamp(now())"), "v", ctx)
        == 1_606_390_225_588
    )
    assert native_type("date").parse_literal(literal_term("todate(now())"), "v", ctx) == 18592
    assert (
        native_type("timestamp").parse_literal(literal_term("totimestamp('2020-11-26')"), "v", ctx)
        == 1_606_348_800_000
    )
    assert (
        native_type("bigint").parse_literal(literal_term("tounixtimestamp(now())"), "v", ctx)
        == 1_606_390_225_588
    )
    assert native_type("timestamp").parse_literal(literal_term("'now'"), "v", ctx) == (
        1_606_390_225_588
    )


def test_min_and_max_timeuuid_bracket_every_timeuuid_of_the_millisecond() -> None:
    timeuuid = native_type("timeuuid")
    low = timeuuid.parse_literal(literal_term("mintimeuuid('2020-11-26 11:30:25.588+0000')"), "v")
    high = timeuuid.parse_literal(literal_term("maxtimeuuid(1606390225588)"), "v")
    ctx = FixedContext(now_us=1_606_390_225_588_500)
    inside = timeuuid.parse_literal(literal_term("now()"), "v", ctx)
    assert timeuuid.sort_key(low) < timeuuid.sort_key(inside) < timeuuid.sort_key(high)
    assert timeuuid_ms(low) == timeuuid_ms(high) == 1_606_390_225_588


def test_function_inside_a_collection() -> None:
    ctx = FixedContext()
    value = ListType(native_type("timeuuid")).parse_literal(
        literal_term("[now(), now()]"), "v", ctx
    )
    assert len(value) == 2 and value[0] != value[1]


def test_type_cast() -> None:
    cast = ast.TypeCast(ast.TypeRef("int"), ast.Constant("integer", "3"))
    assert native_type("bigint").parse_literal(cast, "v") == 3
    assert INT.parse_literal(cast, "v") == 3
    with pytest.raises(InvalidRequest, match="Cannot assign value"):
        TEXT.parse_literal(cast, "v")


def test_parse_literal_with_a_column_object() -> None:
    class Column:
        name = "v"
        type = INT

    assert parse_literal(literal_term("7"), Column()) == 7
    with pytest.raises(InvalidRequest, match='for "v" of type int'):
        parse_literal(literal_term("'x'"), Column())


def test_udt_field_indices_are_positions() -> None:
    assert [UT.field_index(f) for f in ("a", "b", "c")] == [0, 1, 2]
    assert UT.field_type("b") == INT
    with pytest.raises(InvalidRequest):
        UT.field_index("zz")


VALIDATE_REJECTED: list[tuple[CqlType, Any]] = [
    (INT, "1"),
    (INT, True),
    (INT, 2**31),
    (TEXT, b"x"),
    (native_type("boolean"), 1),
    (native_type("blob"), "00"),
    (native_type("timeuuid"), uuid.UUID("123e4567-e89b-42d3-a456-426614174000")),
    (native_type("duration"), Duration(1, -1, 0)),
    (native_type("time"), 86_400_000_000_000),
    (native_type("decimal"), decimal.Decimal("NaN")),
    (ListType(INT), (1, None)),
    (SetType(INT), "ab"),
    (MapType(INT, INT), {1: None}),
    (VectorType(INT, 2), (1,)),
    (UT, {"zz": 1}),
]


@pytest.mark.parametrize(("cql_type", "value"), VALIDATE_REJECTED)
def test_validate_rejects(cql_type: CqlType, value: Any) -> None:
    with pytest.raises(InvalidRequest):
        cql_type.validate(value, "v")


def test_validate_normalises() -> None:
    import datetime

    assert (
        native_type("timestamp").validate(
            datetime.datetime(2020, 11, 26, 11, 30, 25, 588000, tzinfo=datetime.UTC), "v"
        )
        == 1606390225588
    )
    assert native_type("date").validate(datetime.date(2020, 11, 26), "v") == 18592
    assert native_type("time").validate(datetime.time(8, 12, 54, 123456), "v") == 29574123456000
    assert native_type("float").validate(0.1, "v") != 0.1  # rounded to binary32
    assert ListType(INT).validate([1, 2], "v") == (1, 2)
    assert SetType(INT).validate([2, 1, 2], "v") == frozenset({1, 2})
    assert native_type("uuid").validate("123E4567-E89B-12D3-A456-426614174000", "v") == uuid.UUID(
        "123e4567-e89b-12d3-a456-426614174000"
    )


def test_a_tuple_literal_sets_a_user_types_fields_in_order() -> None:
    """ScyllaDB's user types are tuple types: ``(1, 2)`` fills ``a`` and ``b``, ``c`` null."""
    value = UT.parse_literal(literal_term("(1, 2)"), "v")
    assert value == UT.make({"a": 1, "b": 2})
    frozen = UT.frozen()
    assert frozen.parse_literal(literal_term("(1, 2, 3)"), "v") == UT.make([1, 2, 3])
    with pytest.raises(InvalidRequest, match=r"too many elements. Type ut expects 3 but got 4"):
        UT.parse_literal(literal_term("(1, 2, 3, 4)"), "v")
    with pytest.raises(InvalidRequest, match=r"component 1 is not of type int"):
        frozen.parse_literal(literal_term("(1, 'x')"), "v")
