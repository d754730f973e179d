"""Type options both ways: every type survives ``type_option`` -> ``decode_type_option`` and
``marshal_class`` -> ``parse_marshal_class``; hostile or unknown options are ProtocolErrors."""

from __future__ import annotations

import struct

import pytest

from cqlcdc.errors import ProtocolError
from cqlcdc.server.typecodes import (
    NATIVE_IDS,
    decode_type_option,
    marshal_class,
    parse_marshal_class,
    type_option,
)
from cqlcdc.types import (
    ListType,
    MapType,
    SetType,
    TupleType,
    UserType,
    VectorType,
    native_type,
)
from cqlcdc.types.base import CqlType

INT, TEXT = native_type("int"), native_type("text")
UT = UserType("ks", "ut", ("a", "b c"), (INT, ListType(TEXT, frozen=True)))
TYPES: list[CqlType] = [
    *(native_type(name) for name in NATIVE_IDS),
    ListType(INT),
    SetType(TupleType((INT, TEXT))),
    MapType(TEXT, MapType(INT, SetType(INT, frozen=True), frozen=True)),
    TupleType((INT, UT.frozen(), VectorType(INT, 2))),
    UT,
    VectorType(native_type("float"), 3),
    VectorType(MapType(INT, TEXT, frozen=True), 2),
    VectorType(UT.frozen(), 1),
]


@pytest.mark.parametrize("ctype", TYPES, ids=[t.cql_name for t in TYPES])
def test_type_option_round_trip(ctype: CqlType) -> None:
    assert decode_type_option(type_option(ctype)) == ctype


@pytest.mark.parametrize("ctype", TYPES, ids=[t.cql_name for t in TYPES])
def test_marshal_class_round_trip(ctype: CqlType) -> None:
    # unlike an option, a class name says what is frozen (FrozenType)
    assert parse_marshal_class(marshal_class(ctype)) == ctype
    assert parse_marshal_class(marshal_class(ctype.frozen())) == ctype.frozen()


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("org.apache.cassandra.db.marshal.Int32Type", INT),
        ("UTF8Type", TEXT),
        ("org.apache.cassandra.db.marshal.CounterColumnType", native_type("counter")),
        (
            "org.apache.cassandra.db.marshal.ReversedType(org.apache.cassandra.db.marshal."
            "TimeUUIDType)",
            native_type("timeuuid"),
        ),
        (
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal."
            "FloatType, 3)",
            VectorType(native_type("float"), 3),
        ),
        ("ListType(Int32Type)", ListType(INT)),
    ],
)
def test_cassandra_class_names(name: str, expected: CqlType) -> None:
    assert parse_marshal_class(name) == expected


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (struct.pack(">H", 0x0040), "Unknown type option id 0x0040"),
        (struct.pack(">H", 0x0020), "Truncated"),
        (struct.pack(">HH", 0x0000, 3) + b"Foo", "Unknown type class 'Foo'"),
        (struct.pack(">H", 0x0020) * 40 + struct.pack(">H", 9), "nested deeper"),
        (struct.pack(">HH", 0x0009, 0), "unexpected bytes"),
    ],
)
def test_bad_options(option: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_type_option(option)


@pytest.mark.parametrize(
    "name",
    [
        "ListType(",
        "ListType(Int32Type,Int32Type)",
        "MapType(Int32Type)",
        "VectorType(FloatType, x)",
        "VectorType(FloatType, 0)",
        "UserType(ks,zz,61:Int32Type)",
        "FrozenType()",
        "Int32Type)",
        "",
        "(" * 100,
    ],
)
def test_bad_class_names(name: str) -> None:
    with pytest.raises(ProtocolError):
        parse_marshal_class(name)
