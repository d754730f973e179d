"""JSON encodings of every CQL type, both ways (``toJson``/``SELECT JSON`` and
``fromJson``/``INSERT JSON``).

Expected strings come from ScyllaDB's tests, byte for byte:
- ``CT``: test/cqlpy/cassandra_tests/validation/entities/json_test.py (Cassandra's
  JsonTest ported to ScyllaDB), ``testToJsonFct``, ``testFromJsonFct``,
  ``testInsertJsonSyntaxWithNonNativeMapKeys``, ``testJsonWithNaNAndInfinity``;
- ``ST``: test/cqlpy/test_json.py (ScyllaDB's own);
- ``JU``: types/json_utils.cc and types/types.cc where ScyllaDB prints something its tests
  only compare as equivalent JSON (floats, decimals, IPv6).
"""

from __future__ import annotations

import decimal
import ipaddress
import math
import uuid
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from cqlcdc.cql import ast
from cqlcdc.errors import FunctionFailure, InvalidRequest
from cqlcdc.types import (
    Duration,
    ListType,
    MapType,
    SetType,
    TupleType,
    UserType,
    VectorType,
    native_type,
)
from cqlcdc.types.base import CqlType
from cqlcdc.types.json_codec import (
    JsonParseError,
    MarshalError,
    format_float,
    from_json,
    json_name,
    parse_json,
    to_json,
)
from cqlcdc.types.temporal import DAY_MS, days_from_civil, parse_date, parse_time, parse_timestamp

from .test_properties import IDS, TYPES, values

T = native_type
U1 = uuid.UUID("6bddc89a-5644-11e4-97fc-56847afe9799")
U0 = uuid.UUID("6bddc89a-5644-11e4-97fc-56847afe9798")
ABC = UserType("ks", "abc", ("a", "b", "c"), (T("int"), T("uuid"), SetType(T("text"))))
TB = UserType("ks", "tb", ("t", "b"), (T("text"), T("boolean")))

TO_JSON: list[tuple[str, CqlType, Any, str]] = [
    # CT testToJsonFct
    ("CT ascii", T("ascii"), "ascii text", '"ascii text"'),
    ("CT ascii empty", T("ascii"), "", '""'),
    ("CT bigint", T("bigint"), 123123123123, "123123123123"),
    ("CT bigint zero", T("bigint"), 0, "0"),
    ("CT bigint negative", T("bigint"), -123123123123, "-123123123123"),
    ("CT blob", T("blob"), b"\x00\x00\x00\x01", '"0x00000001"'),
    ("CT blob empty", T("blob"), b"", '"0x"'),
    ("CT boolean true", T("boolean"), True, "true"),
    ("CT boolean false", T("boolean"), False, "false"),
    ("CT date", T("date"), parse_date("1987-03-23"), '"1987-03-23"'),
    ("CT decimal", T("decimal"), decimal.Decimal("123123.123123"), "123123.123123"),
    ("CT double", T("double"), 123123.123123, "123123.123123"),
    ("CT float", T("float"), T("float").validate(123.123, "v"), "123.123"),
    ("CT inet v4", T("inet"), ipaddress.ip_address("127.0.0.1"), '"127.0.0.1"'),
    ("CT int", T("int"), 123123, "123123"),
    ("CT int negative", T("int"), -123123, "-123123"),
    ("CT smallint max", T("smallint"), 32767, "32767"),
    ("CT smallint min", T("smallint"), -32768, "-32768"),
    ("CT tinyint max", T("tinyint"), 127, "127"),
    ("CT tinyint min", T("tinyint"), -128, "-128"),
    ("CT text empty", T("text"), "", '""'),
    ("CT text", T("text"), "abcd", '"abcd"'),
    ("CT text unicode", T("text"), "\u8422", '"\u8422"'),
    ("CT text nul", T("text"), "\u0000", '"\\u0000"'),
    ("CT time", T("time"), 123, '"00:00:00.000000123"'),
    ("CT time nanos", T("time"), parse_time("07:35:07.000111222"), '"07:35:07.000111222"'),
    ("CT timestamp", T("timestamp"), parse_timestamp("2014-01-01"), '"2014-01-01 00:00:00.000Z"'),
    ("CT timeuuid", T("timeuuid"), U1, '"6bddc89a-5644-11e4-97fc-56847afe9799"'),
    ("CT uuid", T("uuid"), U1, '"6bddc89a-5644-11e4-97fc-56847afe9799"'),
    ("CT varint", T("varint"), 123123123123123123123, "123123123123123123123"),
    ("CT list", ListType(T("int")), (1, 2, 3), "[1, 2, 3]"),
    ("CT list empty", ListType(T("int")), None, "null"),
    ("CT frozen list", ListType(T("int"), frozen=True), (1, 2, 3), "[1, 2, 3]"),
    (
        "CT set",
        SetType(T("uuid")),
        frozenset({U1, U0}),
        '["6bddc89a-5644-11e4-97fc-56847afe9798", "6bddc89a-5644-11e4-97fc-56847afe9799"]',
    ),
    ("CT map", MapType(T("ascii"), T("int")), {"a": 1, "b": 2}, '{"a": 1, "b": 2}'),
    (
        "CT tuple",
        TupleType((T("int"), T("ascii"), T("uuid"))),
        (1, "foobar", U1),
        '[1, "foobar", "6bddc89a-5644-11e4-97fc-56847afe9799"]',
    ),
    (
        "CT tuple null",
        TupleType((T("int"), T("ascii"), T("uuid"))),
        (1, "foobar", None),
        '[1, "foobar", null]',
    ),
    (
        "CT udt",
        ABC.frozen(),
        {"a": 1, "b": U1, "c": frozenset({"foo", "bar"})},
        '{"a": 1, "b": "6bddc89a-5644-11e4-97fc-56847afe9799", "c": ["bar", "foo"]}',
    ),
    (
        "CT udt null field",
        ABC.frozen(),
        {"a": 1, "b": U1},
        '{"a": 1, "b": "6bddc89a-5644-11e4-97fc-56847afe9799", "c": null}',
    ),
    ("CT duration us", T("duration"), Duration(0, 0, 12_000), '"12us"'),
    (
        "CT duration",
        T("duration"),
        Duration(13, 2, (10 * 60 + 5) * 60 * 10**9),
        '"1y1mo2d10h5m"',
    ),
    # CT testJsonWithNaNAndInfinity: JSON has neither
    ("CT float NaN", T("float"), math.nan, "null"),
    ("CT float inf", T("float"), math.inf, "null"),
    ("CT double -inf", T("double"), -math.inf, "null"),
    # CT testInsertJsonSyntaxWithNonNativeMapKeys: JSON keys are strings
    (
        "CT int keys",
        MapType(T("int"), T("boolean")),
        {0: True, 1: False},
        '{"0": true, "1": false}',
    ),
    (
        "CT boolean keys",
        MapType(T("boolean"), T("boolean")),
        {True: True, False: False},
        '{"false": false, "true": true}',
    ),
    (
        "CT set keys",
        MapType(SetType(T("int"), frozen=True), T("boolean")),
        {frozenset({0, 1, 2}): True, frozenset({3, 4, 5}): False},
        '{"[0, 1, 2]": true, "[3, 4, 5]": false}',
    ),
    (
        "CT tuple keys",
        MapType(TupleType((T("int"), T("text"))), T("boolean")),
        {(0, "a"): True, (1, "b"): False},
        '{"[0, \\"a\\"]": true, "[1, \\"b\\"]": false}',
    ),
    # ST test_tojson_double, _time, _timestamp; test_select_json_null_component
    ("ST double", T("double"), 123.456, "123.456"),
    ("ST time", T("time"), 123, '"00:00:00.000000123"'),
    (
        "ST timestamp",
        T("timestamp"),
        parse_timestamp("2014-01-01 12:15:45"),
        '"2014-01-01 12:15:45.000Z"',
    ),
    ("ST tuple null", TupleType((T("text"), T("int"))), ("hello", None), '["hello", null]'),
    ("ST udt null", TB.frozen(), {"t": "hello"}, '{"t": "hello", "b": null}'),
    # JU: {fmt}'s shortest form, big_decimal::to_string, seastar's inet_address
    ("JU float integral", T("float"), 123123.0, "123123"),
    ("JU double integral", T("double"), 123123.0, "123123"),
    ("JU double large", T("double"), 1e16, "1e+16"),
    ("JU double small", T("double"), 1.5e-05, "1.5e-05"),
    ("JU float large", T("float"), 1e7, "1e+07"),
    ("JU decimal exponent", T("decimal"), decimal.Decimal("-1.23E-12"), "-0.00000000000123"),
    ("JU decimal zeros", T("decimal"), decimal.Decimal("1.50"), "1.5"),
    ("JU decimal scale", T("decimal"), decimal.Decimal("1E+3"), "1000"),
    ("JU inet v6", T("inet"), ipaddress.ip_address("::1"), '"::1"'),
    ("JU counter", T("counter"), 7, "7"),
    ("JU vector", VectorType(T("float"), 2), (1.5, -2.0), "[1.5, -2]"),
    ("JU text escapes", T("text"), 'q"\\\n\t\x1f', '"q\\"\\\\\\n\\t\\u001F"'),
]


@pytest.mark.parametrize(
    ("cql_type", "value", "expected"),
    [case[1:] for case in TO_JSON],
    ids=[case[0] for case in TO_JSON],
)
def test_to_json(cql_type: CqlType, value: Any, expected: str) -> None:
    if isinstance(cql_type, UserType | MapType) and isinstance(value, dict):
        value = cql_type.make(value)
    assert to_json(cql_type, value) == expected


FROM_JSON: list[tuple[str, CqlType, str, Any]] = [
    # ST test_fromjson_boolean_string_*, _int_scientific_notation_*, _bigint_nonoverflow
    ("ST boolean string", T("boolean"), '"true"', True),
    ("ST boolean mixed case", T("boolean"), '"fALSe"', False),
    ("ST int scientific", T("int"), "1e6", 1000000),
    ("ST bigint scientific", T("bigint"), "1.23456789E+9", 1234567890),
    ("ST bigint max", T("bigint"), "9223372036854775807", 9223372036854775807),
    ("ST null", T("int"), "null", None),
    ("ST map ascii", MapType(T("ascii"), T("int")), '{"a": 1, "b": 2}', {"a": 1, "b": 2}),
    (
        "ST inet key",
        MapType(T("inet"), T("int")),
        '{"1.2.3.4": 3}',
        {ipaddress.ip_address("1.2.3.4"): 3},
    ),
    (
        "ST time key",
        MapType(T("time"), T("int")),
        '{"07:35:07.000111222": 3}',
        {parse_time("07:35:07.000111222"): 3},
    ),
    (
        "ST timestamp key",
        MapType(T("timestamp"), T("int")),
        '{"2014-01-01 12:15:45+0000": 3}',
        {parse_timestamp("2014-01-01 12:15:45"): 3},
    ),
    (
        "ST timestamp Z",
        T("timestamp"),
        '"2014-01-01 12:15:45.000Z"',
        parse_timestamp("2014-01-01 12:15:45"),
    ),
    (
        "ST timestamp T",
        T("timestamp"),
        '"2014-01-01T12:15:45.000Z"',
        parse_timestamp("2014-01-01 12:15:45"),
    ),
    (
        "ST timestamp zone",
        T("timestamp"),
        '"2014-01-01 12:15:45.000+0000"',
        parse_timestamp("2014-01-01 12:15:45"),
    ),
    (
        "ST timestamp zone only",
        T("timestamp"),
        '"2014-01-01 12:15:45+0000"',
        parse_timestamp("2014-01-01 12:15:45"),
    ),
    # CT testFromJsonFct
    ("CT decimal", T("decimal"), "123123.123123", decimal.Decimal("123123.123123")),
    ("CT decimal integer", T("decimal"), "123123", decimal.Decimal("123123")),
    ("CT decimal string", T("decimal"), '"-1.23E-12"', decimal.Decimal("-1.23E-12")),
    ("CT double", T("double"), "123123.123123", 123123.123123),
    ("CT double integer", T("double"), "123123", 123123.0),
    ("CT double string", T("double"), '"123123"', 123123.0),
    ("CT float", T("float"), "123123.123123", T("float").validate(123123.123123, "v")),
    ("CT float string", T("float"), '"123123.0"', 123123.0),
    ("CT timestamp number", T("timestamp"), "1388534400000", 1388534400000),
    ("CT varint string", T("varint"), '"123123123123123123123"', 123123123123123123123),
    ("CT list", ListType(T("int")), "[1, 2, 3]", (1, 2, 3)),
    ("CT set", SetType(T("int")), "[3, 1, 2]", frozenset({1, 2, 3})),
    ("CT blob", T("blob"), '"0x00000001"', b"\x00\x00\x00\x01"),
    ("CT duration", T("duration"), '"1y1mo2d10h5m"', Duration(13, 2, (10 * 60 + 5) * 60 * 10**9)),
    ("CT date", T("date"), '"1987-03-23"', parse_date("1987-03-23")),
    # CT testInsertJsonSyntaxWithNonNativeMapKeys: keys hold their own JSON
    (
        "CT int keys",
        MapType(T("int"), T("boolean")),
        '{"0": true, "1": false}',
        {0: True, 1: False},
    ),
    (
        "CT tuple keys",
        MapType(TupleType((T("int"), T("text"))), T("boolean")),
        '{"[0, \\"a\\"]": true, "[1, \\"b\\"]": false}',
        {(0, "a"): True, (1, "b"): False},
    ),
    (
        "CT udt keys",
        MapType(UserType("ks", "a", ("a",), (T("int"),), frozen=True), T("boolean")),
        '{"{\\"a\\": 0}": true}',
        {UserType("ks", "a", ("a",), (T("int"),), frozen=True).make({"a": 0}): True},
    ),
    # CT testInsertJsonSyntaxWithTuplesAndUDTs, testCaseSensitivity
    (
        "CT nested udt",
        UserType(
            "ks",
            "n",
            ("a", "b", "c"),
            (T("int"), SetType(T("int"), frozen=True), TupleType((T("int"), T("int")))),
            frozen=True,
        ),
        '{"a": 0, "b": [1, 2, 3], "c": [0, 1]}',
        {"a": 0, "b": frozenset({1, 2, 3}), "c": (0, 1)},
    ),
    (
        "CT case-sensitive field",
        UserType("ks", "c", ("a", "Foo"), (T("int"), T("int")), frozen=True),
        '{"A": 0, "\\"Foo\\"": 1}',
        {"a": 0, "Foo": 1},
    ),
]


@pytest.mark.parametrize(
    ("cql_type", "text", "expected"),
    [case[1:] for case in FROM_JSON],
    ids=[case[0] for case in FROM_JSON],
)
def test_from_json(cql_type: CqlType, text: str, expected: Any) -> None:
    if isinstance(cql_type, UserType) and isinstance(expected, dict):
        expected = cql_type.make(expected)
    assert from_json(cql_type.frozen(), parse_json(text)) == expected


FROM_JSON_ERRORS: list[tuple[str, CqlType, str, str]] = [
    # ST test_fromjson_wrong_type_*, _nonint_*, _int_overflow_*, _bigint_overflow_*
    ("ST string for int", T("int"), '"dog"', "Invalid number format 'dog'"),
    (
        "ST number for ascii",
        T("ascii"),
        "3",
        "ascii_type must be represented as string in JSON, instead got '3'",
    ),
    (
        "ST unicode for ascii",
        T("ascii"),
        '"\u05e9"',
        "Invalid ASCII character in string literal: '\u05e9'",
    ),
    (
        "ST fraction for int",
        T("int"),
        "1.2",
        "Incorrect JSON floating-point value for int64 type: 1.2 (it should not contain "
        "fractional part 0.19999999999999996)",
    ),
    ("ST int overflow", T("int"), "2147483648", "Value 2147483648 out of range"),
    (
        "ST bigint overflow",
        T("bigint"),
        "9223372036854775808",
        "Value 9223372036854775808 out of range",
    ),
    ("ST empty string for int", T("int"), '""', "Invalid number format ''"),
    # JU: json_utils.cc messages
    ("JU boolean", T("boolean"), '"yes"', 'Invalid JSON object "yes"'),
    ("JU blob prefix", T("blob"), '"00"', "Blob JSON strings must start with 0x"),
    ("JU counter", T("counter"), '"1"', "Counters must be represented as JSON integer"),
    ("JU list", ListType(T("int")), "1", "list_type must be represented as JSON Array"),
    ("JU map", MapType(T("int"), T("int")), "[]", "map_type must be represented as JSON Object"),
    (
        "JU tuple size",
        TupleType((T("int"),)),
        "[1, 2]",
        "Too many values (2) for tuple with size 1",
    ),
    (
        "JU vector size",
        VectorType(T("int"), 3),
        "[1, 2]",
        "Too few values (2) for vector with size 3",
    ),
    ("JU udt field", TB.frozen(), '{"x": 1}', "Extraneous field definition for user type tb: x"),
    (
        "JU timestamp",
        T("timestamp"),
        "true",
        "timestamp_type must be represented as string or integer",
    ),
    (
        "JU timeuuid version",
        T("timeuuid"),
        '"6bddc89a-5644-41e4-97fc-56847afe9799"',
        "Unsupported UUID version (4)",
    ),
    # CT testFromJsonFct (Cassandra's wording, ScyllaDB has none of its own)
    ("CT null element", ListType(T("int")), "[null]", "Invalid null element in list"),
]


@pytest.mark.parametrize(
    ("cql_type", "text", "message"),
    [case[1:] for case in FROM_JSON_ERRORS],
    ids=[case[0] for case in FROM_JSON_ERRORS],
)
def test_from_json_errors(cql_type: CqlType, text: str, message: str) -> None:
    with pytest.raises(MarshalError) as err:
        from_json(cql_type.frozen(), parse_json(text))
    assert err.value.message == message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dog", "Parsing JSON failed: Invalid value. at 0"),
        ("", "Parsing JSON failed: The document is empty. at 0"),
        ("[1 2]", "Parsing JSON failed: Missing a comma or ']' after an array element. at 3"),
        (
            '{"a": 1 "b": 2}',
            "Parsing JSON failed: Missing a comma or '}' after an object member. at 8",
        ),
        ('{"a" 1}', "Parsing JSON failed: Missing a colon after a name of object member. at 5"),
        ("[NaN]", "Parsing JSON failed: Invalid value. at 1"),
        (
            "1 2",
            "Parsing JSON failed: The document root must not be followed by other values. at 2",
        ),
    ],
)
def test_parse_errors(text: str, message: str) -> None:
    # RapidJSON's reasons (GetParseError_En), which rjson::parse reports
    with pytest.raises(JsonParseError) as err:
        parse_json(text)
    assert err.value.message == message


def test_numbers_stay_exact() -> None:
    # decimals and varints beyond a double's precision are read as written
    assert from_json(T("decimal"), parse_json("0.1000000000000000000001")) == decimal.Decimal(
        "0.1000000000000000000001"
    )
    assert from_json(T("varint"), parse_json("123123123123123123123")) == 123123123123123123123


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("v", '"v"'),
        ("hello", '"hello"'),
        ("Hello", '"\\"Hello\\""'),
        ("Hello World!", '"\\"Hello World!\\""'),
        ("ttl(v)", '"ttl(v)"'),
        ("system.tojson(v)", '"system.tojson(v)"'),
        ("count", '"count"'),
    ],
)
def test_json_names(name: str, key: str) -> None:
    # ST test_select_json_with_alias, test_select_json_function_call
    assert json_name(name) == key


@pytest.mark.parametrize(
    ("value", "single", "text"),
    [
        (17.0, True, "17"),
        (0.1, True, "0.1"),
        (0.1, False, "0.1"),
        (1e-4, False, "0.0001"),
        (1e-5, False, "1e-05"),
        (123456789012345.0, False, "123456789012345"),
        (1.5e300, False, "1.5e+300"),
        (-0.0, False, "-0"),
        (3.4028234663852886e38, True, "3.4028235e+38"),
        (1234567.0, True, "1234567"),
        (12345678.0, True, "1.2345678e+07"),
    ],
)
def test_float_format(value: float, single: bool, text: str) -> None:
    # {fmt} "{}": shortest digits, fixed in [-4, 16) for double and [-4, 7) for float
    assert format_float(value, single) == text


def _json_round_trippable(cql_type: CqlType, value: Any) -> bool:
    """What ScyllaDB's own JSON cannot carry back, at any depth: NaN and infinities (written
    null), a zero duration (written ""), timestamps outside years 0-9999 (its parser wants
    four digits)."""
    if value is None:
        return True
    if isinstance(cql_type, ListType | SetType | VectorType):
        return all(_json_round_trippable(cql_type.elem, v) for v in value)
    if isinstance(cql_type, MapType):
        return all(
            _json_round_trippable(cql_type.key, k) and _json_round_trippable(cql_type.value, v)
            for k, v in value.items()
        )
    if isinstance(cql_type, TupleType):
        return all(_json_round_trippable(t, v) for t, v in zip(cql_type.types, value))
    if isinstance(cql_type, UserType):
        return all(
            _json_round_trippable(t, v) for t, v in zip(cql_type.field_types, value.values_tuple)
        )
    name = cql_type.cql_name
    if name in ("float", "double"):
        return math.isfinite(value)
    if name == "duration":
        return bool(value != Duration())
    if name == "timestamp":
        return days_from_civil(0, 1, 1) * DAY_MS <= value < days_from_civil(10000, 1, 1) * DAY_MS
    return True


@pytest.mark.parametrize("cql_type", TYPES, ids=IDS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_json_round_trip(cql_type: CqlType, data: st.DataObject) -> None:
    value = data.draw(values(cql_type))
    assume(_json_round_trippable(cql_type, value))
    assume(not (cql_type.multicell and len(value) == 0))  # stored as null (see TO_JSON)
    text = to_json(cql_type, value)
    back = from_json(cql_type.frozen(), parse_json(text))
    # equal values; a decimal may come back at another scale (big_decimal::to_string drops
    # trailing zeros), so compare numbers, not bytes
    assert back == value


# -- fromJson / toJson as terms --------------------------------------------------------------


def _call(name: str, *args: ast.Term) -> ast.FunctionCall:
    return ast.FunctionCall(name, args)


def test_from_json_term() -> None:
    int_type = T("int")
    s = ast.Constant("string", '"12"')
    assert int_type.parse_literal(_call("fromjson", s), "v") == 12
    assert int_type.parse_literal(_call("fromJson", ast.Constant("null", "null")), "v") is None
    assert ListType(T("int")).parse_literal(
        _call("fromjson", ast.Constant("string", "[1]")), "l"
    ) == (1,)


def test_from_json_term_failures() -> None:
    # ST test_failed_json_parsing_*, test_fromjson_wrong_type_*: FunctionFailure, not an
    # internal error; the messages are functions.cc's and native_scalar_function.hh's
    with pytest.raises(FunctionFailure) as err:
        T("int").parse_literal(_call("fromjson", ast.Constant("string", "dog")), "v")
    assert err.value.message == (
        "Failed parsing fromJson parameter: Parsing JSON failed: Invalid value. at 0"
    )
    assert err.value.code == 0x1400
    with pytest.raises(FunctionFailure) as err:
        T("int").parse_literal(_call("fromjson", ast.Constant("string", '"dog"')), "v")
    assert err.value.message == (
        "Failed execution of function system.fromjson: marshal_exception "
        "(marshaling error: Invalid number format 'dog')"
    )
    with pytest.raises(InvalidRequest, match="Type error: 3 cannot be passed as argument 0"):
        T("int").parse_literal(_call("fromjson", ast.Constant("integer", "3")), "v")
    with pytest.raises(InvalidRequest, match=r"fromJson\(\) accepts 1 argument only"):
        T("int").parse_literal(_call("fromjson"), "v")


def test_to_json_term() -> None:
    cast = ast.TypeCast(ast.TypeRef("int"), ast.Constant("integer", "3"))
    assert T("text").parse_literal(_call("tojson", cast), "v") == "3"
    with pytest.raises(InvalidRequest, match=r"toJson\(\) is only valid when its argument type"):
        T("text").parse_literal(_call("tojson", ast.Constant("integer", "3")), "v")
    with pytest.raises(InvalidRequest, match=r"cannot assign result of function system\.tojson"):
        T("int").parse_literal(_call("tojson", cast), "v")
