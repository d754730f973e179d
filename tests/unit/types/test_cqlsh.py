"""cqlsh text per type: the strings the spec's result tables show, and cqlsh's own rules."""

from __future__ import annotations

import decimal
import ipaddress
import uuid
from typing import Any

import pytest

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

INT = native_type("int")
TEXT = native_type("text")
UT = UserType("ks", "ut", ("a", "b", "c"), (INT, INT, INT))
U1 = uuid.UUID("9d764f58-2f32-11eb-ac58-84f095630d16")

CASES: list[tuple[CqlType, Any, str]] = [
    (INT, 0, "0"),
    (INT, -42, "-42"),
    (native_type("bigint"), 2**63 - 1, "9223372036854775807"),
    (native_type("varint"), 10**30, "1000000000000000000000000000000"),
    (native_type("boolean"), True, "True"),
    (native_type("boolean"), False, "False"),
    (INT, None, "null"),
    (TEXT, "v1", "v1"),
    (TEXT, "it's", "it's"),
    (TEXT, "a\\b", "a\\\\b"),
    (TEXT, "line\nbreak", "line\\nbreak"),
    (native_type("ascii"), "abc", "abc"),
    (native_type("blob"), b"\x80\x7a\xe7\x3e", "0x807ae73e"),
    (native_type("blob"), b"", "0x"),
    (
        native_type("uuid"),
        uuid.UUID("123E4567-E89B-12D3-A456-426614174000"),
        "123e4567-e89b-12d3-a456-426614174000",
    ),
    (native_type("timeuuid"), U1, "9d764f58-2f32-11eb-ac58-84f095630d16"),
    (native_type("timestamp"), 1606390225588, "2020-11-26 11:30:25.588000+0000"),
    (native_type("timestamp"), 0, "1970-01-01 00:00:00.000000+0000"),
    (native_type("timestamp"), -1, "1969-12-31 23:59:59.999000+0000"),
    (native_type("timestamp"), 2**62, str(2**62)),
    (native_type("date"), 18592, "2020-11-26"),
    (native_type("date"), -(2**31), str(-(2**31))),
    (native_type("time"), 29574123456789, "08:12:54.123456789"),
    (native_type("time"), 0, "00:00:00.000000000"),
    (native_type("double"), 1.5, "1.5"),
    (native_type("double"), 0.1, "0.1"),
    (native_type("double"), 1e20, "1e+20"),
    # cqlsh widens %g precision by the exponent, so this shows binary noise (as cqlsh does)
    (native_type("double"), 123456.789, "123456.789000000004"),
    (native_type("double"), 0.0, "0"),
    (native_type("double"), float("nan"), "NaN"),
    (native_type("double"), float("inf"), "Infinity"),
    (native_type("double"), float("-inf"), "-Infinity"),
    (native_type("float"), native_type("float").validate(0.1, "v"), "0.1"),
    (native_type("float"), native_type("float").validate(3.14159265, "v"), "3.14159"),
    (native_type("decimal"), decimal.Decimal("1.50"), "1.50"),
    (native_type("decimal"), decimal.Decimal("15e9"), "1.5E+10"),
    (native_type("inet"), ipaddress.ip_address("127.0.0.1"), "127.0.0.1"),
    (native_type("inet"), ipaddress.ip_address("::1"), "::1"),
    (native_type("duration"), Duration(0, 0, 5_400_000_000_000), "1h30m"),
    (native_type("duration"), Duration(1, 2, 3 * 3_600_000_000_000), "1mo2d3h"),
    (native_type("duration"), Duration(14, 10, 1), "1y2mo10d1ns"),
    (native_type("duration"), Duration(-1, -2, 0), "-1mo2d"),
    (MapType(INT, TEXT), MapType(INT, TEXT).make({2: "v2", 1: "v1"}), "{1: 'v1', 2: 'v2'}"),
    (MapType(INT, INT), MapType(INT, INT).make({1: 1, 2: 2}), "{1: 1, 2: 2}"),
    (SetType(INT), frozenset({3, 1, 2}), "{1, 2, 3}"),
    (SetType(INT, frozen=True), frozenset(), "{}"),
    (ListType(INT), (1, 2), "[1, 2]"),
    (ListType(TEXT), ("a",), "['a']"),
    (ListType(TEXT), ("it's",), "['it''s']"),
    (TupleType((INT, TEXT)), (1, "a"), "(1, 'a')"),
    (TupleType((INT, TEXT)), (1, None), "(1, null)"),
    (UT, UT.make({"a": 0, "b": 1}), "{a: 0, b: 1, c: null}"),
    (UT, UT.make({"a": 42}), "{a: 42, b: null, c: null}"),
    (UT, UT.make({}), "{a: null, b: null, c: null}"),
    (UserType("ks", "q", ("Odd Name",), (TEXT,)), ("x",), "{\"Odd Name\": 'x'}"),
    (
        SetType(native_type("timeuuid")),
        frozenset(
            {
                uuid.UUID("cc5baec2-2fec-11eb-af55-000000000001"),
                uuid.UUID("cc5baec0-2fec-11eb-af55-000000000001"),
            }
        ),
        "{cc5baec0-2fec-11eb-af55-000000000001, cc5baec2-2fec-11eb-af55-000000000001}",
    ),
    (
        MapType(TEXT, ListType(TEXT, frozen=True)),
        MapType(TEXT, ListType(TEXT, frozen=True)).make({"k": ("a", "b")}),
        "{'k': ['a', 'b']}",
    ),
    (ListType(native_type("timestamp")), (0,), "['1970-01-01 00:00:00.000000+0000']"),
    (ListType(native_type("inet")), (ipaddress.ip_address("10.0.0.1"),), "['10.0.0.1']"),
    (ListType(native_type("date")), (0,), "[1970-01-01]"),
    (ListType(native_type("boolean")), (True, False), "[True, False]"),
    (
        ListType(native_type("double")),
        (0.1234567,),
        "[0.123457]",
    ),  # nested doubles use the float precision
    (native_type("double"), 0.1234567, "0.1234567"),
    (VectorType(native_type("float"), 3), (1.0, 2.5, -3.0), "[1, 2.5, -3]"),
]


@pytest.mark.parametrize(("cql_type", "value", "text"), CASES)
def test_cqlsh_text(cql_type: CqlType, value: Any, text: str) -> None:
    assert cql_type.to_cqlsh(cql_type.validate(value, "v")) == text


def test_udt_value_positional_and_named_forms_print_the_same() -> None:
    assert UT.to_cqlsh(UT.validate((0, 1), "v")) == UT.to_cqlsh(UT.validate({"a": 0, "b": 1}, "v"))


def test_zero_duration_prints_empty_but_has_a_literal() -> None:
    duration = native_type("duration")
    assert duration.to_cqlsh(Duration()) == ""
    assert duration.to_literal(Duration()) == "0s"
