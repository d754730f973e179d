"""The clock types: ``date`` (days), ``time`` (nanoseconds of a day), ``timestamp`` (ms).

Values are plain integers so the whole CQL range fits; ``datetime`` objects are accepted when
binding and converted exactly.

>>> TimestampType().to_cqlsh(1606390225588)
'2020-11-26 11:30:25.588000+0000'
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import temporal
from cqlcdc.types.base import TermContext
from cqlcdc.types.native import NativeType

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _int_value(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class DateType(NativeType):
    """``date``: days since 1970-01-01 (signed 32-bit; unsigned with offset 2^31 on the wire)."""

    name: ClassVar[str] = "date"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"string", "integer"})

    @property
    def fixed_size(self) -> int | None:
        return 4

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        return temporal.parse_date(term.text)

    def _validate(self, value: Any, column: str) -> Any:
        days = _int_value(value)
        if days is None and isinstance(value, datetime.date):
            if isinstance(value, datetime.datetime):
                raise self._invalid_value(value, column)
            days = value.toordinal() - _EPOCH_ORDINAL
        if days is None:
            raise self._invalid_value(value, column)
        if not temporal.MIN_DAYS <= days <= temporal.MAX_DAYS:
            raise InvalidRequest(f"Date {days} out of range for {column}")
        return days

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return temporal.format_date(value)

    def _literal(self, value: Any) -> str:
        return temporal.date_literal(value)

    def _sort_key(self, value: Any) -> Any:
        return value

    def _serialize(self, value: Any) -> bytes:
        return int(value + temporal.DATE_OFFSET).to_bytes(4, "big")

    def _deserialize(self, data: bytes) -> Any:
        self._check_length(data, 4)
        return int.from_bytes(data, "big") - temporal.DATE_OFFSET

    def arrow_type(self) -> pa.DataType:
        return pa.date32()

    def _to_arrow(self, value: Any) -> Any:
        return value

    def _from_arrow(self, value: Any) -> Any:
        if isinstance(value, datetime.date):
            return value.toordinal() - _EPOCH_ORDINAL
        return int(value)


@dataclass(frozen=True)
class TimeType(NativeType):
    """``time``: nanoseconds since midnight, 0 <= t < 86400 s."""

    name: ClassVar[str] = "time"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"string"})

    @property
    def fixed_size(self) -> int | None:
        return 8

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        return temporal.parse_time(term.text)

    def _validate(self, value: Any, column: str) -> Any:
        nanos = _int_value(value)
        if nanos is None and isinstance(value, datetime.time):
            nanos = (
                (value.hour * 60 + value.minute) * 60 + value.second
            ) * 1_000_000_000 + value.microsecond * 1000
        if nanos is None:
            raise self._invalid_value(value, column)
        if not 0 <= nanos < temporal.DAY_NS:
            raise InvalidRequest(f"Time {nanos} out of range for {column}")
        return nanos

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return temporal.format_time(value)

    def _literal(self, value: Any) -> str:
        return f"'{temporal.format_time(value)}'"

    def _sort_key(self, value: Any) -> Any:
        return value

    def _serialize(self, value: Any) -> bytes:
        return int(value).to_bytes(8, "big", signed=True)

    def _deserialize(self, data: bytes) -> Any:
        self._check_length(data, 8)
        return int.from_bytes(data, "big", signed=True)

    def arrow_type(self) -> pa.DataType:
        return pa.time64("ns")

    def _to_arrow(self, value: Any) -> Any:
        return value

    def _from_arrow(self, value: Any) -> Any:
        if isinstance(value, datetime.time):
            return self._validate(value, "time")
        return int(value)


@dataclass(frozen=True)
class TimestampType(NativeType):
    """``timestamp``: milliseconds since the epoch, signed 64-bit, printed in UTC."""

    name: ClassVar[str] = "timestamp"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"string", "integer"})

    @property
    def fixed_size(self) -> int | None:
        return 8

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        now_ms = ctx.now_us // 1000 if ctx is not None else None
        return temporal.parse_timestamp(term.text, now_ms)

    def _validate(self, value: Any, column: str) -> Any:
        ms = _int_value(value)
        if ms is None and isinstance(value, datetime.datetime):
            moment = value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
            ms = (moment - _EPOCH) // datetime.timedelta(milliseconds=1)
        if ms is None:
            raise self._invalid_value(value, column)
        if not _INT64_MIN <= ms <= _INT64_MAX:
            raise InvalidRequest(f"Timestamp {ms} out of range for {column}")
        return ms

    def _cqlsh(self, value: Any, nested: bool) -> str:
        text = temporal.format_timestamp(value)
        return f"'{text}'" if nested else text

    def _literal(self, value: Any) -> str:
        year = temporal.civil_from_days(value // temporal.DAY_MS)[0]
        if not 1000 <= year <= 9999:
            return str(value)  # the string form needs a four-digit year
        moment = _EPOCH + datetime.timedelta(milliseconds=value)
        return "'" + moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "+0000'"

    def _sort_key(self, value: Any) -> Any:
        return value

    def _serialize(self, value: Any) -> bytes:
        return int(value).to_bytes(8, "big", signed=True)

    def _deserialize(self, data: bytes) -> Any:
        self._check_length(data, 8)
        return int.from_bytes(data, "big", signed=True)

    def arrow_type(self) -> pa.DataType:
        return pa.timestamp("ms", tz="UTC")

    def _to_arrow(self, value: Any) -> Any:
        return value

    def _from_arrow(self, value: Any) -> Any:
        if isinstance(value, datetime.datetime):
            return self._validate(value, "timestamp")
        return int(value)


__all__ = ["DateType", "TimeType", "TimestampType"]
