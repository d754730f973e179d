"""The non-numeric native types: ascii, text, blob, boolean, uuid, timeuuid, inet, duration.

Each is a tiny stateless class; instances of one class are all equal.

>>> TextType().to_cqlsh("v1"), TextType().format_cqlsh("v1", nested=True)
('v1', "'v1'")
"""

from __future__ import annotations

import ipaddress
import socket
import uuid
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import duration_text, terms
from cqlcdc.types.base import CqlType, TermContext
from cqlcdc.types.text import format_text, quote_string
from cqlcdc.types.values import Duration


@dataclass(frozen=True)
class NativeType(CqlType):
    """A native type: a fixed name and the constant kinds it accepts (ScyllaDB's table)."""

    name: ClassVar[str]
    constant_kinds: ClassVar[frozenset[str]]
    empty_allowed: ClassVar[bool] = True  # but text, ascii, blob, duration (below)

    @property
    def cql_name(self) -> str:
        return self.name

    def _assignable(self, term: ast.Term) -> bool:
        return isinstance(term, ast.Constant) and term.kind in self.constant_kinds

    def _parse(self, term: ast.Term, column: str, ctx: TermContext | None) -> Any:
        if not isinstance(term, ast.Constant):
            raise terms.literal_mismatch(term, column, self.cql_name)
        if term.kind not in self.constant_kinds:
            raise terms.invalid_constant(term, column, self.cql_name)
        return self._from_constant(term, ctx)

    @abstractmethod
    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        """The value of a constant of an accepted kind (errors are ScyllaDB's marshal ones)."""

    def _check_length(self, data: bytes, size: int) -> None:
        if len(data) != size:
            raise InvalidRequest(f"Expected {size} bytes for a {self.name}, got {len(data)}")


@dataclass(frozen=True)
class TextType(NativeType):
    """``text`` (``varchar`` is an alias): UTF-8 strings, ordered by their bytes."""

    arrow_as_is: ClassVar[bool] = True

    empty_allowed: ClassVar[bool] = False  # b'' is an ordinary value
    name: ClassVar[str] = "text"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"string"})

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        return term.text

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, str):
            raise self._invalid_value(value, column)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidRequest(f"Invalid UTF-8 string for {column}") from None
        return value

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return format_text(value, quote=nested)

    def _literal(self, value: Any) -> str:
        return quote_string(value)

    def _sort_key(self, value: Any) -> Any:
        return value.encode("utf-8")

    def _serialize(self, value: Any) -> bytes:
        return bytes(value.encode("utf-8"))

    def _deserialize(self, data: bytes) -> Any:
        return bytes(data).decode("utf-8")

    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def _to_arrow(self, value: Any) -> Any:
        return value

    def _from_arrow(self, value: Any) -> Any:
        return str(value)


@dataclass(frozen=True)
class AsciiType(TextType):
    """``ascii``: like text but only US-ASCII characters."""

    name: ClassVar[str] = "ascii"

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        if not term.text.isascii():
            raise InvalidRequest(f"Invalid ASCII character in string literal: '{term.text}'")
        return term.text

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, str):
            raise self._invalid_value(value, column)
        if not value.isascii():
            raise InvalidRequest("Validation failed - non-ASCII character in an ASCII string")
        return value

    def _deserialize(self, data: bytes) -> Any:
        return bytes(data).decode("ascii")


@dataclass(frozen=True)
class BlobType(NativeType):
    """``blob``: bytes, written as ``0x...`` hex constants only."""

    arrow_as_is: ClassVar[bool] = True

    empty_allowed: ClassVar[bool] = False  # b'' is an ordinary value
    name: ClassVar[str] = "blob"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"hex"})

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        digits = term.text[2:]
        if len(digits) % 2:
            raise InvalidRequest("A hex string representing bytes must have an even length")
        try:
            return bytes.fromhex(digits)
        except ValueError:
            raise InvalidRequest(f"Non-hex characters in {digits}") from None

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise self._invalid_value(value, column)
        return bytes(value)

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return "0x" + bytes(value).hex()

    def _literal(self, value: Any) -> str:
        return "0x" + bytes(value).hex()

    def _sort_key(self, value: Any) -> Any:
        return value

    def _serialize(self, value: Any) -> bytes:
        return bytes(value)

    def _deserialize(self, data: bytes) -> Any:
        return bytes(data)

    def arrow_type(self) -> pa.DataType:
        return pa.binary()

    def _to_arrow(self, value: Any) -> Any:
        return value

    def _from_arrow(self, value: Any) -> Any:
        return bytes(value)


@dataclass(frozen=True)
class BooleanType(NativeType):
    """``boolean``: False sorts before True; cqlsh prints ``True``/``False``."""

    arrow_as_is: ClassVar[bool] = True

    name: ClassVar[str] = "boolean"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"boolean"})

    @property
    def fixed_size(self) -> int | None:
        return 1

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        return term.text.lower() == "true"

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, bool):
            raise self._invalid_value(value, column)
        return value

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return "True" if value else "False"

    def _literal(self, value: Any) -> str:
        return "true" if value else "false"

    def _sort_key(self, value: Any) -> Any:
        return bool(value)

    def _serialize(self, value: Any) -> bytes:
        return b"\x01" if value else b"\x00"

    def _deserialize(self, data: bytes) -> Any:
        self._check_length(data, 1)
        return data[0] != 0

    def arrow_type(self) -> pa.DataType:
        return pa.bool_()

    def _to_arrow(self, value: Any) -> Any:
        return value

    def _from_arrow(self, value: Any) -> Any:
        return bool(value)


def uuid_version(value: uuid.UUID) -> int:
    """The version nibble (``uuid.UUID.version`` is None for non-RFC variants)."""
    return (value.int >> 76) & 0xF


@dataclass(frozen=True)
class UuidType(NativeType):
    """``uuid``: ordered by version, then (version 1) by time, then by unsigned bytes."""

    name: ClassVar[str] = "uuid"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"uuid"})

    @property
    def fixed_size(self) -> int | None:
        return 16

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        return self._check(uuid.UUID(term.text))

    def _check(self, value: uuid.UUID) -> uuid.UUID:
        return value

    def _validate(self, value: Any, column: str) -> Any:
        if isinstance(value, str):
            try:
                value = uuid.UUID(value)
            except ValueError:
                raise InvalidRequest(f"Cannot parse uuid from '{value}'") from None
        if not isinstance(value, uuid.UUID):
            raise self._invalid_value(value, column)
        return self._check(value)

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return str(value)

    def _literal(self, value: Any) -> str:
        return str(value)

    def _sort_key(self, value: Any) -> Any:
        # types.cc compare_visitor(uuid_type_impl): version, then time (v1), then lsb unsigned
        version = uuid_version(value)
        lsb = value.int & 0xFFFFFFFFFFFFFFFF
        if version == 1:
            return (version, value.time, lsb)
        return (version, value.int >> 64, lsb)

    def _serialize(self, value: Any) -> bytes:
        return bytes(value.bytes)

    def _deserialize(self, data: bytes) -> Any:
        self._check_length(data, 16)
        return uuid.UUID(bytes=bytes(data))

    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def _to_arrow(self, value: Any) -> Any:
        return str(value)

    def _from_arrow(self, value: Any) -> Any:
        return uuid.UUID(value)


@dataclass(frozen=True)
class TimeuuidType(UuidType):
    """``timeuuid``: version-1 UUIDs ordered by time, then by signed lsb bytes (Cassandra's)."""

    name: ClassVar[str] = "timeuuid"

    def _check(self, value: uuid.UUID) -> uuid.UUID:
        version = uuid_version(value)
        if version != 1:
            raise InvalidRequest(f"Unsupported UUID version ({version})")
        return value

    def _sort_key(self, value: Any) -> Any:
        # utils/UUID.hh timeuuid_tri_compare: time, then lsb compared as signed bytes
        return (value.time, (value.int & 0xFFFFFFFFFFFFFFFF) ^ 0x8080808080808080)


@dataclass(frozen=True)
class InetType(NativeType):
    """``inet``: an IPv4 or IPv6 address, ordered by its bytes."""

    name: ClassVar[str] = "inet"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"string"})

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        try:
            return ipaddress.ip_address(term.text)
        except ValueError:
            raise InvalidRequest(f"Failed to parse inet_addr from '{term.text}'") from None

    def _validate(self, value: Any, column: str) -> Any:
        if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
            return value
        if isinstance(value, str | bytes) and not (isinstance(value, bytes) and len(value) == 0):
            try:
                return ipaddress.ip_address(value)
            except ValueError:
                raise InvalidRequest(f"Failed to parse inet_addr from '{value!s}'") from None
        raise self._invalid_value(value, column)

    def _cqlsh(self, value: Any, nested: bool) -> str:
        family = socket.AF_INET if value.version == 4 else socket.AF_INET6
        text = socket.inet_ntop(family, value.packed)  # what the python driver prints
        return f"'{text}'" if nested else text

    def _literal(self, value: Any) -> str:
        return quote_string(str(value))

    def _sort_key(self, value: Any) -> Any:
        return value.packed

    def _serialize(self, value: Any) -> bytes:
        return bytes(value.packed)

    def _deserialize(self, data: bytes) -> Any:
        if len(data) not in (4, 16):
            raise InvalidRequest(
                f"cannot deserialize inet_address, unsupported size {len(data)} bytes"
            )
        return ipaddress.ip_address(bytes(data))

    def arrow_type(self) -> pa.DataType:
        return pa.string()

    def _to_arrow(self, value: Any) -> Any:
        return str(value)

    def _from_arrow(self, value: Any) -> Any:
        return ipaddress.ip_address(value)


@dataclass(frozen=True)
class DurationType(NativeType):
    """``duration``: months, days, nanoseconds; printed like ``1y2mo3d4h``."""

    empty_allowed: ClassVar[bool] = False  # ScyllaDB: at least 3 bytes
    name: ClassVar[str] = "duration"
    constant_kinds: ClassVar[frozenset[str]] = frozenset({"duration"})

    def _from_constant(self, term: ast.Constant, ctx: TermContext | None) -> Any:
        return duration_text.parse_duration(term.text)

    def _validate(self, value: Any, column: str) -> Any:
        if not isinstance(value, Duration):
            raise self._invalid_value(value, column)
        duration_text.check_duration(value)
        return value

    def _cqlsh(self, value: Any, nested: bool) -> str:
        return duration_text.format_duration(value)

    def _literal(self, value: Any) -> str:
        return duration_text.format_duration(value) or "0s"

    def _sort_key(self, value: Any) -> Any:
        return self.serialize(value)  # ScyllaDB compares durations by their bytes

    def _serialize(self, value: Any) -> bytes:
        return duration_text.serialize_duration(value)

    def _deserialize(self, data: bytes) -> Any:
        return duration_text.deserialize_duration(bytes(data))

    def arrow_type(self) -> pa.DataType:
        return pa.struct(
            [("months", pa.int32()), ("days", pa.int32()), ("nanoseconds", pa.int64())]
        )

    def _to_arrow(self, value: Any) -> Any:
        return {"months": value.months, "days": value.days, "nanoseconds": value.nanoseconds}

    def _from_arrow(self, value: Any) -> Any:
        return Duration(value["months"], value["days"], value["nanoseconds"])


__all__ = [
    "AsciiType",
    "BlobType",
    "BooleanType",
    "DurationType",
    "InetType",
    "NativeType",
    "TextType",
    "TimeuuidType",
    "UuidType",
    "uuid_version",
]
