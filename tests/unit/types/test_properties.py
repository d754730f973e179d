"""Property tests, one value strategy per CQL type: literal, cqlsh, protocol, Arrow round trips."""

from __future__ import annotations

import decimal
import math
import uuid
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cqlcdc.types import (
    Duration,
    ListType,
    MapType,
    SetType,
    TupleType,
    UserType,
    VectorType,
    native_type,
    to_pylist,
)
from cqlcdc.types.base import CqlType
from cqlcdc.types.temporal import DAY_NS, MAX_DAYS, MIN_DAYS

from .helpers import literal_term

INT64 = (-(2**63), 2**63 - 1)


def _uuid_with_version(version: int) -> st.SearchStrategy[uuid.UUID]:
    return st.integers(0, 2**128 - 1).map(
        lambda i: uuid.UUID(int=(i & ~(0xF << 76)) | (version << 76))
    )


def _duration() -> st.SearchStrategy[Duration]:
    def build(sign: int, months: int, days: int, nanos: int) -> Duration:
        return Duration(sign * months, sign * days, sign * nanos)

    return st.builds(
        build,
        st.sampled_from([1, -1]),
        st.integers(0, 2**31 - 1),
        st.integers(0, 2**31 - 1),
        st.integers(0, 2**63 - 1),
    )


def _canonical_nan(value: float) -> float:
    # a literal can only say NaN, not which NaN bit pattern
    return math.nan if math.isnan(value) else value


def _decimal() -> st.SearchStrategy[decimal.Decimal]:
    return st.builds(
        lambda unscaled, scale: decimal.Decimal(f"{unscaled}e{-scale}"),
        st.integers(-(10**40), 10**40),
        st.integers(-60, 60),
    ).map(lambda d: d.copy_abs() if d.is_zero() else d)


NATIVE: dict[str, st.SearchStrategy[Any]] = {
    "ascii": st.text(alphabet=st.characters(max_codepoint=127)),
    "bigint": st.integers(*INT64),
    "blob": st.binary(),
    "boolean": st.booleans(),
    "counter": st.integers(*INT64),
    "date": st.integers(MIN_DAYS, MAX_DAYS),
    "decimal": _decimal(),
    "double": st.floats().map(_canonical_nan),
    "duration": _duration(),
    "float": st.floats(width=32).map(_canonical_nan),
    "inet": st.ip_addresses(),
    "int": st.integers(-(2**31), 2**31 - 1),
    "smallint": st.integers(-(2**15), 2**15 - 1),
    "text": st.text(),
    "time": st.integers(0, DAY_NS - 1),
    "timestamp": st.integers(*INT64),
    "timeuuid": _uuid_with_version(1),
    "tinyint": st.integers(-128, 127),
    "uuid": st.integers(0, 2**128 - 1).map(lambda i: uuid.UUID(int=i)),
    "varint": st.integers(-(10**40), 10**40),
}
# NaN never equals itself: keep it out of set elements and map keys
NESTED_FLOATS = {
    "double": st.floats(allow_nan=False),
    "float": st.floats(width=32, allow_nan=False),
}

INT, TEXT = native_type("int"), native_type("text")
UT = UserType("ks", "ut", ("a", "b", "Odd Name"), (INT, TEXT, native_type("double")))


def values(cql_type: CqlType, nested: bool = False) -> st.SearchStrategy[Any]:
    """A strategy of Python values of ``cql_type`` (validated, so canonical)."""
    if isinstance(cql_type, ListType):
        inner = values(cql_type.elem, nested=True)
        return st.lists(inner, max_size=4).map(tuple)
    if isinstance(cql_type, VectorType):
        inner = values(cql_type.elem, nested=True)
        return st.lists(inner, min_size=cql_type.size, max_size=cql_type.size).map(tuple)
    if isinstance(cql_type, SetType):
        return st.frozensets(values(cql_type.elem, nested=True), max_size=4)
    if isinstance(cql_type, MapType):
        keys = values(cql_type.key, nested=True)
        return st.dictionaries(keys, values(cql_type.value, nested=True), max_size=4).map(
            lambda d: cql_type.validate(d, "v")
        )
    if isinstance(cql_type, TupleType):
        parts = [st.none() | values(t, nested=True) for t in cql_type.types]
        return st.tuples(*parts)
    if isinstance(cql_type, UserType):
        parts = [st.none() | values(t, nested=True) for t in cql_type.field_types]
        return st.tuples(*parts).map(lambda vs: cql_type.validate(vs, "v"))
    name = cql_type.cql_name
    strategy = NESTED_FLOATS.get(name, NATIVE[name]) if nested else NATIVE[name]
    return strategy.map(lambda v: cql_type.validate(v, "v"))


TYPES: list[CqlType] = [native_type(n) for n in sorted(NATIVE)] + [
    ListType(INT, frozen=True),
    ListType(TEXT),
    SetType(native_type("timeuuid"), frozen=True),
    SetType(native_type("double")),
    MapType(INT, TEXT, frozen=True),
    MapType(TEXT, ListType(INT, frozen=True)),
    MapType(native_type("timestamp"), native_type("decimal"), frozen=True),
    ListType(MapType(TEXT, native_type("inet"), frozen=True), frozen=True),
    TupleType((INT, TEXT, native_type("boolean"))),
    TupleType((native_type("date"), SetType(native_type("blob"), frozen=True))),
    UT.frozen(),
    UT,
    VectorType(native_type("float"), 3),
    VectorType(native_type("varint"), 2),
]
IDS = [t.cql_name for t in TYPES]


def _same(cql_type: CqlType, a: Any, b: Any) -> bool:
    """Equal as CQL values (bytes compare; NaN equals NaN, decimal scale matters)."""
    if a is None or b is None:
        return a is b
    return cql_type.serialize(a) == cql_type.serialize(b)


@pytest.mark.parametrize("cql_type", TYPES, ids=IDS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_literal_round_trip(cql_type: CqlType, data: st.DataObject) -> None:
    value = data.draw(values(cql_type))
    parsed = cql_type.parse_literal(literal_term(cql_type.to_literal(value)), "v")
    if cql_type.multicell and len(value) == 0:
        assert parsed is None  # an empty non-frozen collection is null
    else:
        assert _same(cql_type, parsed, value)


@pytest.mark.parametrize("cql_type", TYPES, ids=IDS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_serialize_round_trip(cql_type: CqlType, data: st.DataObject) -> None:
    value = data.draw(values(cql_type))
    data_bytes = cql_type.serialize(value)
    back = cql_type.deserialize(data_bytes)
    assert cql_type.serialize(back) == data_bytes
    assert cql_type.to_cqlsh(back) == cql_type.to_cqlsh(value)


@pytest.mark.parametrize("cql_type", TYPES, ids=IDS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_arrow_round_trip(cql_type: CqlType, data: st.DataObject) -> None:
    value = data.draw(values(cql_type))
    array = pa.array([cql_type.to_arrow(value)], type=cql_type.arrow_type())
    assert array.type == cql_type.arrow_type()
    back = cql_type.from_arrow(to_pylist(array)[0])
    assert _same(cql_type, back, value)
    if cql_type.arrow_as_is:  # log_rows_to_arrow then skips to_arrow
        assert cql_type.to_arrow(value) is value


@pytest.mark.parametrize("cql_type", TYPES, ids=IDS)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_cqlsh_text_is_consistent(cql_type: CqlType, data: st.DataObject) -> None:
    value = data.draw(values(cql_type))
    text = cql_type.to_cqlsh(value)
    assert text == cql_type.to_cqlsh(cql_type.validate(value, "v"))
    assert text != "null" or value == "null"  # cqlsh shows the string 'null' like null
    # inside a list, the value shows with the nested (quoted) form of its elements
    as_list = ListType(cql_type.frozen(), frozen=True)
    if not cql_type.is_counter:
        assert as_list.to_cqlsh((value,)) == "[" + cql_type.format_cqlsh(value, True) + "]"


@pytest.mark.parametrize(
    "name", ["tinyint", "smallint", "int", "bigint", "varint", "date", "time", "timestamp"]
)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_integer_types_sort_numerically(name: str, data: st.DataObject) -> None:
    cql_type = native_type(name)
    items = data.draw(st.lists(values(cql_type), max_size=8))
    assert sorted(items, key=cql_type.sort_key) == sorted(items)
    assert all(cql_type.to_cqlsh(v) == str(v) for v in items if name in ("int", "varint"))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(), max_size=8))
def test_text_sorts_by_utf8_bytes(items: list[str]) -> None:
    assert sorted(items, key=TEXT.sort_key) == sorted(items, key=lambda s: s.encode())
