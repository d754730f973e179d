"""The structure of CQL types as the schema layer sees it: log-table column types, UDT
references and substitution, and an exact JSON form for the persisted catalog.

>>> from cqlcdc.types import ListType, native_type
>>> log_value_type(ListType(native_type("int"))).cql_name
'frozen<map<timeuuid, int>>'
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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

JsonType = dict[str, Any]


def log_value_type(t: CqlType) -> CqlType:
    """The type of a value column's image in the CDC log (``add_columns_to_cdc_log``).

    A non-frozen list becomes ``frozen<map<timeuuid, T>>`` (elements keyed by their cell
    timeuuid); every other multi-cell type is frozen; atomic types stay as they are.
    """
    if not t.multicell:
        return t
    if isinstance(t, ListType):
        return MapType(native_type("timeuuid"), t.elem, frozen=True)
    return t.frozen()


def deleted_elements_type(t: CqlType) -> CqlType | None:
    """``cdc$deleted_elements_X``'s type for a multi-cell column (None for atomic ones):
    ``frozen<set<K>>`` for map<K, V> and set<K>, ``frozen<set<timeuuid>>`` for a list,
    ``frozen<set<smallint>>`` (field indices) for a non-frozen UDT."""
    if not t.multicell:
        return None
    if isinstance(t, MapType):
        return SetType(t.key, frozen=True)
    if isinstance(t, SetType):
        return SetType(t.elem, frozen=True)
    if isinstance(t, ListType):
        return SetType(native_type("timeuuid"), frozen=True)
    return SetType(native_type("smallint"), frozen=True)


def subtypes(t: CqlType) -> tuple[CqlType, ...]:
    """The direct type parameters of ``t`` (UDT field types included)."""
    if isinstance(t, ListType | SetType):
        return (t.elem,)
    if isinstance(t, MapType):
        return (t.key, t.value)
    if isinstance(t, TupleType):
        return tuple(t.types)
    if isinstance(t, UserType):
        return tuple(t.field_types)
    if isinstance(t, VectorType):
        return (t.elem,)
    return ()


def contains(t: CqlType, pred: Callable[[CqlType], bool]) -> bool:
    """Whether ``t`` or any type nested in it satisfies ``pred``."""
    return pred(t) or any(contains(s, pred) for s in subtypes(t))


def references_udt(t: CqlType, keyspace: str, name: str) -> bool:
    """Whether the user type ``keyspace.name`` occurs in ``t`` (at any depth)."""
    return contains(
        t, lambda x: isinstance(x, UserType) and (x.keyspace, x.name) == (keyspace, name)
    )


def is_counter(t: CqlType) -> bool:
    return t.cql_name == "counter"


def references_duration(t: CqlType) -> bool:
    return contains(t, lambda x: x.cql_name == "duration")


def substitute_udt(t: CqlType, new: UserType) -> CqlType:
    """``t`` with every occurrence of ``new``'s user type replaced by ``new`` (keeping each
    occurrence's frozenness): how ALTER TYPE reaches the tables and types that use it."""
    if isinstance(t, UserType) and (t.keyspace, t.name) == (new.keyspace, new.name):
        return new if t.multicell else new.frozen()
    return rebuild(t, [substitute_udt(s, new) for s in subtypes(t)])


def rebuild(t: CqlType, params: list[CqlType]) -> CqlType:
    """``t`` with its direct type parameters replaced by ``params`` (same order)."""
    frozen = not t.multicell
    if isinstance(t, ListType):
        return ListType(params[0], frozen=frozen)
    if isinstance(t, SetType):
        return SetType(params[0], frozen=frozen)
    if isinstance(t, MapType):
        return MapType(params[0], params[1], frozen=frozen)
    if isinstance(t, TupleType):
        return TupleType(tuple(params))
    if isinstance(t, UserType):
        return UserType(t.keyspace, t.name, tuple(t.field_names), tuple(params), frozen=frozen)
    if isinstance(t, VectorType):
        return VectorType(params[0], t.size)
    return t


def type_to_json(t: CqlType) -> JsonType:
    """An exact, structural JSON form of ``t`` (UDTs carry their fields in index order)."""
    frozen = not t.multicell
    if isinstance(t, ListType | SetType | MapType):
        kind = "list" if isinstance(t, ListType) else "set" if isinstance(t, SetType) else "map"
        return {"kind": kind, "params": [type_to_json(s) for s in subtypes(t)], "frozen": frozen}
    if isinstance(t, TupleType):
        return {"kind": "tuple", "params": [type_to_json(s) for s in subtypes(t)]}
    if isinstance(t, UserType):
        return {
            "kind": "udt",
            "keyspace": t.keyspace,
            "name": t.name,
            "fields": list(t.field_names),
            "params": [type_to_json(s) for s in subtypes(t)],
            "frozen": frozen,
        }
    if isinstance(t, VectorType):
        return {"kind": "vector", "params": [type_to_json(t.elem)], "size": t.size}
    return {"kind": "native", "name": t.cql_name}


def type_from_json(data: JsonType) -> CqlType:
    """Inverse of ``type_to_json``."""
    kind = data["kind"]
    if kind == "native":
        return native_type(str(data["name"]))
    params = [type_from_json(p) for p in data["params"]]
    frozen = bool(data.get("frozen", True))
    if kind == "list":
        return ListType(params[0], frozen=frozen)
    if kind == "set":
        return SetType(params[0], frozen=frozen)
    if kind == "map":
        return MapType(params[0], params[1], frozen=frozen)
    if kind == "tuple":
        return TupleType(tuple(params))
    if kind == "udt":
        return UserType(
            str(data["keyspace"]),
            str(data["name"]),
            tuple(str(f) for f in data["fields"]),
            tuple(params),
            frozen=frozen,
        )
    if kind == "vector":
        return VectorType(params[0], int(data["size"]))
    raise ValueError(f"unknown type kind in catalog: {kind!r}")


__all__ = [
    "contains",
    "deleted_elements_type",
    "is_counter",
    "log_value_type",
    "rebuild",
    "references_duration",
    "references_udt",
    "substitute_udt",
    "subtypes",
    "type_from_json",
    "type_to_json",
]
