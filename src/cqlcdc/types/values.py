"""Python values of the CQL types that have no natural builtin: durations, maps and UDT values.

All are immutable and hashable, so they can be set elements, map keys and dict keys.

>>> MapValue([(1, "a"), (2, "b")])[2]
'b'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


class EmptyValue:
    """The *empty* value: a value of zero bytes, of a type whose values otherwise have some.

    CQL lets every type but the collections, tuples, UDTs and ``duration`` hold it
    (Cassandra's ``EMPTY_BYTE_BUFFER``; ScyllaDB's ``validate_visitor`` accepts 0 bytes for
    them): gocql sends ``time.Time{}`` so, ``blobAsInt(0x)`` writes one. It is neither null
    (the cell exists, ``writetime()`` has a value) nor any ordinary value; it sorts before
    every value of its type. For text, ascii and blob the empty value is simply ``''`` or
    ``b''``, so it never appears as ``EMPTY`` there. There is one instance, :data:`EMPTY`.
    """

    __slots__ = ()
    _instance: EmptyValue | None = None

    def __new__(cls) -> EmptyValue:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "EMPTY"

    def __reduce__(self) -> str:
        return "EMPTY"  # pickles as the module's singleton


EMPTY = EmptyValue()


class EmptyKey:
    """The sort key of :data:`EMPTY`: before every other key (ScyllaDB's comparators put an
    empty value first, ``with_empty_checks``), equal only to itself."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return not isinstance(other, EmptyKey)

    def __le__(self, other: object) -> bool:
        return True

    def __gt__(self, other: object) -> bool:
        return False

    def __ge__(self, other: object) -> bool:
        return isinstance(other, EmptyKey)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EmptyKey)

    def __hash__(self) -> int:
        return 0x0E


EMPTY_KEY = EmptyKey()


@dataclass(frozen=True, slots=True)
class Duration:
    """A CQL ``duration``: months, days and nanoseconds, kept apart because they do not convert.

    A month is not a fixed number of days and a day is not a fixed number of nanoseconds
    (leap seconds, DST), which is why CQL stores three counters. All three share one sign.
    """

    months: int = 0
    days: int = 0
    nanoseconds: int = 0


class MapValue(Mapping[Any, Any]):
    """An immutable, hashable mapping whose iteration order is fixed at construction.

    The order is the CQL comparator order of the keys when ``sort_key`` is given (this is how
    ``MapType`` builds it), otherwise the order of ``items``. Equality ignores order, like
    ``dict``; a later duplicate key replaces the earlier value.
    """

    __slots__ = ("_data", "_hash")

    def __init__(
        self,
        items: Mapping[Any, Any] | Iterable[tuple[Any, Any]] = (),
        sort_key: Callable[[Any], Any] | None = None,
    ) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        data: dict[Any, Any] = {}
        for key, value in pairs:
            data[key] = value
        if sort_key is not None:
            data = {k: data[k] for k in sorted(data, key=sort_key)}
        self._data = data
        self._hash: int | None = None

    def __getitem__(self, key: Any) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"MapValue({list(self._data.items())!r})"


class UdtValue(Mapping[str, Any]):
    """The value of a user-defined type: field name -> value in the type's field order.

    Every field of the type is present; fields not given are ``None`` (CQL null), which is
    also how cqlsh shows them (``{a: 0, b: 1, c: null}``).
    """

    __slots__ = ("_fields", "_values")

    def __init__(
        self, field_names: Sequence[str], values: Mapping[str, Any] | Sequence[Any] = ()
    ) -> None:
        names = tuple(field_names)
        if isinstance(values, Mapping):
            unknown = [k for k in values if k not in names]
            if unknown:
                raise KeyError(f"Unknown field {unknown[0]!r}; fields are {names}")
            vals = tuple(values.get(name) for name in names)
        else:
            given = tuple(values)
            if len(given) > len(names):
                raise ValueError(f"{len(given)} values for {len(names)} fields")
            vals = given + (None,) * (len(names) - len(given))
        self._fields = names
        self._values = vals

    @property
    def field_names(self) -> tuple[str, ...]:
        """The field names, in the type's field order."""
        return self._fields

    @property
    def values_tuple(self) -> tuple[Any, ...]:
        """The field values by field index (``None`` for null)."""
        return self._values

    def __getitem__(self, key: str) -> Any:
        try:
            return self._values[self._fields.index(key)]
        except ValueError:
            raise KeyError(key) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def __hash__(self) -> int:
        return hash((self._fields, self._values))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, UdtValue):
            return self._fields == other._fields and self._values == other._values
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values))
        return f"UdtValue({inner})"


__all__ = ["EMPTY", "EMPTY_KEY", "Duration", "EmptyKey", "EmptyValue", "MapValue", "UdtValue"]
