"""The real cassandra-driver as the other side: its message classes encode requests, its
ProtocolHandler decodes our responses, exactly as a client does on the wire."""

from __future__ import annotations

from typing import Any

from cassandra.connection import frame_header_v3
from cassandra.protocol import ProtocolHandler, _ProtocolHandler

from cqlcdc.server.frames import Frame, FrameParser
from cqlcdc.server.requests import Request, decode_request

# the compiled (Cython) handler clients use by default, and the pure-Python one
HANDLERS = [ProtocolHandler, _ProtocolHandler]
VERSIONS = [4, 5]


def driver_request(msg: Any, version: int, stream: int = 1) -> bytes:
    """A whole request frame as the driver writes it."""
    data: bytes = ProtocolHandler.encode_message(
        msg, stream, version, compressor=None, allow_beta_protocol_version=False
    )
    return data


def driver_frame(msg: Any, version: int, stream: int = 1) -> Frame:
    """The driver's request, cut by our parser."""
    frames = FrameParser().feed(driver_request(msg, version, stream))
    assert len(frames) == 1
    return frames[0]


def decode_driver_request(msg: Any, version: int, stream: int = 1) -> Request:
    return decode_request(driver_frame(msg, version, stream))


def driver_decode(
    frame: bytes,
    *,
    handler: Any = ProtocolHandler,
    result_metadata: Any = None,
    expect_version: int | None = None,
) -> Any:
    """Our response frame, read the way the driver's Connection reads one."""
    version = frame[0] & 0x7F
    assert frame[0] & 0x80, "a response has the direction bit"
    if expect_version is not None:
        assert version == expect_version
    flags, stream, opcode, length = frame_header_v3.unpack_from(frame, 1)
    body = frame[9:]
    assert len(body) == length
    msg = handler.decode_message(version, {}, stream, flags, opcode, body, None, result_metadata)
    return msg
