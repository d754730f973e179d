"""Collection types: ``list``, ``set``, ``map`` (frozen or multi-cell) and ``vector`` (atomic).

Sets print and serialize in the element comparator order, maps in key order; literals reject
null elements as ScyllaDB does (``null is not supported inside collections``).

>>> from cqlcdc.types.numeric import IntType
>>> SetType(IntType()).to_cqlsh(frozenset({2, 1}))
'{1, 2}'
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import terms
from cqlcdc.types.base import CqlType, TermContext, not_empty
from cqlcdc.types.marshal import int32_pack, int32_unpack, uvint_pack, uvint_unpack
from cqlcdc.types.values import EMPTY, MapValue

NULL_IN_COLLECTION = "null is not supported inside collections"


def _pack_elements(elements: Iterable[bytes], count: int) -> bytes:
    out = bytearray(int32_pack(count))
    for element in elements:
        out += int32_pack(len(element))
        out += element
    return bytes(out)


def _unpack_elements(data: bytes, per_entry: int, kind: str) -> list[bytes]:
    """``_unpack_nullable`` where no element may be null."""
    return [v for v in _unpack_nullable(data, per_entry, kind, nulls=False) if v is not None]


def _unpack_nullable(data: bytes, per_entry: int, kind: str, nulls: bool) -> list[bytes | None]:
    """Read an int32 count then count * per_entry int32-length-prefixed values (the
    messages say what was short, as ScyllaDB's ``Not enough bytes to read ...``); a null
    element (length -1) is None where ``nulls`` allows it."""
    if len(data) < 4:
        raise InvalidRequest(f"Not enough bytes to read a {kind}'s element count")
    count = int32_unpack(data)
    if count < 0:
        raise InvalidRequest(f"The data cannot be deserialized as a {kind}: element count {count}")
    if 4 * count * per_entry > len(data) - 4:  # not even their sizes fit
        raise InvalidRequest(f"Not enough bytes to read a {kind} of {count} elements")
    offset = 4
    values: list[bytes | None] = []
    for _ in range(count * per_entry):
        if offset + 4 > len(data):
            raise InvalidRequest(f"Not enough bytes to read a {kind} element's size")
        length = int32_unpack(data, offset)
        offset += 4
        if length < 0 and nulls:
            values.append(None)
            continue
        if length < 0:
            raise InvalidRequest(f"Null value read when not allowed in a {kind}")
        if offset + length > len(data):
            raise InvalidRequest(f"Not enough bytes to read a {kind} element")
        values.append(data[offset : offset + length])
        offset += length
    if offset != len(data):
        raise InvalidRequest(f"Cannot deserialize a {kind}: bytes remaining")
    return values


def _not_null(value: Any) -> Any:
    if value is None:
        raise InvalidRequest(NULL_IN_COLLECTION)
    if value is EMPTY:
        raise InvalidRequest("Empty value inside a collection is not supported")
    return value


def _sequence(value: Any) -> bool:
    return isinstance(value, list | tuple)


class _Bracketed:
    """Text and order of a value written ``[a, b, ...]`` (lists and vectors)."""

    elem: CqlType

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return "[" + ", ".join(self.elem.format_cqlsh(v, nested=True) for v in value) + "]"

    def _literal(self, value: Any) -> str:
        return "[" + ", ".join(self.elem.to_literal(v) for v in value) + "]"

    def _sort_key(self, value: Any) -> Any:
        return tuple(self.elem.sort_key(v) for v in value)


class _Collection(CqlType):
    """Shared behaviour of list, set and map: the frozen flag and the cql_name."""

    kind: str
    is_frozen: bool

    @property
    def multicell(self) -> bool:
        return not self.is_frozen

    @abstractmethod
    def _params(self) -> str:
        """The type parameters as written inside ``<...>``."""

    @property
    def cql_name(self) -> str:
        inner = f"{self.kind}<{self._params()}>"
        return f"frozen<{inner}>" if self.is_frozen else inner

    def _element_error(self, what: str, term: ast.Term, column: str, elem: CqlType) -> Exception:
        return InvalidRequest(
            f"Invalid {self.kind} literal for {column}: {what} {terms.term_text(term)} "
            f"is not of type {elem.cql_name}"
        )


@dataclass(frozen=True, init=False)
class _OneElementType(_Collection):
    """What list and set share: one element type, frozen or not."""

    elem: CqlType
    is_frozen: bool

    def __init__(self, elem: CqlType, frozen: bool = False) -> None:
        object.__setattr__(self, "elem", elem)
        object.__setattr__(self, "is_frozen", frozen)

    @property
    def element(self) -> CqlType:
        """The element type (an alias of ``elem``)."""
        return self.elem

    def _params(self) -> str:
        return self.elem.cql_name

    def frozen(self) -> CqlType:
        return type(self)(self.elem, frozen=True)


@dataclass(frozen=True, init=False)
class ListType(_Bracketed, _OneElementType):
    """``list<T>``; values are tuples. Non-frozen lists are multi-cell (timeuuid-keyed cells)."""

    kind = "list"

    def _assignable(self, term: ast.Term) -> bool:
        return isinstance(term, ast.ListLiteral) and all(
            self.elem.is_assignable(t) for t in term.items
        )

    def _parse(self, term: ast.Term, column: str, ctx: TermContext | None) -> Any:
        if not isinstance(term, ast.ListLiteral):
            raise terms.literal_mismatch(term, column, self.cql_name)
        for item in term.items:
            if not self.elem.is_assignable(item):
                raise self._element_error("value", item, column, self.elem)
        if self.multicell and not term.items:
            return None
        spec = f"value({column})"
        return tuple(_not_null(self.elem.parse_literal(t, spec, ctx)) for t in term.items)

    def _validate(self, value: Any, column: str) -> Any:
        if not _sequence(value):
            raise self._invalid_value(value, column)
        return tuple(_not_null(self.elem.validate(v, f"value({column})")) for v in value)

    def _serialize(self, value: Any) -> bytes:
        return _pack_elements((self.elem.serialize(v) for v in value), len(value))

    def _deserialize(self, data: bytes) -> Any:
        elem = self.elem
        return tuple(
            not_empty(elem.deserialize(v), elem) for v in _unpack_elements(bytes(data), 1, "list")
        )

    def arrow_type(self) -> pa.DataType:
        return pa.list_(self.elem.arrow_type())

    def _to_arrow(self, value: Any) -> Any:
        return [self.elem.to_arrow(v) for v in value]

    def _from_arrow(self, value: Any) -> Any:
        return tuple(self.elem.from_arrow(v) for v in value)


@dataclass(frozen=True, init=False)
class InValuesType(ListType):
    """The values bound to ``IF v IN ?``: a frozen list whose elements may be null, as
    ScyllaDB takes them (``IF v IN ?`` with ``[1, null, 3]`` holds for v = 3, and for a
    null v); its name on the wire is the list's."""

    def __init__(self, elem: CqlType) -> None:
        super().__init__(elem, frozen=True)

    def _validate(self, value: Any, column: str) -> Any:
        if not _sequence(value):
            raise self._invalid_value(value, column)
        spec = f"value({column})"
        return tuple(None if v is None else self.elem.validate(v, spec) for v in value)

    def _serialize(self, value: Any) -> bytes:
        raise TypeError("the values of an IN condition are never sent back")

    def _deserialize(self, data: bytes) -> Any:
        """The values; a zero-byte element is the type's empty value (``EMPTY``), which
        matches only a column holding the empty value, as in ScyllaDB, or, for a type
        without one (duration, counter), is left out: it can make no ``IN`` hold and no
        ``NOT IN`` fail (drivers send it for a None element, as the python driver does)."""
        out: list[Any] = []
        for v in _unpack_nullable(bytes(data), 1, "list", nulls=True):
            if v is None:
                out.append(None)
                continue
            try:
                out.append(self.elem.deserialize(v))
            except InvalidRequest:
                if v:
                    raise
        return tuple(out)


@dataclass(frozen=True, init=False)
class SetType(_OneElementType):
    """``set<T>``; values are frozensets, ordered by the element comparator when shown."""

    kind = "set"

    def ordered(self, value: Iterable[Any]) -> list[Any]:
        """The elements in CQL comparator order."""
        return sorted(value, key=self.elem.sort_key)

    def _assignable(self, term: ast.Term) -> bool:
        if isinstance(term, ast.MapLiteral):
            return not term.entries
        return isinstance(term, ast.SetLiteral) and all(
            self.elem.is_assignable(t) for t in term.items
        )

    def _parse(self, term: ast.Term, column: str, ctx: TermContext | None) -> Any:
        if isinstance(term, ast.MapLiteral) and not term.entries:
            items: tuple[ast.Term, ...] = ()
        elif isinstance(term, ast.SetLiteral):
            items = term.items
        else:
            raise terms.literal_mismatch(term, column, self.cql_name)
        for item in items:
            if not self.elem.is_assignable(item):
                raise self._element_error("value", item, column, self.elem)
        if self.multicell and not items:
            return None
        spec = f"value({column})"
        return frozenset(_not_null(self.elem.parse_literal(t, spec, ctx)) for t in items)

    def _validate(self, value: Any, column: str) -> Any:
        if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
            raise self._invalid_value(value, column)
        return frozenset(_not_null(self.elem.validate(v, f"value({column})")) for v in value)

    def _cqlsh(self, value: Any, nested: bool) -> str:
        inner = ", ".join(self.elem.format_cqlsh(v, nested=True) for v in self.ordered(value))
        return "{" + inner + "}"

    def _literal(self, value: Any) -> str:
        return "{" + ", ".join(self.elem.to_literal(v) for v in self.ordered(value)) + "}"

    def _sort_key(self, value: Any) -> Any:
        return tuple(self.elem.sort_key(v) for v in self.ordered(value))

    def _serialize(self, value: Any) -> bytes:
        return _pack_elements((self.elem.serialize(v) for v in self.ordered(value)), len(value))

    def _deserialize(self, data: bytes) -> Any:
        elem = self.elem
        return frozenset(
            not_empty(elem.deserialize(v), elem) for v in _unpack_elements(bytes(data), 1, "set")
        )

    def arrow_type(self) -> pa.DataType:
        return pa.list_(self.elem.arrow_type())

    def _to_arrow(self, value: Any) -> Any:
        return [self.elem.to_arrow(v) for v in self.ordered(value)]

    def _from_arrow(self, value: Any) -> Any:
        return frozenset(self.elem.from_arrow(v) for v in value)


@dataclass(frozen=True, init=False)
class MapType(_Collection):
    """``map<K, V>``; values are MapValue in key comparator order."""

    key: CqlType
    value: CqlType
    is_frozen: bool
    kind = "map"

    def __init__(self, key: CqlType, value: CqlType, frozen: bool = False) -> None:
        object.__setattr__(self, "key", key)
        object.__setattr__(self, "value", value)
        object.__setattr__(self, "is_frozen", frozen)

    def _params(self) -> str:
        return f"{self.key.cql_name}, {self.value.cql_name}"

    def frozen(self) -> CqlType:
        return MapType(self.key, self.value, frozen=True)

    def make(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> MapValue:
        """A MapValue of this type's key order."""
        return MapValue(items, sort_key=self.key.sort_key)

    def _assignable(self, term: ast.Term) -> bool:
        return isinstance(term, ast.MapLiteral) and all(
            self.key.is_assignable(k) and self.value.is_assignable(v) for k, v in term.entries
        )

    def _parse(self, term: ast.Term, column: str, ctx: TermContext | None) -> Any:
        if not isinstance(term, ast.MapLiteral):
            raise terms.literal_mismatch(term, column, self.cql_name)
        for k, v in term.entries:
            if not self.key.is_assignable(k):
                raise self._element_error("key", k, column, self.key)
            if not self.value.is_assignable(v):
                raise self._element_error("value", v, column, self.value)
        if self.multicell and not term.entries:
            return None
        data: dict[Any, Any] = {}
        for k, v in term.entries:
            key = _not_null(self.key.parse_literal(k, f"key({column})", ctx))
            val = _not_null(self.value.parse_literal(v, f"value({column})", ctx))
            data.setdefault(key, val)  # ScyllaDB keeps the first of duplicate keys
        return self.make(data)

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, Mapping):
            raise self._invalid_value(value, column)
        return self.make(
            (
                _not_null(self.key.validate(k, f"key({column})")),
                _not_null(self.value.validate(v, f"value({column})")),
            )
            for k, v in value.items()
        )

    def ordered(self, value: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
        """The entries in key comparator order."""
        return sorted(value.items(), key=lambda kv: self.key.sort_key(kv[0]))

    def _cqlsh(self, value: Any, nested: bool) -> str:
        inner = ", ".join(
            f"{self.key.format_cqlsh(k, nested=True)}: {self.value.format_cqlsh(v, nested=True)}"
            for k, v in self.ordered(value)
        )
        return "{" + inner + "}"

    def _literal(self, value: Any) -> str:
        inner = ", ".join(
            f"{self.key.to_literal(k)}: {self.value.to_literal(v)}" for k, v in self.ordered(value)
        )
        return "{" + inner + "}"

    def _sort_key(self, value: Any) -> Any:
        return tuple((self.key.sort_key(k), self.value.sort_key(v)) for k, v in self.ordered(value))

    def _serialize(self, value: Any) -> bytes:
        parts: list[bytes] = []
        for k, v in self.ordered(value):
            parts += (self.key.serialize(k), self.value.serialize(v))
        return _pack_elements(parts, len(value))

    def _deserialize(self, data: bytes) -> Any:
        raw = _unpack_elements(bytes(data), 2, "map")
        return self.make(
            (
                not_empty(self.key.deserialize(raw[i]), self.key),
                not_empty(self.value.deserialize(raw[i + 1]), self.value),
            )
            for i in range(0, len(raw), 2)
        )

    def arrow_type(self) -> pa.DataType:
        return pa.map_(self.key.arrow_type(), self.value.arrow_type())

    def _to_arrow(self, value: Any) -> Any:
        return [(self.key.to_arrow(k), self.value.to_arrow(v)) for k, v in self.ordered(value)]

    def _from_arrow(self, value: Any) -> Any:
        pairs = value.items() if isinstance(value, Mapping) else value
        return self.make((self.key.from_arrow(k), self.value.from_arrow(v)) for k, v in pairs)


@dataclass(frozen=True)
class VectorType(_Bracketed, CqlType):
    """``vector<T, n>``: exactly ``n`` non-null elements; always frozen (atomic)."""

    elem: CqlType
    size: int

    @property
    def cql_name(self) -> str:
        return f"vector<{self.elem.cql_name}, {self.size}>"

    def _assignable(self, term: ast.Term) -> bool:
        return isinstance(term, ast.ListLiteral) and all(
            self.elem.is_assignable(t) for t in term.items
        )

    def _parse(self, term: ast.Term, column: str, ctx: TermContext | None) -> Any:
        if not isinstance(term, ast.ListLiteral):
            raise terms.literal_mismatch(term, column, self.cql_name)
        if len(term.items) != self.size:
            raise InvalidRequest(
                f"Invalid vector literal for {column}: type {self.cql_name} expects "
                f"{self.size} elements but got {len(term.items)}"
            )
        for item in term.items:
            if not self.elem.is_assignable(item):
                raise InvalidRequest(
                    f"Invalid vector literal for {column}: value {terms.term_text(item)} "
                    f"is not of type {self.elem.cql_name}"
                )
        spec = f"value({column})"
        return tuple(_not_null(self.elem.parse_literal(t, spec, ctx)) for t in term.items)

    def _validate(self, value: Any, column: str) -> Any:
        if not _sequence(value):
            raise self._invalid_value(value, column)
        if len(value) != self.size:
            raise InvalidRequest(
                f"Invalid vector value for {column}: type {self.cql_name} expects "
                f"{self.size} elements but got {len(value)}"
            )
        return tuple(_not_null(self.elem.validate(v, f"value({column})")) for v in value)

    def _serialize(self, value: Any) -> bytes:
        # fixed-size elements are concatenated, others carry an unsigned vint length
        out = bytearray()
        for v in value:
            data = self.elem.serialize(v)
            if self.elem.fixed_size is None:
                out += uvint_pack(len(data))
            out += data
        return bytes(out)

    def _deserialize(self, data: bytes) -> Any:
        data = bytes(data)
        values: list[Any] = []
        offset = 0
        for _ in range(self.size):
            size = self.elem.fixed_size
            if size is None:
                size, offset = uvint_unpack(data, offset)
            if offset + size > len(data):
                raise InvalidRequest(f"Cannot deserialize {self.cql_name}: truncated")
            values.append(not_empty(self.elem.deserialize(data[offset : offset + size]), self.elem))
            offset += size
        if offset != len(data):
            raise InvalidRequest(f"Cannot deserialize {self.cql_name}: bytes remaining")
        return tuple(values)

    def arrow_type(self) -> pa.DataType:
        return pa.list_(self.elem.arrow_type())

    def _to_arrow(self, value: Any) -> Any:
        return [self.elem.to_arrow(v) for v in value]

    def _from_arrow(self, value: Any) -> Any:
        return tuple(self.elem.from_arrow(v) for v in value)


__all__ = ["NULL_IN_COLLECTION", "InValuesType", "ListType", "MapType", "SetType", "VectorType"]
