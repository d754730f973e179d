"""Product types: ``tuple<...>`` (always frozen) and user-defined types (frozen or multi-cell).

A UDT field's index is its position in ``field_names``; ALTER TYPE only appends or renames,
so indices are stable (non-frozen UDT cells and ``cdc$deleted_elements_X`` use them).

>>> from cqlcdc.types.numeric import IntType
>>> ut = UserType("ks", "ut", ("a", "b", "c"), (IntType(),) * 3)
>>> ut.to_cqlsh(ut.validate({"a": 0, "b": 1}, "v"))
'{a: 0, b: 1, c: null}'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import terms
from cqlcdc.types.base import CqlType, TermContext, not_empty
from cqlcdc.types.marshal import pack_values, unpack_values
from cqlcdc.types.text import maybe_quote
from cqlcdc.types.values import UdtValue


def _component_key(component: CqlType, value: Any) -> Any:
    # a null component sorts before any value (an empty cell in ScyllaDB's tuple compare)
    return (0,) if value is None else (1, component.sort_key(value))


def _unpack_components(data: bytes, count: int, what: str) -> list[bytes | None]:
    try:
        values = unpack_values(bytes(data))
    except ValueError as err:
        raise InvalidRequest(f"Cannot deserialize {what}: {err}") from None
    if len(values) > count:
        raise InvalidRequest(
            f"Value of type {what} contained too many fields (expected {count}, got {len(values)})"
        )
    return values + [None] * (count - len(values))


@dataclass(frozen=True)
class TupleType(CqlType):
    """``tuple<T1, T2, ...>``; values are Python tuples whose items may be None."""

    types: tuple[CqlType, ...]

    @property
    def cql_name(self) -> str:
        # tuples are never multi-cell, so ScyllaDB names them frozen<tuple<...>>
        return "frozen<tuple<" + ", ".join(t.cql_name for t in self.types) + ">>"

    def _assignable(self, term: ast.Term) -> bool:
        if not isinstance(term, ast.TupleLiteral):
            return len(self.types) == 1 and self.types[0].is_assignable(term)
        return len(term.items) <= len(self.types) and all(
            t.is_assignable(item) for t, item in zip(self.types, term.items)
        )

    def _parse(self, term: ast.Term, column: str, ctx: TermContext | None) -> Any:
        if not isinstance(term, ast.TupleLiteral):
            if len(self.types) == 1 and self.types[0].is_assignable(term):
                return (self.types[0].parse_literal(term, f"{column}[0]", ctx),)
            raise terms.literal_mismatch(term, column, self.cql_name)
        if len(term.items) > len(self.types):
            raise InvalidRequest(
                f"Invalid tuple literal for {column}: too many elements. Type {self.cql_name} "
                f"expects {len(self.types)} but got {len(term.items)}"
            )
        for index, (component, item) in enumerate(zip(self.types, term.items)):
            if not component.is_assignable(item):
                raise InvalidRequest(
                    f"Invalid tuple literal for {column}: component {index} is not of type "
                    f"{component.cql_name}"
                )
        values = [
            component.parse_literal(item, f"{column}[{index}]", ctx)
            for index, (component, item) in enumerate(zip(self.types, term.items))
        ]
        return tuple(values) + (None,) * (len(self.types) - len(values))

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, list | tuple) or len(value) > len(self.types):
            raise self._invalid_value(value, column)
        items = list(value) + [None] * (len(self.types) - len(value))
        return tuple(
            not_empty(t.validate(v, f"{column}[{i}]"), t)
            for i, (t, v) in enumerate(zip(self.types, items))
        )

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return "(" + ", ".join(t.format_cqlsh(v, True) for t, v in zip(self.types, value)) + ")"

    def _literal(self, value: Any) -> str:
        return "(" + ", ".join(t.to_literal(v) for t, v in zip(self.types, value)) + ")"

    def _sort_key(self, value: Any) -> Any:
        return tuple(_component_key(t, v) for t, v in zip(self.types, value))

    def _serialize(self, value: Any) -> bytes:
        return pack_values(
            [None if v is None else t.serialize(v) for t, v in zip(self.types, value)]
        )

    def _deserialize(self, data: bytes) -> Any:
        raw = _unpack_components(data, len(self.types), self.cql_name)
        return tuple(
            None if b is None else not_empty(t.deserialize(b), t) for t, b in zip(self.types, raw)
        )

    def arrow_type(self) -> pa.DataType:
        return pa.struct([(str(i), t.arrow_type()) for i, t in enumerate(self.types)])

    def _to_arrow(self, value: Any) -> Any:
        return {str(i): t.to_arrow(v) for i, (t, v) in enumerate(zip(self.types, value))}

    def _from_arrow(self, value: Any) -> Any:
        return tuple(t.from_arrow(value.get(str(i))) for i, t in enumerate(self.types))


@dataclass(frozen=True, init=False)
class UserType(CqlType):
    """A user-defined type ``keyspace.name (field type, ...)``; values are UdtValue."""

    keyspace: str
    name: str
    field_names: tuple[str, ...]
    field_types: tuple[CqlType, ...]
    is_frozen: bool

    def __init__(
        self,
        keyspace: str,
        name: str,
        field_names: Sequence[str],
        field_types: Sequence[CqlType],
        frozen: bool = False,
    ) -> None:
        if len(field_names) != len(field_types):
            raise ValueError("field_names and field_types differ in length")
        object.__setattr__(self, "keyspace", keyspace)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "field_names", tuple(field_names))
        object.__setattr__(self, "field_types", tuple(field_types))
        object.__setattr__(self, "is_frozen", frozen)

    @property
    def cql_name(self) -> str:
        name = maybe_quote(self.name)
        return f"frozen<{name}>" if self.is_frozen else name

    @property
    def multicell(self) -> bool:
        return not self.is_frozen

    def frozen(self) -> CqlType:
        return UserType(self.keyspace, self.name, self.field_names, self.field_types, True)

    def field_index(self, field: str) -> int:
        """The stable index of a field (its position).

        Raises:
            InvalidRequest: no such field.
        """
        try:
            return self.field_names.index(field)
        except ValueError:
            raise InvalidRequest(f"Unknown field {field} in type {self.name}") from None

    def field_type(self, field: str) -> CqlType:
        """The type of a field by name."""
        return self.field_types[self.field_index(field)]

    def make(self, values: Mapping[str, Any] | Sequence[Any] = ()) -> UdtValue:
        """A UdtValue of this type (by name or by position; missing fields are null)."""
        return UdtValue(self.field_names, values)

    def _assignable(self, term: ast.Term) -> bool:
        if isinstance(term, ast.TupleLiteral):  # ScyllaDB: a user type is a tuple type
            return len(term.items) <= len(self.field_types) and all(
                t.is_assignable(item) for t, item in zip(self.field_types, term.items)
            )
        if not isinstance(term, ast.UdtLiteral):
            return False
        types = dict(zip(self.field_names, self.field_types))
        return all(types[f].is_assignable(v) for f, v in term.fields if f in types)

    def _parse(self, term: ast.Term, column: str, ctx: TermContext | None) -> Any:
        if isinstance(term, ast.TupleLiteral):
            return self._parse_tuple(term, column, ctx)
        if not isinstance(term, ast.UdtLiteral):
            raise terms.literal_mismatch(term, column, self.cql_name)
        given = dict(term.fields)
        for field, field_type in zip(self.field_names, self.field_types):
            if field in given and not field_type.is_assignable(given[field]):
                raise InvalidRequest(
                    f"Invalid user type literal for {column}: field {field} is not of type "
                    f"{field_type.cql_name}"
                )
        for field in given:
            if field not in self.field_names:
                raise InvalidRequest(
                    f"Unknown field '{field}' in value of user defined type {self.name}"
                )
        return self.make(
            {
                f: t.parse_literal(given[f], f"{column}.{f}", ctx)
                for f, t in zip(self.field_names, self.field_types)
                if f in given
            }
        )

    def _parse_tuple(self, term: ast.TupleLiteral, column: str, ctx: TermContext | None) -> Any:
        """A tuple literal sets the fields in order (ScyllaDB's user types are tuple types,
        so it takes ``(1, 'a')`` where ``{f: 1, g: 'a'}`` is meant); missing ones are null."""
        if len(term.items) > len(self.field_types):
            raise InvalidRequest(
                f"Invalid tuple literal for {column}: too many elements. Type {self.cql_name} "
                f"expects {len(self.field_types)} but got {len(term.items)}"
            )
        for index, (field_type, item) in enumerate(zip(self.field_types, term.items)):
            if not field_type.is_assignable(item):
                raise InvalidRequest(
                    f"Invalid tuple literal for {column}: component {index} is not of type "
                    f"{field_type.cql_name}"
                )
        return self.make(
            [
                t.parse_literal(item, f"{column}.{f}", ctx)
                for f, t, item in zip(self.field_names, self.field_types, term.items)
            ]
        )

    def _validate(self, value: Any, column: str) -> Any:
        if isinstance(value, UdtValue):
            names = value.field_names
            if names != self.field_names[: len(names)]:
                raise self._invalid_value(value, column)
            value = value.values_tuple
        if isinstance(value, Mapping):
            unknown = [f for f in value if f not in self.field_names]
            if unknown:
                raise InvalidRequest(
                    f"Unknown field '{unknown[0]}' in value of user defined type {self.name}"
                )
            items = [value.get(f) for f in self.field_names]
        elif isinstance(value, list | tuple) and len(value) <= len(self.field_names):
            items = list(value) + [None] * (len(self.field_names) - len(value))
        else:
            raise self._invalid_value(value, column)
        return self.make(
            [
                not_empty(t.validate(v, f"{column}.{f}"), t)
                for f, t, v in zip(self.field_names, self.field_types, items)
            ]
        )

    def _values(self, value: Any) -> tuple[Any, ...]:
        if isinstance(value, UdtValue):
            return value.values_tuple + (None,) * (len(self.field_names) - len(value))
        return tuple(value.get(f) for f in self.field_names)

    def _cqlsh(self, value: Any, nested: bool) -> str:
        parts = (
            f"{maybe_quote(f)}: {t.format_cqlsh(v, True)}"
            for f, t, v in zip(self.field_names, self.field_types, self._values(value))
        )
        return "{" + ", ".join(parts) + "}"

    def _literal(self, value: Any) -> str:
        parts = (
            f"{maybe_quote(f)}: {t.to_literal(v)}"
            for f, t, v in zip(self.field_names, self.field_types, self._values(value))
        )
        return "{" + ", ".join(parts) + "}"

    def _sort_key(self, value: Any) -> Any:
        return tuple(_component_key(t, v) for t, v in zip(self.field_types, self._values(value)))

    def _serialize(self, value: Any) -> bytes:
        return pack_values(
            [
                None if v is None else t.serialize(v)
                for t, v in zip(self.field_types, self._values(value))
            ]
        )

    def _deserialize(self, data: bytes) -> Any:
        raw = _unpack_components(data, len(self.field_types), self.name)
        return self.make(
            [
                None if b is None else not_empty(t.deserialize(b), t)
                for t, b in zip(self.field_types, raw)
            ]
        )

    def arrow_type(self) -> pa.DataType:
        return pa.struct([(f, t.arrow_type()) for f, t in zip(self.field_names, self.field_types)])

    def _to_arrow(self, value: Any) -> Any:
        return {
            f: t.to_arrow(v)
            for f, t, v in zip(self.field_names, self.field_types, self._values(value))
        }

    def _from_arrow(self, value: Any) -> Any:
        return self.make(
            [t.from_arrow(value.get(f)) for f, t in zip(self.field_names, self.field_types)]
        )


__all__ = ["TupleType", "UserType"]
