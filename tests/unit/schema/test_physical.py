"""Physical names and types (``schema.physical``): injective, case-safe, Delta types."""

from __future__ import annotations

import datetime

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from cqlcdc.cql import ast, parse_statement
from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.schema.persist import table_from_json, table_to_json
from cqlcdc.schema.physical import (
    case_collisions,
    conform,
    cql_name,
    physical_name,
    python_values,
    value_type,
)
from cqlcdc.storage.base_rows import base_schema
from cqlcdc.types import native_type, resolve_type
from cqlcdc.types.base import CqlType
from cqlcdc.types.udt import TupleType, UserType


def cql_type(text: str) -> CqlType:
    """A CQL type written as in a column definition."""
    stmt = parse_statement(f"CREATE TABLE ks.x (k int PRIMARY KEY, v {text})")
    assert isinstance(stmt, ast.CreateTable)
    return resolve_type(stmt.columns[1].type, "ks", lambda ks, name: None)


INTERNAL = ("_bucket", "_pk", "_seq", "_expiry_s", "_ticks", "bucket", "pk", "seq", "marker")


@given(st.text(max_size=12))
def test_a_physical_name_reads_back_and_is_lowercase_ascii(name: str) -> None:
    physical = physical_name(name)
    assert cql_name(physical) == name
    assert physical.isascii() and physical == physical.lower()
    assert not physical.startswith("_")  # the internal columns' space


@given(st.text(max_size=8), st.text(max_size=8))
def test_two_names_meet_only_if_equal(a: str, b: str) -> None:
    same = physical_name(a).lower() == physical_name(b).lower()
    assert same == (a == b)


def test_plain_names_stay_and_others_are_escaped() -> None:
    assert physical_name("somecolumn") == "somecolumn"
    assert physical_name("cdc$deleted_v") == "cdc$deleted_v"
    assert physical_name("SomeColumn") == "%53ome%43olumn"
    assert physical_name("a b") == "a%20b"
    assert physical_name("é") == "%c3%a9"
    assert physical_name("%") == "%25"
    assert physical_name("") == "%"
    assert {physical_name(n) for n in INTERNAL}.isdisjoint(INTERNAL[:5])


def test_log_value_types_are_delta_types_with_physical_field_names() -> None:
    udt = UserType("ks", "u", ("a", "A"), (native_type("time"), native_type("timestamp")))
    assert value_type(native_type("time")) == pa.int64()
    assert value_type(native_type("timestamp")) == pa.int64()
    assert value_type(native_type("date")) == pa.date32()
    assert value_type(udt) == pa.struct([("a", pa.int64()), ("%41", pa.int64())])
    assert case_collisions(pa.schema([("s", udt.arrow_type())])) == [("s.a", "s.A")]
    assert case_collisions(pa.schema([("s", value_type(udt))])) == []


def test_values_round_trip_through_their_physical_type() -> None:
    udt = UserType("ks", "u", ("a", "A"), (native_type("time"), native_type("timestamp")))
    nested = cql_type("frozen<map<int, frozen<list<time>>>>")
    cases = [
        (native_type("time"), [86_399_999_999_999, None, 0]),
        (native_type("timestamp"), [-(2**63) + 1, 2**63 - 1, None]),
        (native_type("date"), [0, -(2**31), 2**31 - 1, None]),
        (udt, [udt.make([1, 2]), None, udt.make([None, -5])]),
        (TupleType((native_type("time"), native_type("int"))), [(5, 1), None]),
        (nested, [{1: [2, 3]}, None, {}]),
    ]
    for t, values in cases:
        arrow = pa.array([t.to_arrow(v) for v in values], t.arrow_type())
        stored = conform(arrow, value_type(t))
        assert stored.type == value_type(t)
        assert python_values(t, stored) == python_values(t, arrow), t
        if t is not nested:
            assert python_values(t, stored) == values, t


def test_conform_keeps_nulls_of_nested_lists() -> None:
    array = pa.array([[datetime.time(1)], None, []], pa.list_(pa.time64("ns")))
    stored = conform(array, pa.list_(pa.int64()))
    assert stored.to_pylist() == [[3_600_000_000_000], None, []]


def test_a_table_saved_before_physical_names_keeps_its_names() -> None:
    table = TableSchema(
        "ks",
        "t",
        (
            Column("pk", native_type("int"), "partition_key"),
            Column("Ck", native_type("int"), "clustering"),
            Column("V", native_type("int"), "regular"),
        ),
    )
    saved = table_to_json(table)
    assert table_from_json(saved).physical_layout == 2
    del saved["physical_layout"]  # as catalogs written before physical names
    legacy = table_from_json(saved)
    assert legacy.physical_layout == 1
    assert {"k$Ck", "v$V$int"} <= set(base_schema(legacy).names)
    assert {"k$%43k", "v$%56$int"} <= set(base_schema(table).names)
