"""Rows of every CQL type, as the driver reads them: our type options parse to the driver's
types, cqlcdc's cell bytes are the driver's own serialization, and a Rows result of them
decodes to the driver's Python values (nulls and empty values too)."""

from __future__ import annotations

import datetime
import decimal
import io
import ipaddress
import uuid
from typing import Any

import pytest
from cassandra.protocol import ResultMessage
from cassandra.util import Date, Time
from cassandra.util import Duration as DriverDuration

from cqlcdc.server.responses import encode_response
from cqlcdc.server.results import ColumnSpec, RowsMetadata, RowsResult, serialize_rows
from cqlcdc.server.typecodes import type_option
from cqlcdc.types import (
    Duration,
    ListType,
    MapType,
    SetType,
    TupleType,
    UdtValue,
    UserType,
    VectorType,
    native_type,
)
from cqlcdc.types.base import CqlType

from .helpers import HANDLERS, VERSIONS, driver_decode

INT, TEXT = native_type("int"), native_type("text")
UT = UserType("ks", "address", ("street", "zip"), (TEXT, INT))
TIMEUUID = uuid.UUID("5b6962dd-3f90-11ef-a9f2-0242ac120002")

# cqlcdc type, cqlcdc value, the driver's name for the type read from our option (which
# carries no frozen flag), the driver's value
TYPES: list[tuple[CqlType, Any, str, Any]] = [
    (native_type("ascii"), "abc", "ascii", "abc"),
    (native_type("bigint"), -(2**63), "bigint", -(2**63)),
    (native_type("blob"), b"\x00\xff", "blob", b"\x00\xff"),
    (native_type("boolean"), True, "boolean", True),
    (native_type("counter"), 42, "counter", 42),
    (native_type("decimal"), decimal.Decimal("-12.340"), "decimal", decimal.Decimal("-12.340")),
    (native_type("double"), 2.5e300, "double", 2.5e300),
    (native_type("float"), 1.5, "float", 1.5),
    (INT, -7, "int", -7),
    (
        native_type("timestamp"),
        1_700_000_000_123,
        "timestamp",
        datetime.datetime(2023, 11, 14, 22, 13, 20, 123000),
    ),
    (native_type("uuid"), uuid.UUID(int=5), "uuid", uuid.UUID(int=5)),
    (TEXT, "héllo", "varchar", "héllo"),
    (native_type("varint"), 2**80, "varint", 2**80),
    (native_type("timeuuid"), TIMEUUID, "timeuuid", TIMEUUID),
    (native_type("inet"), ipaddress.ip_address("::1"), "inet", "::1"),
    (native_type("date"), 19_000, "date", Date(19_000)),
    (native_type("time"), 3_600_000_000_001, "time", Time(3_600_000_000_001)),
    (native_type("smallint"), -300, "smallint", -300),
    (native_type("tinyint"), 127, "tinyint", 127),
    (native_type("duration"), Duration(-1, -2, -3), "duration", DriverDuration(-1, -2, -3)),
    (ListType(INT), (3, 1, 3), "list<int>", [3, 1, 3]),
    (SetType(TEXT), frozenset({"a"}), "set<varchar>", {"a"}),
    (
        MapType(INT, ListType(TEXT, frozen=True)),
        MapType(INT, TEXT).make({1: ("x", "y")}),
        "map<int, list<varchar>>",
        {1: ["x", "y"]},
    ),
    (TupleType((INT, TEXT, INT)), (1, None, 3), "frozen<tuple<int, varchar, int>>", (1, None, 3)),
    (UT, UdtValue(UT.field_names, ("Main St", 12345)), "frozen<address>", ("Main St", 12345)),
    (VectorType(native_type("float"), 3), (1.0, -2.5, 0.0), "vector<float, 3>", [1.0, -2.5, 0.0]),
    (VectorType(TEXT, 2), ("a", "bc"), "vector<text, 2>", ["a", "bc"]),
]
IDS = [t[0].cql_name for t in TYPES]


def _driver_type(ctype: CqlType) -> Any:
    return ResultMessage.read_type(io.BytesIO(type_option(ctype)), {})


def _normal(value: Any) -> Any:
    """Driver collection and UDT classes as plain lists, sets, dicts and tuples."""
    if isinstance(value, str | bytes):
        return value
    if hasattr(value, "_fields"):  # a UDT namedtuple
        return tuple(_normal(v) for v in value)
    if isinstance(value, dict) or hasattr(value, "items"):
        return {_normal(k): _normal(v) for k, v in value.items()}
    if isinstance(value, set | frozenset) or type(value).__name__ == "SortedSet":
        return {_normal(v) for v in value}
    if isinstance(value, list | tuple):
        return type(value)(_normal(v) for v in value)
    return value


@pytest.mark.parametrize(("ctype", "value", "driver_name", "driver_value"), TYPES, ids=IDS)
def test_type_option_and_cell_bytes_match_the_driver(
    ctype: CqlType, value: Any, driver_name: str, driver_value: Any
) -> None:
    driver_type = _driver_type(ctype)
    name = driver_type.cql_parameterized_type()
    assert name.removeprefix("org.apache.cassandra.db.marshal.VectorType") == (
        driver_name.removeprefix("vector")
    )
    cell = ctype.serialize(value)
    assert cell == driver_type.serialize(driver_value, 5)
    assert _normal(driver_type.from_binary(cell, 5)) == _normal(driver_value)
    # and bound values, which the driver serializes, read back as cqlcdc values
    assert ctype.deserialize(driver_type.serialize(driver_value, 5)) == value


@pytest.mark.parametrize("handler", HANDLERS, ids=["cython", "python"])
@pytest.mark.parametrize("version", VERSIONS)
def test_a_row_of_every_type_then_nulls_then_empty_values(version: int, handler: Any) -> None:
    columns = tuple(ColumnSpec("ks", "t", f"c{i}", t[0]) for i, t in enumerate(TYPES))
    cells = serialize_rows(columns, [[t[1] for t in TYPES], [None] * len(TYPES)])
    empty = tuple(b"" for _ in TYPES)
    result = RowsResult(RowsMetadata(columns), (*cells, empty))
    msg = driver_decode(encode_response(version, 1, result), handler=handler)
    assert msg.column_names == [c.name for c in columns]
    full, nulls, empties = msg.parsed_rows
    assert [_normal(v) for v in full] == [_normal(t[3]) for t in TYPES]
    assert list(nulls) == [None] * len(TYPES)
    # an empty value is not null: text and blob read it as '' and b'', most types as None
    by_name = dict(zip(IDS, empties, strict=True))
    assert by_name["text"] == "" and by_name["ascii"] == "" and by_name["blob"] == b""
    assert by_name["int"] is None
