"""v5 segments through the driver's own SegmentCodec, both ways; the switch from plain frames
to segments after STARTUP; frames from an asyncio stream."""

from __future__ import annotations

import asyncio
import io

import pytest
from cassandra.protocol import OptionsMessage, QueryMessage, StartupMessage
from cassandra.segment import SegmentCodec

from cqlcdc.errors import ProtocolError
from cqlcdc.server.frames import Frame, FrameParser, Opcode
from cqlcdc.server.framing import FrameReader, Framing
from cqlcdc.server.responses import Ready, encode_response
from cqlcdc.server.results import ColumnSpec, RowsMetadata, RowsResult
from cqlcdc.server.segments import MAX_PAYLOAD_BYTES, SegmentParser, encode_segments
from cqlcdc.types import native_type

from .helpers import driver_decode, driver_request

CODEC = SegmentCodec()


def _driver_segments(*frames: bytes) -> bytes:
    """What a v5 client sends after READY: each frame through the driver's codec."""
    out = io.BytesIO()
    for frame in frames:
        CODEC.encode(out, frame)
    return out.getvalue()


def _driver_reads(wire: bytes) -> list[tuple[bytes, bool]]:
    """Segments read back with the driver's codec: (payload, self contained)."""
    buf, out = io.BytesIO(wire), []
    while buf.tell() < len(wire):
        header = CODEC.decode_header(buf)
        segment = CODEC.decode(buf, header)
        out.append((segment.payload, segment.is_self_contained))
    return out


def _segmented() -> Framing:
    framing = Framing()
    framing.start_segments()
    return framing


def test_requests_in_the_drivers_segments() -> None:
    small = driver_request(QueryMessage("SELECT 1", 1), 5, stream=1)
    big = driver_request(QueryMessage("SELECT '" + "x" * 300_000 + "'", 1), 5, stream=2)
    wire = _driver_segments(small, big, small)
    assert len(_driver_reads(wire)) == 5  # the big frame took three segments
    framing = _segmented()
    frames = [f for i in range(0, len(wire), 4096) for f in framing.feed(wire[i : i + 4096])]
    assert [(f.header.stream, len(f.body)) for f in frames] == [
        (1, len(small) - 9),
        (2, len(big) - 9),
        (1, len(small) - 9),
    ]
    assert frames[1].body == big[9:]


def test_responses_in_our_segments_read_by_the_driver() -> None:
    ready = encode_response(5, 1, Ready())
    cols = (ColumnSpec("ks", "t", "b", native_type("blob")),)
    rows = RowsResult(RowsMetadata(cols), ((bytes(200_000),), (b"\x01",)))
    big = encode_response(5, 2, rows)
    wire = _segmented().encode([ready, ready, big, ready])
    segments = _driver_reads(wire)
    # two small frames share a self-contained segment; the big one runs over two
    assert [(len(p), sc) for p, sc in segments] == [
        (len(ready) * 2, True),
        (MAX_PAYLOAD_BYTES, False),
        (len(big) - MAX_PAYLOAD_BYTES, False),
        (len(ready), True),
    ]
    payload = b"".join(p for p, _ in segments)
    assert payload == ready + ready + big + ready
    msg = driver_decode(payload[2 * len(ready) : 2 * len(ready) + len(big)])
    assert [len(r[0]) for r in msg.parsed_rows] == [200_000, 1]


def test_frames_fill_segments_up_to_the_limit() -> None:
    frame = bytes(60_000)
    segments = _driver_reads(encode_segments([frame, frame, frame]))
    assert [(len(p), sc) for p, sc in segments] == [(120_000, True), (60_000, True)]
    exact = bytes(MAX_PAYLOAD_BYTES)
    assert [sc for _, sc in _driver_reads(encode_segments([exact]))] == [True]


@pytest.mark.parametrize("where", [0, 2, 3, 6, 10, -1])
def test_a_flipped_bit_anywhere_is_a_checksum_error(where: int) -> None:
    wire = bytearray(_driver_segments(driver_request(OptionsMessage(), 5)))
    wire[where] ^= 0x10
    with pytest.raises(ProtocolError, match="checksum mismatch"):
        SegmentParser().feed(bytes(wire))


def _frame_bytes(stream: int, size: int) -> bytes:
    return driver_request(QueryMessage("x" * size, 1), 5, stream)


def test_segments_must_cut_frames_at_their_ends() -> None:
    whole = _frame_bytes(1, 10)
    cut = io.BytesIO()
    CODEC._encode_segment(cut, whole[:5], True)  # self-contained, but half a frame
    with pytest.raises(ProtocolError, match="ends inside a frame"):
        _segmented().feed(cut.getvalue())

    two = io.BytesIO()
    CODEC._encode_segment(two, whole + whole, False)  # a non-self-contained run, two frames
    with pytest.raises(ProtocolError, match="must hold one frame"):
        _segmented().feed(two.getvalue())

    interleaved = io.BytesIO()
    CODEC._encode_segment(interleaved, whole[:5], False)
    CODEC._encode_segment(interleaved, whole, True)
    with pytest.raises(ProtocolError, match="incomplete"):
        _segmented().feed(interleaved.getvalue())


def test_the_v5_switch_holds_the_input_after_startup() -> None:
    startup = driver_request(StartupMessage("3.0.0", {}), 5, stream=0)
    after = _driver_segments(driver_request(OptionsMessage(), 5, stream=1))
    framing = Framing()
    frames = framing.feed(driver_request(OptionsMessage(), 5, stream=7) + startup + after)
    assert [f.header.opcode for f in frames] == [Opcode.OPTIONS, Opcode.STARTUP]
    assert framing.held and not framing.segmented
    assert framing.feed(b"") == []  # held until the server has answered STARTUP
    assert framing.encode([b"plain"]) == b"plain"  # READY goes out plain
    framing.start_segments()
    assert framing.segmented and not framing.held
    assert [f.header.stream for f in framing.feed(b"")] == [1]
    assert framing.encode([b"x"]) == encode_segments([b"x"])


def test_v4_never_switches_and_an_error_keeps_v5_plain() -> None:
    framing = Framing()
    v4 = driver_request(StartupMessage("3.0.0", {}), 4) + driver_request(OptionsMessage(), 4)
    assert len(framing.feed(v4)) == 2 and not framing.held

    framing = Framing()
    retry = driver_request(StartupMessage("3.0.0", {}), 5)
    assert len(framing.feed(retry + retry)) == 1
    framing.keep_plain()  # the first STARTUP got an ERROR: the client may try again
    assert [f.header.opcode for f in framing.feed(b"")] == [Opcode.STARTUP]


def test_frame_reader_over_an_asyncio_stream() -> None:
    async def read_all() -> list[Frame | None]:
        stream = asyncio.StreamReader()
        wire = driver_request(OptionsMessage(), 4, 1) + driver_request(OptionsMessage(), 4, 2)
        stream.feed_data(wire[:5])
        stream.feed_data(wire[5:])
        stream.feed_eof()
        reader = FrameReader(stream, Framing(), chunk_bytes=3)
        return [await reader.read(), await reader.read(), await reader.read()]

    first, second, end = asyncio.run(read_all())
    assert first is not None and second is not None and end is None
    assert (first.header.stream, second.header.stream) == (1, 2)


def test_the_plain_parser_hands_over_only_between_frames() -> None:
    parser = FrameParser()
    parser.feed(driver_request(QueryMessage("SELECT 1", 1), 5)[:12])
    with pytest.raises(ProtocolError, match="middle of a frame"):
        parser.take_buffer()
