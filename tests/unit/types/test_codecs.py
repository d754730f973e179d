"""Native protocol v4 bytes, Arrow round trips, the comparator order, type resolution."""

from __future__ import annotations

import decimal
import ipaddress
import math
import uuid
from typing import Any

import pyarrow as pa
import pytest

from cqlcdc.cql.ast import TypeRef
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import (
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
    resolve_type,
    to_pylist,
)
from cqlcdc.types.base import CqlType
from cqlcdc.types.marshal import uvint_pack, uvint_unpack, varint_pack

INT = native_type("int")
TEXT = native_type("text")
UT = UserType("ks", "ut", ("a", "b"), (INT, TEXT))

BYTES: list[tuple[CqlType, Any, str]] = [
    (INT, 1, "00000001"),
    (INT, -1, "ffffffff"),
    (native_type("tinyint"), -2, "fe"),
    (native_type("smallint"), 258, "0102"),
    (native_type("bigint"), 1, "0000000000000001"),
    (native_type("varint"), 0, "00"),
    (native_type("varint"), 127, "7f"),
    (native_type("varint"), 128, "0080"),
    (native_type("varint"), -128, "80"),
    (native_type("varint"), -129, "ff7f"),
    (native_type("decimal"), decimal.Decimal("1.50"), "00000002" + "0096"),
    (native_type("decimal"), decimal.Decimal("-1E+3"), "fffffffd" + "ff"),
    (native_type("boolean"), True, "01"),
    (native_type("double"), 1.5, "3ff8000000000000"),
    (native_type("float"), 1.5, "3fc00000"),
    (TEXT, "é", "c3a9"),
    (native_type("date"), 0, "80000000"),
    (native_type("date"), -1, "7fffffff"),
    (native_type("time"), 1, "0000000000000001"),
    (native_type("timestamp"), -1, "ffffffffffffffff"),
    (native_type("inet"), ipaddress.ip_address("127.0.0.1"), "7f000001"),
    (native_type("uuid"), uuid.UUID(int=1), "00000000000000000000000000000001"),
    (native_type("duration"), Duration(1, 2, 3), "020406"),
    (native_type("duration"), Duration(-1, 0, 0), "010000"),
    (ListType(INT), (1, 2), "00000002" + "00000004" + "00000001" + "00000004" + "00000002"),
    (SetType(INT), frozenset({2, 1}), "00000002" + "0000000400000001" + "0000000400000002"),
    (MapType(INT, TEXT), {1: "a"}, "00000001" + "0000000400000001" + "0000000161"),
    (TupleType((INT, TEXT)), (1, None), "0000000400000001" + "ffffffff"),
    (UT, {"a": None, "b": "x"}, "ffffffff" + "0000000178"),
    (VectorType(native_type("float"), 2), (1.5, 1.5), "3fc000003fc00000"),
    (VectorType(native_type("smallint"), 2), (1, 2), "020001" + "020002"),
]


@pytest.mark.parametrize(("cql_type", "value", "hex_bytes"), BYTES)
def test_serialize(cql_type: CqlType, value: Any, hex_bytes: str) -> None:
    normalised = cql_type.validate(value, "v")
    data = cql_type.serialize(normalised)
    assert data.hex() == hex_bytes
    assert cql_type.deserialize(data) == normalised


def test_udt_deserialize_accepts_fewer_fields() -> None:
    # a value written before ALTER TYPE ADD has fewer fields: the new ones are null
    assert UT.deserialize(bytes.fromhex("0000000400000007")) == UdtValue(("a", "b"), (7, None))


def test_bad_bytes_are_rejected() -> None:
    with pytest.raises(InvalidRequest):
        INT.deserialize(b"\x00")
    with pytest.raises(InvalidRequest):
        ListType(INT).deserialize(bytes.fromhex("00000002" + "00000004" + "00000001"))


@pytest.mark.parametrize("value", [0, 1, 127, 128, 2**14 - 1, 2**14, 2**35, 2**56, 2**64 - 1])
def test_uvint_round_trip(value: int) -> None:
    assert uvint_unpack(uvint_pack(value)) == (value, len(uvint_pack(value)))


def test_varint_is_minimal() -> None:
    assert varint_pack(255) == b"\x00\xff"
    assert varint_pack(-256) == b"\xff\x00"


ARROW: list[tuple[CqlType, Any, pa.DataType]] = [
    (native_type("tinyint"), -1, pa.int8()),
    (native_type("smallint"), -1, pa.int16()),
    (INT, -1, pa.int32()),
    (native_type("bigint"), -1, pa.int64()),
    (native_type("counter"), 5, pa.int64()),
    (native_type("varint"), -(10**30), pa.string()),
    (native_type("decimal"), decimal.Decimal("1.50E-7"), pa.string()),
    (native_type("float"), 1.5, pa.float32()),
    (native_type("double"), 0.1, pa.float64()),
    (TEXT, "x", pa.string()),
    (native_type("ascii"), "x", pa.string()),
    (native_type("blob"), b"\x00", pa.binary()),
    (native_type("boolean"), True, pa.bool_()),
    (native_type("uuid"), uuid.UUID(int=5), pa.string()),
    (native_type("timeuuid"), uuid.UUID("9d764f58-2f32-11eb-ac58-84f095630d16"), pa.string()),
    (native_type("inet"), ipaddress.ip_address("::1"), pa.string()),
    (native_type("date"), 2**31 - 1, pa.date32()),
    (native_type("time"), 123456789012, pa.time64("ns")),
    (native_type("timestamp"), -(2**62), pa.timestamp("ms", tz="UTC")),
    (native_type("duration"), Duration(1, 2, 3), None),
    (ListType(INT), (3, 1), pa.list_(pa.int32())),
    (SetType(TEXT), frozenset({"b", "a"}), pa.list_(pa.string())),
    (MapType(INT, TEXT), {2: "b", 1: "a"}, pa.map_(pa.int32(), pa.string())),
    (TupleType((INT, TEXT)), (1, None), pa.struct([("0", pa.int32()), ("1", pa.string())])),
    (UT, {"a": 1}, pa.struct([("a", pa.int32()), ("b", pa.string())])),
    (VectorType(native_type("float"), 2), (1.0, 2.0), pa.list_(pa.float32())),
    (MapType(INT, ListType(native_type("time"), frozen=True)), {1: (5, 6)}, None),
]


@pytest.mark.parametrize(("cql_type", "value", "arrow_type"), ARROW)
def test_arrow_round_trip(cql_type: CqlType, value: Any, arrow_type: pa.DataType | None) -> None:
    normalised = cql_type.validate(value, "v")
    if arrow_type is not None:
        assert cql_type.arrow_type() == arrow_type
    array = pa.array([cql_type.to_arrow(normalised), None], type=cql_type.arrow_type())
    back = [cql_type.from_arrow(v) for v in to_pylist(array)]
    assert back == [normalised, None]


def test_arrow_orders_sets_and_maps() -> None:
    array = pa.array([SetType(INT).to_arrow(frozenset({3, 1, 2}))], type=pa.list_(pa.int32()))
    assert array.to_pylist() == [[1, 2, 3]]
    m = MapType(TEXT, INT)
    assert m.to_arrow(m.validate({"b": 1, "a": 2}, "v")) == [("a", 2), ("b", 1)]


def test_from_arrow_accepts_plain_to_pylist_temporals() -> None:
    ts = native_type("timestamp")
    array = pa.array([ts.to_arrow(1606390225588)], type=ts.arrow_type())
    assert ts.from_arrow(array.to_pylist()[0]) == 1606390225588
    date = native_type("date")
    assert date.from_arrow(pa.array([18592], type=pa.date32()).to_pylist()[0]) == 18592


def _sorted(cql_type: CqlType, values: list[Any]) -> list[Any]:
    return sorted(values, key=cql_type.sort_key)


def test_sort_orders() -> None:
    assert _sorted(INT, [3, -1, 2]) == [-1, 2, 3]
    assert _sorted(TEXT, ["b", "é", "a", "Z"]) == ["Z", "a", "b", "é"]
    assert _sorted(native_type("blob"), [b"\x80", b"\x01", b"\x01\x00"]) == [
        b"\x01",
        b"\x01\x00",
        b"\x80",
    ]
    assert _sorted(native_type("boolean"), [True, False]) == [False, True]
    doubles = _sorted(native_type("double"), [math.nan, 1.0, -0.0, 0.0, -math.inf])
    assert doubles[:2] == [-math.inf, -0.0] and math.copysign(1, doubles[1]) < 0
    assert math.isnan(doubles[-1])
    assert _sorted(native_type("decimal"), [decimal.Decimal("1.10"), decimal.Decimal("1.05")]) == [
        decimal.Decimal("1.05"),
        decimal.Decimal("1.10"),
    ]
    assert _sorted(native_type("date"), [1, -5]) == [-5, 1]
    inet = native_type("inet")
    addresses = [ipaddress.ip_address(a) for a in ("10.0.0.2", "::1", "10.0.0.1")]
    assert [str(a) for a in _sorted(inet, addresses)] == ["::1", "10.0.0.1", "10.0.0.2"]
    assert _sorted(ListType(INT), [(1, 2), (1,), (0, 5)]) == [(0, 5), (1,), (1, 2)]
    assert _sorted(TupleType((INT, INT)), [(1, 2), (1, None)]) == [(1, None), (1, 2)]


def test_timeuuid_order_is_time_then_signed_bytes() -> None:
    timeuuid = native_type("timeuuid")
    early = uuid.UUID("9d764f58-2f32-11eb-ac58-84f095630d16")
    later_small_lsb = uuid.UUID("9d768b58-2f32-11eb-0000-000000000000")
    same_time_neg = uuid.UUID("9d764f58-2f32-11eb-8000-000000000000")  # 0x80 = -128 signed
    same_time_pos = uuid.UUID("9d764f58-2f32-11eb-7f00-000000000000")
    ordered = _sorted(timeuuid, [later_small_lsb, same_time_pos, early, same_time_neg])
    assert ordered == [same_time_neg, early, same_time_pos, later_small_lsb]


def test_uuid_order_is_version_then_time_then_bytes() -> None:
    u = native_type("uuid")
    v4 = uuid.UUID("00000000-0000-4000-8000-000000000000")
    v1_max_time = uuid.UUID("ffffffff-ffff-1fff-8000-000000000000")
    v1_smaller_time = uuid.UUID("ffffffff-0000-1fff-0000-000000000000")
    v1_same_time_bigger_lsb = uuid.UUID("ffffffff-0000-1fff-ff00-000000000000")
    unordered = [v4, v1_max_time, v1_same_time_bigger_lsb, v1_smaller_time]
    assert _sorted(u, unordered) == [
        v1_smaller_time,
        v1_same_time_bigger_lsb,  # unsigned lsb for uuid, unlike timeuuid
        v1_max_time,
        v4,
    ]


def test_set_and_map_printing_follow_the_comparator() -> None:
    timeuuid = native_type("timeuuid")
    a = uuid.UUID("9d764f58-2f32-11eb-8000-000000000000")
    b = uuid.UUID("9d764f58-2f32-11eb-7f00-000000000000")
    assert SetType(timeuuid).to_cqlsh(frozenset({a, b})) == f"{{{a}, {b}}}"
    m = MapType(timeuuid, INT)
    assert list(m.validate({b: 1, a: 2}, "v")) == [a, b]


def _ref(text: str) -> TypeRef:
    """A tiny TypeRef reader for the tests: ``frozen<map<int, list<text>>>``."""
    text = text.strip()
    if "<" not in text:
        keyspace, _, name = text.rpartition(".")
        return TypeRef(name, keyspace=keyspace or None)
    name, inner = text.split("<", 1)
    inner = inner[:-1]
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    parts.append(inner[start:])
    if name == "vector":
        return TypeRef("vector", (_ref(parts[0]),), size=int(parts[1]))
    return TypeRef(name, tuple(_ref(p) for p in parts))


def _lookup(keyspace: str, name: str) -> UserType | None:
    return UT if (keyspace, name) == ("ks", "ut") else None


RESOLVED = [
    ("int", "int"),
    ("varchar", "text"),
    ("list<int>", "list<int>"),
    ("frozen<list<int>>", "frozen<list<int>>"),
    ("frozen<map<int, list<text>>>", "frozen<map<int, frozen<list<text>>>>"),
    ("map<int, frozen<set<text>>>", "map<int, frozen<set<text>>>"),
    ("tuple<int, list<text>>", "frozen<tuple<int, frozen<list<text>>>>"),
    ("ut", "ut"),
    ("ks.ut", "ut"),
    ("frozen<ut>", "frozen<ut>"),
    ("list<frozen<ut>>", "list<frozen<ut>>"),
    ("vector<float, 3>", "vector<float, 3>"),
]


@pytest.mark.parametrize(("written", "cql_name"), RESOLVED)
def test_resolve_type(written: str, cql_name: str) -> None:
    resolved = resolve_type(_ref(written), "ks", _lookup)
    assert resolved.cql_name == cql_name
    assert resolved == resolve_type(_ref(written), "ks", _lookup)  # equal by value
    assert hash(resolved) == hash(resolve_type(_ref(written), "ks", _lookup))


RESOLVE_ERRORS = [
    (
        "list<list<int>>",
        "Non-frozen collections are not allowed inside collections: list<list<int>>",
    ),
    (
        "map<int, set<int>>",
        "Non-frozen collections are not allowed inside collections: map<int, set<int>>",
    ),
    ("list<ut>", "Non-frozen UDTs are not allowed inside collections: list<ut>"),
    ("foo", "Unknown type ks.foo"),
    (
        "other.ut",
        "Statement on keyspace ks cannot refer to a user type in keyspace other; user types can "
        "only be used in the keyspace they are defined in",
    ),
    ("list<counter>", "Counters are not allowed inside collections: list<counter>"),
    ("set<duration>", "Durations are not allowed inside sets: set<duration>"),
    ("map<duration, int>", "Durations are not allowed as map keys: map<duration, int>"),
    (
        "frozen<int>",
        "frozen<> is only allowed on collections, tuples, and user-defined types (got int)",
    ),
    ("vector<float, 0>", "Vectors must have a dimension greater than 0"),
]


@pytest.mark.parametrize(("written", "message"), RESOLVE_ERRORS)
def test_resolve_errors(written: str, message: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        resolve_type(_ref(written), "ks", _lookup)
    assert info.value.message == message


def test_types_compare_by_value() -> None:
    assert ListType(INT) == ListType(native_type("int"))
    assert ListType(INT) != ListType(INT, frozen=True)
    set_type: CqlType = SetType(INT)
    assert ListType(INT) != set_type
    assert native_type("varchar") == TEXT
    assert native_type("timeuuid") != native_type("uuid")
    assert UT.frozen() == UserType("ks", "ut", ("a", "b"), (INT, TEXT), frozen=True)
    assert ListType(INT).multicell and not ListType(INT).frozen().multicell
    assert not TupleType((INT,)).multicell and not VectorType(INT, 2).multicell


def test_values_are_hashable_and_immutable() -> None:
    m = MapValue([(2, "b"), (1, "a")], sort_key=lambda k: k)
    assert (
        list(m) == [1, 2] and m == {1: "a", 2: "b"} and hash(m) == hash(MapValue({1: "a", 2: "b"}))
    )
    u = UdtValue(("a", "b"), {"a": 1})
    assert u["b"] is None and u == {"a": 1, "b": None}
    assert len({m, u, Duration(1, 2, 3)}) == 3
    with pytest.raises(KeyError):
        UdtValue(("a",), {"x": 1})


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"test", "Not enough bytes to read a list of 1952805748 elements"),
        (b"", "Not enough bytes to read a list's element count"),
        ((2**63 - 1).to_bytes(8, "big"), "Not enough bytes to read a list of"),
        (b"\x00\x00\x00\x01\xff\xff\xff\xff", "Null value read when not allowed"),
        ((-1).to_bytes(4, "big", signed=True), "cannot be deserialized as a list"),
    ],
)
def test_a_malformed_bound_collection_is_refused(data: bytes, message: str) -> None:
    """collections_test's testInvalidInputFor{List,Set,Map}: a count of -1 is not an empty
    list, and a short value says what is short."""
    from cqlcdc.errors import InvalidRequest
    from cqlcdc.types import ListType, native_type

    with pytest.raises(InvalidRequest, match=message):
        ListType(native_type("text")).deserialize(data)
