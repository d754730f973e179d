"""Frames (v5 calls them envelopes): the header, a parser of a byte stream, protocol versions.

A v3+ header is 9 bytes: version (the 0x80 bit marks a response), flags, stream [short],
opcode, body length [int]. Versions 1 and 2 had 8 (a one-byte stream); they are parsed only
to tell such a client, in its own layout, which versions this server speaks.

>>> frame = encode_frame(4, 1, Opcode.READY, b"")
>>> frame.hex()
'840000010200000000'
>>> FrameParser(versions=(4,)).feed(bytes([4]) + frame[1:])[0].header.opcode
2
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from cassandra.marshal import (
    header_struct,
    int32_pack,
    int32_unpack,
    v3_header_struct,
)

from cqlcdc.errors import ProtocolError

RESPONSE_BIT = 0x80
MAX_BODY_BYTES = 256 * 1024 * 1024  # the spec's limit on a body
SUPPORTED_VERSIONS = (4, 5)
# a client newer than every supported version is answered in this one, as Cassandra 4
# answers in its CURRENT version: every driver that speaks v5 reads v4
CURRENT_VERSION = 4

FLAG_COMPRESSED = 0x01  # v4 only; v5 compresses segments, and the flag is ignored
FLAG_TRACING = 0x02
FLAG_CUSTOM_PAYLOAD = 0x04
FLAG_WARNING = 0x08
FLAG_USE_BETA = 0x10


class Opcode(enum.IntEnum):
    """The message kinds (spec section 2.4)."""

    ERROR = 0x00
    STARTUP = 0x01
    READY = 0x02
    AUTHENTICATE = 0x03
    OPTIONS = 0x05
    SUPPORTED = 0x06
    QUERY = 0x07
    RESULT = 0x08
    PREPARE = 0x09
    EXECUTE = 0x0A
    REGISTER = 0x0B
    EVENT = 0x0C
    BATCH = 0x0D
    AUTH_CHALLENGE = 0x0E
    AUTH_RESPONSE = 0x0F
    AUTH_SUCCESS = 0x10


REQUEST_OPCODES = frozenset(
    {
        Opcode.STARTUP,
        Opcode.OPTIONS,
        Opcode.QUERY,
        Opcode.PREPARE,
        Opcode.EXECUTE,
        Opcode.REGISTER,
        Opcode.BATCH,
        Opcode.AUTH_RESPONSE,
    }
)


def opcode_name(opcode: int) -> str:
    """``QUERY`` for 0x07; the hex value for an opcode the spec does not define."""
    try:
        return Opcode(opcode).name
    except ValueError:
        return f"{opcode:#04x}"


@dataclass(frozen=True, slots=True)
class FrameHeader:
    """A frame header. ``version`` is without the direction bit."""

    version: int
    flags: int
    stream: int
    opcode: int
    body_length: int
    is_response: bool = False


@dataclass(frozen=True, slots=True)
class Frame:
    header: FrameHeader
    body: bytes


def header_size(version: int) -> int:
    """9 bytes from v3 on, 8 before (one-byte stream ids)."""
    fixed: struct.Struct = v3_header_struct if version >= 3 else header_struct
    return fixed.size + 4


def encode_frame(version: int, stream: int, opcode: int, body: bytes, flags: int = 0) -> bytes:
    """A response frame (the direction bit set) in ``version``'s header layout."""
    fixed: struct.Struct = v3_header_struct if version >= 3 else header_struct
    head = fixed.pack(version | RESPONSE_BIT, flags, stream, opcode)
    return head + bytes(int32_pack(len(body))) + body


def unsupported_version_message(
    version: int, versions: tuple[int, ...] = SUPPORTED_VERSIONS
) -> str:
    """Cassandra's words: the drivers downgrade when an ERROR holds 'unsupported protocol
    version' (the Python driver looks for exactly that, lower case)."""
    listed = ", ".join(f"{v}/v{v}" for v in versions)
    return f"Invalid or unsupported protocol version ({version}); supported versions are ({listed})"


def reply_version(version: int, versions: tuple[int, ...] = SUPPORTED_VERSIONS) -> int:
    """The version to answer a frame of ``version`` in: its own when supported, or when
    older than every supported one (an old client reads only its own layout), else
    CURRENT_VERSION."""
    if version in versions or 1 <= version < min(versions):
        return version
    return CURRENT_VERSION


class FrameParser:
    """Cuts a byte stream into frames, checking each header as soon as it is complete.

    ``feed`` raises ProtocolError for a response frame, an unsupported version (at once, so
    the client learns the versions without sending a body) or a body over the limit; then
    ``rejected`` holds the offending header, whose stream and ``reply_version`` the error
    answer goes to. After a ProtocolError the stream is out of step: close the connection.

    Args:
        max_body_bytes: the largest body accepted.
        versions: the protocol versions accepted.
    """

    def __init__(
        self,
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        versions: tuple[int, ...] = SUPPORTED_VERSIONS,
    ) -> None:
        self.max_body_bytes = max_body_bytes
        self.versions = versions
        self.rejected: FrameHeader | None = None
        self._buf = bytearray()
        self._header: FrameHeader | None = None

    @property
    def pending(self) -> int:
        """Bytes received and not yet returned in a frame."""
        return len(self._buf)

    @property
    def announced(self) -> int:
        """The body length the frame being received announced (0 between frames)."""
        return self._header.body_length if self._header is not None else 0

    @property
    def in_frame(self) -> bool:
        """True between the first byte of a frame and its last."""
        return bool(self._buf) or self._header is not None

    def append(self, data: bytes) -> None:
        self._buf += data

    def take_buffer(self) -> bytes:
        """Hand back the bytes not parsed yet (the v5 switch reads them as segments)."""
        if self._header is not None:
            raise ProtocolError("Framing changed in the middle of a frame")
        data = bytes(self._buf)
        self._buf.clear()
        return data

    def feed(self, data: bytes) -> list[Frame]:
        """Append ``data`` and return every frame now complete."""
        self.append(data)
        frames = []
        while (frame := self.next_frame()) is not None:
            frames.append(frame)
        return frames

    def next_frame(self) -> Frame | None:
        """The next complete frame in the buffer, or None until more bytes arrive."""
        if self._header is None:
            self._header = self._parse_header()
            if self._header is None:
                return None
        size = self._header.body_length
        if len(self._buf) < size:
            return None
        frame = Frame(self._header, bytes(self._buf[:size]))
        del self._buf[:size]
        self._header = None
        return frame

    def _parse_header(self) -> FrameHeader | None:
        if not self._buf:
            return None
        size = header_size(self._buf[0] & ~RESPONSE_BIT)
        if len(self._buf) < size:
            return None
        raw = bytes(self._buf[:size])
        del self._buf[:size]
        fixed = v3_header_struct if size == v3_header_struct.size + 4 else header_struct
        version_byte, flags, stream, opcode = fixed.unpack(raw[: fixed.size])
        header = FrameHeader(
            version_byte & ~RESPONSE_BIT,
            flags,
            stream,
            opcode,
            int32_unpack(raw[fixed.size :]),
            bool(version_byte & RESPONSE_BIT),
        )
        self._check(header)
        return header

    def _check(self, header: FrameHeader) -> None:
        self.rejected = header
        if header.version not in self.versions:
            raise ProtocolError(unsupported_version_message(header.version, self.versions))
        if header.is_response:
            raise ProtocolError("Frame is a response (direction bit set), not a request")
        if header.body_length < 0:
            raise ProtocolError(f"Invalid frame body length {header.body_length}")
        if header.body_length > self.max_body_bytes:
            raise ProtocolError(
                f"Request is too big: length {header.body_length} exceeds maximum allowed "
                f"length {self.max_body_bytes}"
            )
        self.rejected = None


__all__ = [
    "CURRENT_VERSION",
    "FLAG_COMPRESSED",
    "FLAG_CUSTOM_PAYLOAD",
    "FLAG_TRACING",
    "FLAG_USE_BETA",
    "FLAG_WARNING",
    "MAX_BODY_BYTES",
    "REQUEST_OPCODES",
    "RESPONSE_BIT",
    "SUPPORTED_VERSIONS",
    "Frame",
    "FrameHeader",
    "FrameParser",
    "Opcode",
    "encode_frame",
    "header_size",
    "opcode_name",
    "reply_version",
    "unsupported_version_message",
]
