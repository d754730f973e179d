"""Byte helpers of the CQL native protocol (v4): fixed ints, varints, Cassandra vints, bytes.

Only byte-level functions live here (as in the python driver's ``cassandra/marshal.py``);
the type classes decide what the bytes mean.

>>> varint_pack(-128)
b'\\x80'
"""

from __future__ import annotations

import struct

_INT32 = struct.Struct(">i")


def int32_pack(value: int) -> bytes:
    """A big-endian signed 32-bit integer."""
    return _INT32.pack(value)


def int32_unpack(data: bytes, offset: int = 0) -> int:
    """Read a big-endian signed 32-bit integer at ``offset``."""
    return int(_INT32.unpack_from(data, offset)[0])


def varint_pack(value: int) -> bytes:
    """The minimal two's complement big-endian encoding (CQL ``varint``; at least one byte)."""
    magnitude = value if value >= 0 else -value - 1
    length = magnitude.bit_length() // 8 + 1
    return value.to_bytes(length, "big", signed=True)


def varint_unpack(data: bytes) -> int:
    """Inverse of ``varint_pack`` (accepts non-minimal encodings too)."""
    return int.from_bytes(data, "big", signed=True)


def uvint_pack(value: int) -> bytes:
    """Cassandra's unsigned vint: the count of extra bytes as leading 1-bits of the first byte."""
    if value < 0 or value >= 1 << 64:
        raise ValueError(f"unsigned vint out of range: {value}")
    magnitude = 64 - (value | 1).bit_length()  # leading zeros of the 64-bit value
    size = (639 - magnitude * 9) >> 6
    if size == 1:
        return bytes([value])
    extra = size - 1
    raw = value.to_bytes(size, "big")
    first = raw[0] | (~(0xFF >> extra) & 0xFF)
    return bytes([first]) + raw[1:]


def uvint_unpack(data: bytes, offset: int = 0) -> tuple[int, int]:
    """Read an unsigned vint at ``offset``; returns the value and the offset after it."""
    first = data[offset]
    extra = 8 - (~first & 0xFF).bit_length()
    if extra == 0:
        return first, offset + 1
    end = offset + 1 + extra
    if end > len(data):
        raise ValueError("truncated vint")
    value = first & (0xFF >> extra)
    for byte in data[offset + 1 : end]:
        value = (value << 8) | byte
    return value, end


def vint_pack(value: int) -> bytes:
    """A signed vint: zig-zag encoding then ``uvint_pack`` (used by ``duration``)."""
    return uvint_pack(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def vint_unpack(data: bytes, offset: int = 0) -> tuple[int, int]:
    """Inverse of ``vint_pack``; returns the value and the offset after it."""
    raw, end = uvint_unpack(data, offset)
    return (raw >> 1) ^ -(raw & 1), end


def pack_values(values: list[bytes | None]) -> bytes:
    """Values each prefixed by an int32 length, ``None`` as length -1 (tuples, UDTs)."""
    out = bytearray()
    for value in values:
        if value is None:
            out += int32_pack(-1)
        else:
            out += int32_pack(len(value))
            out += value
    return bytes(out)


def unpack_values(data: bytes, offset: int = 0, count: int | None = None) -> list[bytes | None]:
    """Read int32-length-prefixed values (length < 0 is null) until the end or ``count``."""
    values: list[bytes | None] = []
    while offset < len(data) and (count is None or len(values) < count):
        if offset + 4 > len(data):
            raise ValueError("truncated value length")
        length = int32_unpack(data, offset)
        offset += 4
        if length < 0:
            values.append(None)
            continue
        if offset + length > len(data):
            raise ValueError("truncated value")
        values.append(data[offset : offset + length])
        offset += length
    if count is not None and len(values) != count:
        raise ValueError(f"expected {count} values, got {len(values)}")
    if offset != len(data):
        raise ValueError(f"{len(data) - offset} bytes remaining after the last value")
    return values


__all__ = [
    "int32_pack",
    "int32_unpack",
    "pack_values",
    "uvint_pack",
    "uvint_unpack",
    "varint_pack",
    "varint_unpack",
    "vint_pack",
    "vint_unpack",
]
