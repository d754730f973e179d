"""Numeric native types: tinyint, smallint, int, bigint, counter, varint, float, double, decimal.

Integer constants are accepted by every numeric type (as CQL does); float constants only by
float, double and decimal. Range errors use ScyllaDB's marshal messages word for word.

>>> IntType().to_cqlsh(42), DoubleType().to_cqlsh(1e20)
('42', '1e+20')
"""

from __future__ import annotations

import decimal
import math
import struct
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types.base import TermContext
from cqlcdc.types.marshal import int32_pack, int32_unpack, varint_pack, varint_unpack
from cqlcdc.types.native import NativeType
from cqlcdc.types.text import DOUBLE_PRECISION, FLOAT_PRECISION, float_literal, format_float

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _parse_int64(text: str) -> int:
    """``boost::lexical_cast<int64_t>`` as ScyllaDB uses it: anything else is a format error."""
    try:
        value = int(text)
    except ValueError:
        raise InvalidRequest(f"Invalid number format '{text}'") from None
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidRequest(f"Invalid number format '{text}'")
    return value


@dataclass(frozen=True)
class _IntegerType(NativeType):
    """A fixed-width signed integer type."""

    arrow_as_is: ClassVar[bool] = True

    constant_kinds: ClassVar[frozenset[str]] = frozenset({"integer"})
    size: ClassVar[int]
    marshal_name: ClassVar[str]  # ScyllaDB names the Java class in range errors

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        value = _parse_int64(term.text)
        bits = self.size * 8
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise InvalidRequest(f"Value out of range for type {self.marshal_name}: '{term.text}'")
        return value

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._invalid_value(value, column)
        bits = self.size * 8
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise InvalidRequest(f"Value out of range for type {self.marshal_name}: '{value}'")
        return int(value)

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return str(value)

    def _literal(self, value: Any) -> str:
        return str(value)

    def _sort_key(self, value: Any) -> Any:
        return value

    def _serialize(self, value: Any) -> bytes:
        return int(value).to_bytes(self.size, "big", signed=True)

    def _deserialize(self, data: bytes) -> Any:
        self._check_length(data, self.size)
        return int.from_bytes(data, "big", signed=True)

    def arrow_type(self) -> pa.DataType:
        return {1: pa.int8(), 2: pa.int16(), 4: pa.int32(), 8: pa.int64()}[self.size]

    def _to_arrow(self, value: Any) -> Any:
        return value

    def _from_arrow(self, value: Any) -> Any:
        return int(value)


@dataclass(frozen=True)
class TinyintType(_IntegerType):
    """``tinyint``: 8-bit signed (variable-length in vectors, as in Cassandra)."""

    name: ClassVar[str] = "tinyint"
    size: ClassVar[int] = 1
    marshal_name: ClassVar[str] = "org.apache.cassandra.db.marshal.ByteType"


@dataclass(frozen=True)
class SmallintType(_IntegerType):
    """``smallint``: 16-bit signed."""

    name: ClassVar[str] = "smallint"
    size: ClassVar[int] = 2
    marshal_name: ClassVar[str] = "org.apache.cassandra.db.marshal.ShortType"


@dataclass(frozen=True)
class IntType(_IntegerType):
    """``int``: 32-bit signed."""

    name: ClassVar[str] = "int"
    size: ClassVar[int] = 4
    marshal_name: ClassVar[str] = "org.apache.cassandra.db.marshal.Int32Type"

    @property
    def fixed_size(self) -> int | None:
        return 4


@dataclass(frozen=True)
class BigintType(_IntegerType):
    """``bigint``: 64-bit signed."""

    name: ClassVar[str] = "bigint"
    size: ClassVar[int] = 8
    marshal_name: ClassVar[str] = "org.apache.cassandra.db.marshal.LongType"

    @property
    def fixed_size(self) -> int | None:
        return 8


@dataclass(frozen=True)
class CounterType(BigintType):
    """``counter``: a 64-bit value changed only by increments; never inside collections."""

    empty_allowed: ClassVar[bool] = False  # counters add: an empty one is refused
    name: ClassVar[str] = "counter"

    @property
    def is_counter(self) -> bool:
        return True


@dataclass(frozen=True)
class VarintType(NativeType):
    """``varint``: an arbitrary-precision integer (two's complement on the wire)."""

    name: ClassVar[str] = "varint"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"integer"})

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        try:
            return int(term.text)
        except ValueError:
            raise InvalidRequest(f"unable to make int from '{term.text}'") from None

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._invalid_value(value, column)
        return int(value)

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return str(value)

    def _literal(self, value: Any) -> str:
        return str(value)

    def _sort_key(self, value: Any) -> Any:
        return value

    def _serialize(self, value: Any) -> bytes:
        return varint_pack(value)

    def _deserialize(self, data: bytes) -> Any:
        if not data:
            raise InvalidRequest("cannot deserialize multiprecision int - empty buffer")
        return varint_unpack(data)

    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def _to_arrow(self, value: Any) -> Any:
        return str(value)

    def _from_arrow(self, value: Any) -> Any:
        return int(value)


_SPECIAL_FLOATS = {"nan": math.nan, "infinity": math.inf, "-infinity": -math.inf}


@dataclass(frozen=True)
class DoubleType(NativeType):
    """``double``: IEEE 754 binary64; NaN sorts last and -0 before 0 (ScyllaDB's compare)."""

    arrow_as_is: ClassVar[bool] = True

    name: ClassVar[str] = "double"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"integer", "float"})
    format_char: ClassVar[str] = ">d"

    @property
    def fixed_size(self) -> int | None:
        return struct.calcsize(self.format_char)

    def _round(self, value: float) -> float:
        """The nearest representable value; OverflowError when out of range."""
        return value

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        special = _SPECIAL_FLOATS.get(term.text.lower())
        if special is not None:
            return special
        try:
            value = float(term.text)
            if math.isinf(value):
                raise OverflowError(term.text)
            return self._round(value)
        except (ValueError, OverflowError):
            raise InvalidRequest(f"Invalid number format '{term.text}'") from None

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise self._invalid_value(value, column)
        try:
            return self._round(float(value))
        except OverflowError:
            raise InvalidRequest(
                f"Value {value} out of range for {column} of type {self.name}"
            ) from None

    def _cqlsh(self, value: Any, nested: bool) -> str:
        # cqlsh.py: double precision only for a top-level double column
        return format_float(value, FLOAT_PRECISION if nested else DOUBLE_PRECISION)

    def _literal(self, value: Any) -> str:
        return float_literal(value)

    def _sort_key(self, value: Any) -> Any:
        if math.isnan(value):
            return (1, 0.0, 0)
        return (0, value, 0 if math.copysign(1.0, value) < 0 else 1)

    def _serialize(self, value: Any) -> bytes:
        return struct.pack(self.format_char, value)

    def _deserialize(self, data: bytes) -> Any:
        self._check_length(data, struct.calcsize(self.format_char))
        return float(struct.unpack(self.format_char, data)[0])

    def arrow_type(self) -> pa.DataType:
        return pa.float64()

    def _to_arrow(self, value: Any) -> Any:
        return value

    def _from_arrow(self, value: Any) -> Any:
        return float(value)


@dataclass(frozen=True)
class FloatType(DoubleType):
    """``float``: IEEE 754 binary32 (values are Python floats rounded to binary32)."""

    name: ClassVar[str] = "float"
    format_char: ClassVar[str] = ">f"

    def _round(self, value: float) -> float:
        if math.isnan(value) or math.isinf(value):
            return value
        return float(struct.unpack(">f", struct.pack(">f", value))[0])

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return format_float(value, FLOAT_PRECISION)

    def arrow_type(self) -> pa.DataType:
        return pa.float32()


@dataclass(frozen=True)
class DecimalType(NativeType):
    """``decimal``: an arbitrary-precision decimal with an int32 scale; no NaN or infinity."""

    name: ClassVar[str] = "decimal"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"integer", "float"})

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        try:
            return self._check(decimal.Decimal(term.text))
        except (decimal.InvalidOperation, ValueError, InvalidRequest):
            raise InvalidRequest(f"unable to make BigDecimal from '{term.text}'") from None

    @staticmethod
    def _check(value: decimal.Decimal) -> decimal.Decimal:
        if not value.is_finite():
            raise InvalidRequest(f"unable to make BigDecimal from '{value}'")
        exponent = value.as_tuple().exponent
        if not isinstance(exponent, int) or not -(1 << 31) <= -exponent < (1 << 31):
            raise InvalidRequest(f"decimal scale out of range: {value}")
        # the wire form has no negative zero: keep the value that reads back
        return value.copy_abs() if value.is_zero() else value

    def _validate(self, value: Any, column: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal):
            raise self._invalid_value(value, column)
        if isinstance(value, float):
            value = decimal.Decimal(repr(value))
        return self._check(decimal.Decimal(value))

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return str(value)

    def _literal(self, value: Any) -> str:
        return str(value)

    def _sort_key(self, value: Any) -> Any:
        return value

    def _serialize(self, value: Any) -> bytes:
        sign, digits, exponent = value.as_tuple()
        unscaled = int("".join(map(str, digits)) or "0")
        return int32_pack(-int(exponent)) + varint_pack(-unscaled if sign else unscaled)

    def _deserialize(self, data: bytes) -> Any:
        if len(data) < 5:
            raise InvalidRequest(f"Expected at least 5 bytes for a decimal, got {len(data)}")
        scale = int32_unpack(data)
        unscaled = varint_unpack(data[4:])
        return decimal.Decimal(f"{unscaled}e{-scale}")

    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def _to_arrow(self, value: Any) -> Any:
        return str(value)

    def _from_arrow(self, value: Any) -> Any:
        return decimal.Decimal(value)


__all__ = [
    "BigintType",
    "CounterType",
    "DecimalType",
    "DoubleType",
    "FloatType",
    "IntType",
    "SmallintType",
    "TinyintType",
    "VarintType",
]
