"""The native aggregates as ScyllaDB computes them (cql3/functions/aggregate_fcts.cc):
``count``, ``min``, ``max``, ``sum``, ``avg`` and the hidden ``first`` that a plain column
becomes in an aggregating SELECT.

``sum`` and ``avg`` keep their argument's type: integers add up exactly (a varint
accumulator) and the sum must fit the type; ``avg`` of integers truncates toward zero; float
adds in single precision; ``avg`` of decimals keeps the sum's scale, rounding half to even.
With no input, ``count``, ``sum`` and ``avg`` give 0, the others null.

>>> from cqlcdc.types import native_type
>>> acc = aggregate("avg", native_type("int")).start()
>>> for v in (1, 2, None, 4): acc.add(v)
>>> acc.result()
2
"""

from __future__ import annotations

import decimal
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np

from cqlcdc.errors import InvalidRequest
from cqlcdc.types import native_type
from cqlcdc.types.base import CqlType
from cqlcdc.types.values import EMPTY

AGGREGATES = frozenset({"count", "min", "max", "sum", "avg"})

# the argument types ``sum`` and ``avg`` are declared for, in add_agg_functions' order
NUMERIC = ("tinyint", "smallint", "int", "bigint", "float", "double", "varint", "decimal")
_WIDTHS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64, "counter": 64}


class Accumulator(ABC):
    """The state of one aggregate over one group of rows."""

    @abstractmethod
    def add(self, value: Any) -> None:
        """Take one input value (None: null, which only ``first`` keeps)."""

    @abstractmethod
    def result(self) -> Any:
        """The aggregate of every value taken."""


@dataclass(frozen=True, slots=True)
class Aggregate:
    """An aggregate function resolved for its argument type."""

    name: str
    arg_type: CqlType | None  # None: count(*), which counts rows
    result_type: CqlType

    def start(self) -> Accumulator:
        """A fresh accumulator for a new group."""
        if self.name == "count":
            return _Count(self.arg_type is None)
        if self.name == "first":
            return _First()
        if self.name in ("min", "max"):
            assert self.arg_type is not None
            return _Extreme(self.arg_type, self.name == "max")
        kind = _numeric_kind(self.result_type)
        if self.name == "sum":
            return _Sum(kind, self.result_type.cql_name)
        return _Avg(kind, self.result_type.cql_name)


def aggregate(name: str, arg_type: CqlType | None, written: str | None = None) -> Aggregate:
    """Resolve ``name`` (count, min, max, sum, avg, first) for an argument of ``arg_type``
    (None for ``count(*)``), as ScyllaDB picks the overload.

    Raises:
        InvalidRequest: ``sum``/``avg`` of a type they are not declared for, with ScyllaDB's
            message (``written`` is the name as the statement spells it).
    """
    if name == "count":
        return Aggregate("count", arg_type, native_type("bigint"))
    assert arg_type is not None
    if name in ("min", "max", "first"):
        return Aggregate(name, arg_type, arg_type)
    type_name = "bigint" if arg_type.is_counter else arg_type.cql_name
    if type_name not in NUMERIC:
        signatures = ", ".join([f"system.{name}"] * len(NUMERIC))
        raise InvalidRequest(
            f"Invalid call to function {written or name}, none of its type signatures match "
            f"(known type signatures: {signatures})"
        )
    return Aggregate(name, arg_type, native_type(type_name))


def _numeric_kind(ctype: CqlType) -> str:
    name = ctype.cql_name
    if name in ("float", "double", "decimal"):
        return name
    return "integer"


class _Count(Accumulator):
    def __init__(self, rows: bool) -> None:
        self.rows = rows
        self.count = 0

    def add(self, value: Any) -> None:
        if self.rows or value is not None:
            self.count += 1

    def result(self) -> Any:
        return self.count


class _First(Accumulator):
    def __init__(self) -> None:
        self.seen = False
        self.value: Any = None

    def add(self, value: Any) -> None:
        if not self.seen:
            self.seen, self.value = True, value

    def result(self) -> Any:
        return self.value


class _Extreme(Accumulator):
    """min/max by the type's comparator; nulls are skipped."""

    def __init__(self, ctype: CqlType, largest: bool) -> None:
        self.ctype = ctype
        self.largest = largest
        self.value: Any = None
        self.key: Any = None

    def add(self, value: Any) -> None:
        if value is None:
            return
        key = self.ctype.sort_key(value)
        if self.value is None or (key > self.key if self.largest else key < self.key):
            self.value, self.key = value, key

    def result(self) -> Any:
        return self.value


class _Sum(Accumulator):
    """sum: integers exactly then narrowed, float in binary32, double, exact decimals."""

    def __init__(self, kind: str, type_name: str) -> None:
        self.kind = kind
        self.type_name = type_name
        self.total: Any = _zero(kind)

    def add(self, value: Any) -> None:
        if value is not None and value is not EMPTY:  # an empty value has no number: skipped
            self.total = _add(self.kind, self.total, value)

    def result(self) -> Any:
        return _finish(self.kind, self.type_name, self.total)


class _Avg(_Sum):
    """avg: the sum over the count of non-null inputs, in the argument's type."""

    def __init__(self, kind: str, type_name: str) -> None:
        super().__init__(kind, type_name)
        self.count = 0

    def add(self, value: Any) -> None:
        if value is not None and value is not EMPTY:
            super().add(value)
            self.count += 1

    def result(self) -> Any:
        if not self.count:
            return _finish(self.kind, self.type_name, _zero(self.kind))  # Type()
        total = self.total
        if self.kind == "integer":
            quotient = abs(total) // self.count  # C++ division truncates toward zero
            return -quotient if total < 0 else quotient
        if self.kind == "float":
            with np.errstate(over="ignore", invalid="ignore"):
                return float(np.float32(total) / np.float32(self.count))
        if self.kind == "double":
            return float(total / self.count)
        return _decimal_div(total, self.count)


def _zero(kind: str) -> Any:
    if kind == "decimal":
        return decimal.Decimal(0)
    if kind in ("float", "double"):
        return 0.0
    return 0


def _add(kind: str, total: Any, value: Any) -> Any:
    if kind == "float":
        with np.errstate(over="ignore", invalid="ignore"):  # inf and NaN are values here
            return float(np.float32(total) + np.float32(value))
    if kind == "decimal":
        return _decimal_add(total, value)
    return total + value


def _finish(kind: str, type_name: str, total: Any) -> Any:
    bits = _WIDTHS.get(type_name)
    if (
        kind == "integer"
        and bits is not None
        and not -(1 << (bits - 1)) <= total < (1 << (bits - 1))
    ):
        raise InvalidRequest("Sum overflow. Values should be casted to a wider type.")
    return total


def _unscaled(value: decimal.Decimal) -> tuple[int, int]:
    """A decimal as (unscaled value, scale), the pair big_decimal keeps."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digits)) or "0")
    return (-unscaled if sign else unscaled), -exponent


def _decimal(unscaled: int, scale: int) -> decimal.Decimal:
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return decimal.Decimal((1 if unscaled < 0 else 0, digits, -scale))


def _decimal_add(a: decimal.Decimal, b: decimal.Decimal) -> decimal.Decimal:
    """big_decimal ``operator+=``: exact, at the larger scale (no context rounding)."""
    (ua, sa), (ub, sb) = _unscaled(a), _unscaled(b)
    scale = max(sa, sb)
    return _decimal(ua * 10 ** (scale - sa) + ub * 10 ** (scale - sb), scale)


def _decimal_div(total: decimal.Decimal, count: int) -> decimal.Decimal:
    """big_decimal ``div(count, HALF_EVEN)``: the sum's scale, ties to the even quotient."""
    unscaled, scale = _unscaled(total)
    quotient, remainder = divmod(abs(unscaled), count)
    if 2 * remainder > count or (2 * remainder == count and quotient % 2 == 1):
        quotient += 1
    return _decimal(-quotient if unscaled < 0 else quotient, scale)


__all__ = ["AGGREGATES", "NUMERIC", "Accumulator", "Aggregate", "aggregate"]
