"""The spec's notations (native_protocol_v5.spec section 3): ``[int]``, ``[string]``, ``[value]``...

Writing is the cassandra-driver's own ``write_*`` primitives. Reading is its ``read_*``
primitives over a body that refuses short reads: on their own they return a short string
for a truncated body or raise ``struct.error``; here anything malformed is a ProtocolError.

>>> reader = BodyReader(bytes.fromhex("0002") + b"ok" + bytes.fromhex("fffffffe"), "QUERY")
>>> reader.read_string(), reader.read_value()
('ok', UNSET)
"""

from __future__ import annotations

import enum
import io
import ipaddress
from collections.abc import Callable, Mapping
from typing import TypeAlias, TypeVar

from cassandra import ConsistencyLevel
from cassandra import protocol as p
from cassandra.marshal import int64_unpack, uint8_unpack

from cqlcdc.errors import ProtocolError

T = TypeVar("T")


class Unset(enum.Enum):
    """A bound value the client left unset (``[value]`` length -2): the column keeps what it
    has. Distinct from ``None`` (null, length -1), which deletes."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset.UNSET

Value: TypeAlias = bytes | Unset | None
"""A ``[value]``: bytes, ``None`` for null, ``UNSET`` for not set."""


class _StrictBody(io.BytesIO):
    """A body whose ``read(n)`` returns exactly n bytes or raises: the driver's ``read_*``
    trust the length prefixes they read, a server must not."""

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            raise ProtocolError(f"Invalid negative length {size}")
        data = super().read(size)
        if len(data) != size:
            raise ProtocolError(f"Truncated body: {size} bytes expected, {len(data)} left")
        return data


class BodyReader:
    """Reads a request body with the spec's notations; every fault is a ProtocolError.

    Args:
        body: the frame body.
        what: what the body holds (``QUERY``), named in error messages.
    """

    def __init__(self, body: bytes, what: str = "message") -> None:
        self._buf = _StrictBody(body)
        self._size = len(body)
        self.what = what

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return self._size - self._buf.tell()

    def expect_end(self) -> None:
        """Raises ProtocolError when bytes follow the message (a client and server that
        disagree on a layout must not go on silently)."""
        if self.remaining:
            raise ProtocolError(f"{self.remaining} unexpected bytes after the {self.what} message")

    def read_byte(self) -> int:
        """A ``[byte]``: unsigned (the driver's ``read_byte`` is signed)."""
        return int(uint8_unpack(self._buf.read(1)))

    def read_short(self) -> int:
        return int(p.read_short(self._buf))

    def read_int(self) -> int:
        return int(p.read_int(self._buf))

    def read_long(self) -> int:
        return int(int64_unpack(self._buf.read(8)))

    def read_string(self) -> str:
        return _utf8(lambda: str(p.read_string(self._buf)), self.what)

    def read_long_string(self) -> str:
        return _utf8(lambda: str(p.read_longstring(self._buf)), self.what)

    def read_short_bytes(self) -> bytes:
        return bytes(p.read_binary_string(self._buf))

    def read_bytes(self) -> bytes | None:
        """A ``[bytes]``: None for any negative length."""
        n = self.read_int()
        return None if n < 0 else self._buf.read(n)

    def read_value(self) -> Value:
        """A ``[value]``: -1 is null, -2 is UNSET, below that is invalid."""
        n = self.read_int()
        if n >= 0:
            return self._buf.read(n)
        if n == -1:
            return None
        if n == -2:
            return UNSET
        raise ProtocolError(f"Invalid [value] length {n} in the {self.what} message")

    def read_string_list(self) -> list[str]:
        return [self.read_string() for _ in range(self.read_short())]

    def read_string_map(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for _ in range(self.read_short()):
            key = self.read_string()
            out[key] = self.read_string()
        return out

    def read_bytes_map(self) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = {}
        for _ in range(self.read_short()):
            key = self.read_string()
            out[key] = self.read_bytes()
        return out

    def read_consistency(self) -> int:
        """A ``[consistency]``, checked against the spec's levels (ANY .. LOCAL_ONE)."""
        level = self.read_short()
        if level not in ConsistencyLevel.value_to_name:
            raise ProtocolError(f"Unknown code {level} for a consistency level")
        return level


def _utf8(read: Callable[[], str], what: str) -> str:
    try:
        return read()
    except UnicodeDecodeError as e:
        raise ProtocolError(f"Invalid UTF-8 in the {what} message: {e.reason}") from None


def decode_body(body: bytes, what: str, read: Callable[[BodyReader], T]) -> T:
    """Run ``read`` over the whole of ``body``.

    Raises:
        ProtocolError: the body is truncated, malformed or longer than its message.
    """
    reader = BodyReader(body, what)
    result = read(reader)
    reader.expect_end()
    return result


# -- writing: the driver's primitives, plus the two it lacks --------------------------------

write_byte = p.write_byte
write_short = p.write_short
write_int = p.write_int
write_string = p.write_string
write_long_string = p.write_longstring
write_string_list = p.write_stringlist
write_string_multimap = p.write_stringmultimap
write_inet = p.write_inet


def write_bytes(out: io.BytesIO, data: bytes | None) -> None:
    """A ``[bytes]`` (None is null, length -1)."""
    p.write_value(out, data)


def write_short_bytes(out: io.BytesIO, data: bytes) -> None:
    p.write_short(out, len(data))
    out.write(data)


def write_bytes_map(out: io.BytesIO, entries: Mapping[str, bytes | None]) -> None:
    p.write_bytesmap(out, dict(entries))


def write_inetaddr(out: io.BytesIO, address: str) -> None:
    """An ``[inetaddr]``: the address length (4 or 16) and its bytes, no port."""
    packed = ipaddress.ip_address(address).packed
    p.write_byte(out, len(packed))
    out.write(packed)


__all__ = [
    "UNSET",
    "BodyReader",
    "Unset",
    "Value",
    "decode_body",
    "write_byte",
    "write_bytes",
    "write_bytes_map",
    "write_inet",
    "write_inetaddr",
    "write_int",
    "write_long_string",
    "write_short",
    "write_short_bytes",
    "write_string",
    "write_string_list",
    "write_string_multimap",
]
