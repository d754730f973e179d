"""The contract every CQL type class fulfils (one small class per type, as in the python driver).

Python values of CQL types (``None`` is CQL null everywhere, handled once here):

| CQL                                   | Python value                                           |
|---------------------------------------|--------------------------------------------------------|
| ascii, text, varchar                  | str                                                    |
| tinyint, smallint, int, bigint,       | int                                                    |
| varint, counter                       |                                                        |
| boolean                               | bool                                                   |
| float, double                         | float                                                  |
| decimal                               | decimal.Decimal                                        |
| blob                                  | bytes                                                  |
| uuid, timeuuid                        | uuid.UUID                                              |
| inet                                  | ipaddress.IPv4Address / IPv6Address                    |
| date                                  | int: days since 1970-01-01 (signed)                    |
| time                                  | int: nanoseconds since midnight                        |
| timestamp                             | int: milliseconds since the epoch (signed)             |
| duration                              | cqlcdc.types.values.Duration(months, days, nanoseconds)|
| list<T>                               | tuple                                                  |
| set<T>                                | frozenset                                              |
| map<K, V>                             | cqlcdc.types.values.MapValue (immutable, hashable)     |
| tuple<...>                            | tuple (items may be None)                              |
| user type                             | cqlcdc.types.values.UdtValue (immutable, hashable)     |

Every value is hashable, so any value can be a set element or a map key.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import terms
from cqlcdc.types.values import EMPTY, EMPTY_KEY

if TYPE_CHECKING:
    import uuid

    import pyarrow as pa


class TermContext(Protocol):
    """What a literal may need from the session: its clock and id generators.

    Used for function terms such as ``now()``, ``uuid()``, ``currenttimestamp()``.
    """

    @property
    def now_us(self) -> int: ...

    def new_timeuuid(self) -> uuid.UUID: ...

    def new_uuid(self) -> uuid.UUID: ...


# Lossless numeric widenings ScyllaDB applies to function results and casts (prepare_expr.cc)
# (and ascii into text: every ascii value is a text value, as ScyllaDB's casts allow)
_WIDENINGS = (
    ("tinyint", "smallint", "int", "bigint", "varint"),
    ("float", "double"),
    ("ascii", "text"),
)


def _widenable(source: str, target: str) -> bool:
    return any(
        source in chain and target in chain and chain.index(source) <= chain.index(target)
        for chain in _WIDENINGS
    )


class TermEvaluation(Protocol):
    """Function calls and casts in a literal (``functions.FunctionTerms``).

    They need the concrete types by name, so they live above them; ``cqlcdc.types``
    installs the one evaluation on import (``install_term_evaluation``), before any type
    can be used, and this module never imports them.
    """

    def assignable(self, ctype: CqlType, call: ast.FunctionCall) -> bool: ...

    def function(
        self, ctype: CqlType, call: ast.FunctionCall, column: str, ctx: TermContext | None
    ) -> Any: ...

    def cast(
        self, ctype: CqlType, term: ast.TypeCast, column: str, ctx: TermContext | None
    ) -> Any: ...


_EVALUATION: list[TermEvaluation] = []


def install_term_evaluation(evaluation: TermEvaluation) -> None:
    """Make ``evaluation`` the one ``CqlType.parse_literal`` gives function calls and casts."""
    _EVALUATION[:] = [evaluation]


def term_evaluation() -> TermEvaluation:
    """The installed evaluation of function calls and casts (``cqlcdc.types`` installs it)."""
    if not _EVALUATION:
        raise RuntimeError("no term evaluation installed: import cqlcdc.types")
    return _EVALUATION[0]


class CqlType(ABC):
    """A CQL type. Instances are immutable and compare equal when the types are equal.

    Subclasses implement the ``_``-prefixed hooks; null, bind markers, function terms and
    casts are handled once here, as the python driver handles null/empty in its base class.
    """

    # True when 0 bytes are this type's empty value (``EMPTY``, docs/types.md "The empty
    # value"): the types ScyllaDB's validate_visitor lets be empty and whose values are not
    # byte strings anyway (text, ascii and blob have their own empty value)
    empty_allowed: ClassVar[bool] = False

    # True when ``to_arrow`` is the identity (pyarrow takes the Python value as it is), so a
    # column of such values converts without a call per value
    arrow_as_is: ClassVar[bool] = False

    @property
    @abstractmethod
    def cql_name(self) -> str:
        """The name as DESCRIBE prints it, e.g. ``int``, ``frozen<map<int, text>>``, ``ut``."""

    @property
    def multicell(self) -> bool:
        """True for non-frozen list/set/map/UDT: stored as one cell per element or field."""
        return False

    def frozen(self) -> CqlType:
        """The frozen version of this type (itself for atomic types)."""
        return self

    @property
    def fixed_size(self) -> int | None:
        """The serialized size when every value has the same size (vector elements)."""
        return None

    @property
    def is_counter(self) -> bool:
        """True only for ``counter`` (not allowed inside collections or tuples)."""
        return False

    def __str__(self) -> str:
        return self.cql_name

    # -- literals ------------------------------------------------------------------------

    def parse_literal(self, term: ast.Term, column: str, ctx: TermContext | None = None) -> Any:
        """Interpret a statement literal as a value of this type; None for ``null``.

        Non-frozen collections and UDTs give None for an empty literal (``[]``, ``{}``): as
        in ScyllaDB, an empty multi-cell value does not exist.

        Raises:
            InvalidRequest: the literal does not fit the type; the message names ``column``
                and the type (ScyllaDB's wording, e.g.
                ``Invalid STRING constant (foo) for "v" of type int``).
        """
        if isinstance(term, ast.Constant) and term.kind == "null":
            if self.is_counter:
                raise InvalidRequest("Invalid null value for counter increment/decrement")
            return None
        if isinstance(term, ast.BindMarker):
            bound = getattr(ctx, "bound_value", None)
            if bound is None:
                raise terms.bind_marker_error(term, column)
            return self.validate(bound(term), column)
        if isinstance(term, ast.FunctionCall):
            return term_evaluation().function(self, term, column, ctx)
        if isinstance(term, ast.TypeCast):
            return term_evaluation().cast(self, term, column, ctx)
        return self._parse(term, column, ctx)

    def is_assignable(self, term: ast.Term) -> bool:
        """Whether the term's shape can be a value of this type (ScyllaDB's test_assignment).

        Collections check their elements with this before parsing them, to report
        ``Invalid list literal for v: value 'a' is not of type int``.
        """
        if isinstance(term, ast.Constant) and term.kind == "null":
            return not self.is_counter
        if isinstance(term, ast.BindMarker):
            return True
        if isinstance(term, ast.FunctionCall):
            return term_evaluation().assignable(self, term)
        if isinstance(term, ast.TypeCast):
            return True
        return self._assignable(term)

    @abstractmethod
    def _parse(self, term: ast.Term, column: str, ctx: TermContext | None) -> Any:
        """Parse a literal (never null, a bind marker, a function call or a cast)."""

    @abstractmethod
    def _assignable(self, term: ast.Term) -> bool:
        """``is_assignable`` for literals."""

    def _accepts_type_name(self, type_name: str) -> bool:
        """Whether a value of the named type may be assigned to this type."""
        if type_name == self.cql_name:
            return True
        if type_name == "timeuuid" and self.cql_name == "uuid":
            return True
        return _widenable(type_name, self.cql_name)

    # -- values --------------------------------------------------------------------------

    def validate(self, value: Any, column: str) -> Any:
        """Check (and normalise) a Python value bound to a prepared statement.

        Accepts the value table's types plus convenient equivalents (any sequence for a
        list, any mapping for a map, ``datetime`` for a timestamp, ...) and returns the
        canonical Python value. ``None`` is null.

        Raises:
            InvalidRequest: the value is not of this type or out of its range.
        """
        if value is None:
            return None
        if value is EMPTY:
            if not self.empty_allowed:
                raise InvalidRequest(f"Invalid empty value for {column} of type {self.cql_name}")
            return EMPTY
        return self._validate(value, column)

    @abstractmethod
    def _validate(self, value: Any, column: str) -> Any:
        """``validate`` for a non-null value."""

    def _invalid_value(self, value: Any, column: str) -> InvalidRequest:
        return InvalidRequest(
            f"Invalid value {value!r} of Python type {type(value).__name__} for {column} "
            f"of type {self.cql_name}"
        )

    def to_cqlsh(self, value: Any) -> str:
        """The value as cqlsh prints it in a result table (``None`` -> ``null``)."""
        return self.format_cqlsh(value, nested=False)

    def format_cqlsh(self, value: Any, nested: bool) -> str:
        """cqlsh text of a value; ``nested`` inside a collection, tuple or UDT (quoted text)."""
        if value is None:
            return "null"
        if value is EMPTY:
            return ""  # Cassandra's getString of an empty buffer
        return self._cqlsh(value, nested)

    @abstractmethod
    def _cqlsh(self, value: Any, nested: bool) -> str:
        """``format_cqlsh`` for a non-null value."""

    def to_literal(self, value: Any) -> str:
        """The value as a CQL literal that parses back to the same value (``'it''s'``)."""
        if value is None:
            return "null"
        if value is EMPTY:  # what ScyllaDB's cqlpy test_empty_int writes
            return f"blobAs{self.cql_name}(0x)"
        return self._literal(value)

    @abstractmethod
    def _literal(self, value: Any) -> str:
        """``to_literal`` for a non-null value."""

    def sort_key(self, value: Any) -> Any:
        """A key ordering values as the CQL comparator does (clustering order, set order);
        the empty value's key (``EMPTY_KEY``) comes before every other."""
        return EMPTY_KEY if value is EMPTY else self._sort_key(value)

    def serialize(self, value: Any) -> bytes:
        """The CQL native protocol (v4) encoding of a non-null value (``EMPTY``: no bytes)."""
        return b"" if value is EMPTY else self._serialize(value)

    def deserialize(self, data: bytes) -> Any:
        """Inverse of ``serialize``: no bytes are ``EMPTY`` for a type that has it."""
        if not data and self.empty_allowed:
            return EMPTY
        return self._deserialize(data)

    @abstractmethod
    def _sort_key(self, value: Any) -> Any:
        """``sort_key`` for a value other than ``EMPTY``."""

    @abstractmethod
    def _serialize(self, value: Any) -> bytes:
        """``serialize`` for a value other than ``EMPTY``."""

    @abstractmethod
    def _deserialize(self, data: bytes) -> Any:
        """``deserialize`` for bytes that are not the empty value."""

    @abstractmethod
    def arrow_type(self) -> pa.DataType:
        """The Arrow type used for this type in Delta/Parquet outputs (docs/types.md)."""

    def to_arrow(self, value: Any) -> Any:
        """The value as a Python object ``pyarrow.array([...], type=arrow_type())`` accepts."""
        if value is EMPTY:
            raise InvalidRequest(
                f"An empty value of type {self.cql_name} has no Arrow form (docs/types.md)"
            )
        return None if value is None else self._to_arrow(value)

    def from_arrow(self, value: Any) -> Any:
        """Inverse of ``to_arrow`` (from ``pyarrow`` ``to_pylist()`` output).

        Temporal values may come as ``date``/``time``/``datetime`` objects or as integers
        (``cqlcdc.types.arrow.to_pylist`` gives integers, which keep nanoseconds and every
        year).
        """
        return None if value is None else self._from_arrow(value)

    @abstractmethod
    def _to_arrow(self, value: Any) -> Any:
        """``to_arrow`` for a non-null value."""

    @abstractmethod
    def _from_arrow(self, value: Any) -> Any:
        """``from_arrow`` for a non-null value."""


def not_empty(value: Any, t: CqlType) -> Any:
    """``value``, an element, component or field of a collection, tuple or UDT: refused if
    ``EMPTY``, which cqlcdc keeps only as a whole column's or key's value (docs/types.md,
    "The empty value")."""
    if value is EMPTY:
        raise InvalidRequest(
            f"Empty value of type {t.cql_name} inside a collection, tuple or user type is "
            "not supported"
        )
    return value


__all__ = [
    "CqlType",
    "TermContext",
    "TermEvaluation",
    "install_term_evaluation",
    "not_empty",
    "term_evaluation",
]
