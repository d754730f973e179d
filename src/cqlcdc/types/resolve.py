"""Type references as written in DDL (``TypeRef``) -> type objects, with ScyllaDB's checks.

>>> from cqlcdc.cql.ast import TypeRef
>>> resolve_type(TypeRef("frozen", (TypeRef("map", (TypeRef("int"), TypeRef("text"))),)),
...              "ks", lambda ks, name: None).cql_name
'frozen<map<int, text>>'
"""

from __future__ import annotations

from collections.abc import Callable

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types.base import CqlType
from cqlcdc.types.collections import ListType, MapType, SetType, VectorType
from cqlcdc.types.dates import DateType, TimestampType, TimeType
from cqlcdc.types.native import (
    AsciiType,
    BlobType,
    BooleanType,
    DurationType,
    InetType,
    TextType,
    TimeuuidType,
    UuidType,
)
from cqlcdc.types.numeric import (
    BigintType,
    CounterType,
    DecimalType,
    DoubleType,
    FloatType,
    IntType,
    SmallintType,
    TinyintType,
    VarintType,
)
from cqlcdc.types.terms import type_ref_text
from cqlcdc.types.udt import TupleType, UserType

NATIVE_TYPES: dict[str, CqlType] = {
    "ascii": AsciiType(),
    "bigint": BigintType(),
    "blob": BlobType(),
    "boolean": BooleanType(),
    "counter": CounterType(),
    "date": DateType(),
    "decimal": DecimalType(),
    "double": DoubleType(),
    "duration": DurationType(),
    "float": FloatType(),
    "inet": InetType(),
    "int": IntType(),
    "smallint": SmallintType(),
    "text": TextType(),
    "time": TimeType(),
    "timestamp": TimestampType(),
    "timeuuid": TimeuuidType(),
    "tinyint": TinyintType(),
    "uuid": UuidType(),
    "varchar": TextType(),  # an alias: its cql_name is 'text'
    "varint": VarintType(),
}

MAX_VECTOR_DIMENSION = 16000
_ARITY = {"list": 1, "set": 1, "map": 2, "frozen": 1, "vector": 1}

UdtLookup = Callable[[str, str], UserType | None]


def native_type(name: str) -> CqlType:
    """The native type named ``name`` (case-insensitive; ``varchar`` gives text).

    Raises:
        InvalidRequest: not a native type name.
    """
    try:
        return NATIVE_TYPES[name.lower()]
    except KeyError:
        raise InvalidRequest(f"Unknown type {name}") from None


def resolve_type(ref: ast.TypeRef, keyspace: str, lookup_udt: UdtLookup) -> CqlType:
    """Resolve a written type in the statement's ``keyspace``.

    ``frozen<...>`` freezes everything inside it; a non-frozen collection or UDT inside a
    non-frozen collection is an error, as are counters in collections and tuples and
    durations in sets or map keys.

    Raises:
        InvalidRequest: with ScyllaDB's message (``Unknown type ks.foo``, ...).
    """
    return _resolve(ref, keyspace, lookup_udt, frozen=False)


def _resolve(ref: ast.TypeRef, keyspace: str, lookup: UdtLookup, frozen: bool) -> CqlType:
    name = ref.name.lower() if ref.keyspace is None else ref.name
    expected = _ARITY.get(name)
    if expected is not None and len(ref.params) != expected:
        raise InvalidRequest(f"Invalid type {type_ref_text(ref)}")
    if name == "frozen":
        inner = _resolve(ref.params[0], keyspace, lookup, frozen=True)
        freezable = ListType | SetType | MapType | TupleType | UserType | VectorType
        if not isinstance(inner, freezable):
            raise InvalidRequest(
                "frozen<> is only allowed on collections, tuples, and user-defined types "
                f"(got {type_ref_text(ref.params[0])})"
            )
        return inner.frozen()
    if ref.keyspace is None and not ref.params and name in NATIVE_TYPES:
        return NATIVE_TYPES[name]
    if name in ("list", "set", "map") and ref.keyspace is None:
        return _collection(ref, name, keyspace, lookup, frozen)
    if name == "tuple" and ref.keyspace is None and ref.params:
        components = [_resolve(p, keyspace, lookup, frozen=True) for p in ref.params]
        if any(c.is_counter for c in components):
            raise InvalidRequest("Counters are not allowed inside tuples")
        return TupleType(tuple(c.frozen() for c in components))
    if name == "vector" and ref.keyspace is None:
        if ref.size is None or ref.size <= 0:
            raise InvalidRequest("Vectors must have a dimension greater than 0")
        if ref.size > MAX_VECTOR_DIMENSION:
            raise InvalidRequest(
                f"Vectors must have a dimension less than or equal to {MAX_VECTOR_DIMENSION}"
            )
        elem = _resolve(ref.params[0], keyspace, lookup, frozen=True).frozen()
        return VectorType(elem, ref.size)
    return _user_type(ref, keyspace, lookup, frozen)


def _collection(
    ref: ast.TypeRef, kind: str, keyspace: str, lookup: UdtLookup, frozen: bool
) -> CqlType:
    text = type_ref_text(ref)
    params = [_resolve(p, keyspace, lookup, frozen=frozen) for p in ref.params]
    if params[-1].is_counter:
        raise InvalidRequest(f"Counters are not allowed inside collections: {text}")
    for param in params:
        if param.multicell:
            what = "UDTs" if isinstance(param, UserType) else "collections"
            raise InvalidRequest(f"Non-frozen {what} are not allowed inside collections: {text}")
    if kind == "list":
        return ListType(params[0], frozen=frozen)
    if isinstance(params[0], DurationType):
        where = "inside sets" if kind == "set" else "as map keys"
        raise InvalidRequest(f"Durations are not allowed {where}: {text}")
    if kind == "set":
        return SetType(params[0], frozen=frozen)
    return MapType(params[0], params[1], frozen=frozen)


def _user_type(ref: ast.TypeRef, keyspace: str, lookup: UdtLookup, frozen: bool) -> CqlType:
    if ref.keyspace and keyspace and ref.keyspace != keyspace:
        raise InvalidRequest(
            f"Statement on keyspace {keyspace} cannot refer to a user type in keyspace "
            f"{ref.keyspace}; user types can only be used in the keyspace they are defined in"
        )
    ks = ref.keyspace or keyspace
    found = lookup(ks, ref.name) if not ref.params else None
    if found is None:
        raise InvalidRequest(f"Unknown type {ks}.{ref.name}")
    return found.frozen() if frozen else found


__all__ = ["MAX_VECTOR_DIMENSION", "NATIVE_TYPES", "UdtLookup", "native_type", "resolve_type"]
