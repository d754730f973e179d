"""The empty value (``types.values.EMPTY``): 0 bytes of a type whose values otherwise have
some, which ScyllaDB accepts for every native type but text, ascii, blob (where it is an
ordinary value), duration and counter (types.cc ``validate_visitor``)."""

from __future__ import annotations

import pickle
from decimal import Decimal
from ipaddress import ip_address
from uuid import UUID

import pytest

from cqlcdc.cql.ast import Constant, FunctionCall
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import ListType, TupleType, native_type
from cqlcdc.types.values import EMPTY, EMPTY_KEY

EMPTIABLE = (
    "bigint",
    "boolean",
    "date",
    "decimal",
    "double",
    "float",
    "inet",
    "int",
    "smallint",
    "time",
    "timestamp",
    "timeuuid",
    "tinyint",
    "uuid",
    "varint",
)
SAMPLES = {
    "bigint": 5,
    "boolean": False,
    "date": -3,
    "decimal": Decimal("-1e100"),
    "double": float("-inf"),
    "float": -1.5,
    "inet": ip_address("0.0.0.0"),
    "int": -(2**31),
    "smallint": -1,
    "time": 0,
    "timestamp": -(2**62),
    "timeuuid": UUID("00000000-0000-1000-8080-808080808080"),
    "tinyint": -128,
    "uuid": UUID(int=0),
    "varint": -(10**30),
}


@pytest.mark.parametrize("name", EMPTIABLE)
def test_no_bytes_are_the_empty_value_and_back(name: str) -> None:
    t = native_type(name)
    assert t.deserialize(b"") is EMPTY
    assert t.serialize(EMPTY) == b""
    assert t.validate(EMPTY, "v") is EMPTY
    assert t.to_cqlsh(EMPTY) == ""


@pytest.mark.parametrize("name", ["text", "ascii", "blob"])
def test_string_types_have_their_own_empty_value(name: str) -> None:
    t = native_type(name)
    assert t.deserialize(b"") in ("", b"")
    with pytest.raises(InvalidRequest, match=f"Invalid empty value for v of type {name}"):
        t.validate(EMPTY, "v")


@pytest.mark.parametrize(("name", "error"), [("duration", "3 bytes"), ("counter", "8 bytes")])
def test_duration_and_counter_refuse_it(name: str, error: str) -> None:
    with pytest.raises(InvalidRequest, match=error):
        native_type(name).deserialize(b"")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_it_sorts_before_every_value(name: str) -> None:
    t = native_type(name)
    low = SAMPLES[name]
    assert t.sort_key(EMPTY) < t.sort_key(low)
    assert not t.sort_key(low) < t.sort_key(EMPTY)
    assert sorted([low, EMPTY], key=t.sort_key) == [EMPTY, low]
    assert t.sort_key(EMPTY) == t.sort_key(EMPTY) and t.sort_key(EMPTY) != t.sort_key(low)
    # inside a key tuple too (clustering keys are compared as tuples of sort keys)
    assert (1, t.sort_key(EMPTY)) < (1, t.sort_key(low)) < (2, EMPTY_KEY)


def test_it_is_one_value_across_pickling() -> None:
    assert pickle.loads(pickle.dumps(EMPTY)) is EMPTY
    assert pickle.loads(pickle.dumps(EMPTY_KEY)) == EMPTY_KEY


def test_blob_as_type_of_no_bytes_makes_it_and_its_literal_reads_back() -> None:
    t = native_type("int")
    call = FunctionCall("blobasint", (Constant("hex", "0x"),))
    assert t.parse_literal(call, "v") is EMPTY
    assert t.to_literal(EMPTY) == "blobAsint(0x)"
    with pytest.raises(InvalidRequest, match="not a valid binary representation"):
        t.parse_literal(FunctionCall("blobasint", (Constant("hex", "0x01"),)), "v")


def test_it_has_no_arrow_form() -> None:
    with pytest.raises(InvalidRequest, match="no Arrow form"):
        native_type("int").to_arrow(EMPTY)


def test_it_is_refused_inside_collections_and_tuples() -> None:
    lst = ListType(native_type("int"), frozen=True)
    with pytest.raises(InvalidRequest, match="Empty value of type int inside a collection"):
        lst.deserialize(b"\x00\x00\x00\x01\x00\x00\x00\x00")
    with pytest.raises(InvalidRequest, match="Empty value inside a collection"):
        lst.validate([EMPTY], "l")
    tup = TupleType((native_type("int"), native_type("text")))
    with pytest.raises(InvalidRequest, match="Empty value of type int inside"):
        tup.deserialize(b"\x00\x00\x00\x00" + b"\x00\x00\x00\x01a")
    with pytest.raises(InvalidRequest, match="Empty value of type int inside"):
        tup.validate((EMPTY, "a"), "t")
