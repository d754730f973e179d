"""Frame headers and the frame parser: the driver's own frames, cut in any way; limits;
version negotiation as the driver expects it."""

from __future__ import annotations

import io
import struct

import pytest
from cassandra.marshal import header_pack, int32_pack
from cassandra.protocol import OptionsMessage, ProtocolException, QueryMessage, _ProtocolHandler

from cqlcdc.errors import ProtocolError
from cqlcdc.server.error_responses import ErrorResponse
from cqlcdc.server.frames import (
    CURRENT_VERSION,
    FrameHeader,
    FrameParser,
    Opcode,
    encode_frame,
    header_size,
    opcode_name,
    reply_version,
    unsupported_version_message,
)
from cqlcdc.server.responses import encode_body

from .helpers import VERSIONS, driver_decode, driver_request


@pytest.mark.parametrize("version", [1, 2, *VERSIONS])
def test_response_header_is_the_drivers_layout_with_the_direction_bit(version: int) -> None:
    expected = io.BytesIO()
    if version >= 3:
        _ProtocolHandler._write_header(expected, version | 0x80, 0x08, 7, Opcode.RESULT, 3)
    else:  # the driver's own writer picks its layout by the version byte, 0x80 included
        expected.write(header_pack(version | 0x80, 0x08, 7, Opcode.RESULT) + int32_pack(3))
    assert encode_frame(version, 7, Opcode.RESULT, b"abc", 0x08) == expected.getvalue() + b"abc"
    assert header_size(version) == (9 if version >= 3 else 8)


@pytest.mark.parametrize("version", VERSIONS)
def test_parser_cuts_the_drivers_frames_however_they_arrive(version: int) -> None:
    frames = [
        driver_request(QueryMessage("SELECT 1", 1), version, stream=1),
        driver_request(OptionsMessage(), version, stream=2),
        driver_request(QueryMessage("SELECT " + "x" * 5000, 1), version, stream=32767),
    ]
    wire = b"".join(frames)
    whole = FrameParser().feed(wire)
    parser = FrameParser()
    byte_by_byte = [f for i in range(len(wire)) for f in parser.feed(wire[i : i + 1])]
    assert whole == byte_by_byte
    assert [f.header.stream for f in whole] == [1, 2, 32767]
    assert [f.header.opcode for f in whole] == [Opcode.QUERY, Opcode.OPTIONS, Opcode.QUERY]
    assert [f.body for f in whole] == [f[9:] for f in frames]
    assert parser.pending == 0 and not parser.in_frame


def test_limits_and_direction() -> None:
    header = struct.Struct(">BBhBi")
    for raw, message in [
        (header.pack(4, 0, 3, Opcode.QUERY, -1), "Invalid frame body length -1"),
        (header.pack(4, 0, 3, Opcode.QUERY, 1025), "length 1025 exceeds maximum allowed"),
        (header.pack(0x84, 0, 3, Opcode.RESULT, 0), "response"),
    ]:
        parser = FrameParser(max_body_bytes=1024)
        with pytest.raises(ProtocolError, match=message):
            parser.feed(raw)
        assert parser.rejected is not None and parser.rejected.stream == 3
    assert FrameParser(max_body_bytes=1024).feed(header.pack(4, 0, 3, 7, 1024) + bytes(1024))


@pytest.mark.parametrize(("version", "answer"), [(3, 3), (6, 4), (0x41, 4), (0x42, 4)])
def test_unsupported_versions_are_refused_at_the_header(version: int, answer: int) -> None:
    parser = FrameParser()
    # a huge declared body: the answer must not wait for it
    with pytest.raises(ProtocolError) as info:
        parser.feed(struct.pack(">BBhBi", version, 0, 9, Opcode.OPTIONS, 10**8))
    assert parser.rejected == FrameHeader(version, 0, 9, Opcode.OPTIONS, 10**8)
    assert reply_version(version) == answer
    # the driver reads the answer and flags the version as unsupported, so it downgrades
    error = ErrorResponse(info.value.code, info.value.message)
    frame = encode_frame(answer, 9, Opcode.ERROR, encode_body(answer, error))
    msg = driver_decode(frame, expect_version=answer)
    assert isinstance(msg, ProtocolException)
    assert "unsupported protocol version" in msg.message
    assert msg.message == (
        f"Invalid or unsupported protocol version ({version}); supported versions are (4/v4, 5/v5)"
    )


def test_the_drivers_first_attempts_are_refused() -> None:
    # the Python driver starts at DSE_V2 (0x42), then DSE_V1, then 5 (skipping beta 6)
    for version in (0x42, 0x41, 6):
        with pytest.raises(ProtocolError, match="unsupported protocol version"):
            FrameParser().feed(driver_request(OptionsMessage(), version))
    assert FrameParser().feed(driver_request(OptionsMessage(), 5))


@pytest.mark.parametrize("version", [1, 2])
def test_v1_v2_clients_get_their_own_eight_byte_layout(version: int) -> None:
    parser = FrameParser()
    with pytest.raises(ProtocolError, match=f"version \\({version}\\)"):
        parser.feed(struct.pack(">BBbBi", version, 0, -3, Opcode.OPTIONS, 0))
    assert parser.rejected is not None and parser.rejected.stream == -3
    assert reply_version(version) == version
    frame = encode_frame(version, -3, Opcode.ERROR, b"")
    assert len(frame) == 8 and frame[0] == 0x80 | version and frame[2] == 0xFD


def test_names_and_messages() -> None:
    assert opcode_name(7) == "QUERY" and opcode_name(0x42) == "0x42"
    assert CURRENT_VERSION == 4 and reply_version(0) == 4 and reply_version(5) == 5
    assert unsupported_version_message(9, (4,)) == (
        "Invalid or unsupported protocol version (9); supported versions are (4/v4)"
    )
