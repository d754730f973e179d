"""LZ4 both ways against the cassandra-driver's own compressor and segment codec: v4
compressed bodies (flag 0x01) and v5 compressed segments; hostile bodies are protocol
errors, not allocations or crashes."""

from __future__ import annotations

import io

import pytest
from cassandra.connection import locally_supported_compressions, segment_codec_lz4
from cassandra.protocol import ProtocolHandler, QueryMessage, ResultMessage

from cqlcdc.errors import ProtocolError
from cqlcdc.server import compression
from cqlcdc.server.frames import FLAG_COMPRESSED, Opcode
from cqlcdc.server.framing import Framing
from cqlcdc.server.responses import encode_response
from cqlcdc.server.results import ColumnSpec, RowsMetadata, RowsResult, serialize_rows
from cqlcdc.types import native_type

DRIVER_COMPRESS, DRIVER_DECOMPRESS = locally_supported_compressions["lz4"]
QUERY = "SELECT * FROM ks.t WHERE pk = 'a value that repeats, a value that repeats'"


def _driver_query_frame(version: int, compressor: object | None) -> bytes:
    frame = ProtocolHandler.encode_message(
        QueryMessage(QUERY, consistency_level=1), 5, version, compressor, False
    )
    return bytes(frame)


def _rows(n: int) -> RowsResult:
    cols = (ColumnSpec("ks", "t", "v", native_type("text")),)
    return RowsResult(RowsMetadata(cols), serialize_rows(cols, [["row " * 20]] * n))


def test_lz4_matches_the_driver_both_ways() -> None:
    data = b"cdc$stream_id " * 500
    assert DRIVER_DECOMPRESS(compression.compress(data)) == data
    assert compression.decompress(DRIVER_COMPRESS(data), limit=len(data)) == data
    assert compression.decompress(compression.compress(b""), limit=0) == b""


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"\x00\x01", "shorter than its length prefix"),
        (b"\x7f\xff\xff\xff" + b"\x00" * 8, "declares"),
        (b"\x00\x00\x00\x40" + b"\xff" * 16, "Corrupt LZ4"),
    ],
)
def test_hostile_bodies_are_protocol_errors(body: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        compression.decompress(body, limit=1 << 20)


def test_v4_compressed_frames_in_and_out() -> None:
    refused = Framing()
    with pytest.raises(ProtocolError, match="no compression was agreed"):
        refused.feed(_driver_query_frame(4, DRIVER_COMPRESS))
    framing = Framing()
    framing.use_compression("lz4")
    (frame,) = framing.feed(_driver_query_frame(4, DRIVER_COMPRESS))
    assert frame.header.opcode == Opcode.QUERY and not frame.header.flags & FLAG_COMPRESSED
    assert QUERY.encode() in frame.body
    plain = encode_response(4, 5, _rows(50))
    assert framing.encode([plain]) == plain  # READY goes out before compression starts
    framing.keep_plain()  # STARTUP answered
    wire = framing.encode([plain])
    assert wire[1] & FLAG_COMPRESSED and len(wire) < len(plain)
    decoded = ProtocolHandler.decode_message(
        4, {}, wire[2] << 8 | wire[3], wire[1], wire[4], wire[9:], DRIVER_DECOMPRESS, None
    )
    assert isinstance(decoded, ResultMessage) and len(decoded.parsed_rows) == 50


def test_v5_compressed_segments_in_and_out() -> None:
    framing = Framing()
    framing.use_compression("lz4")
    framing.feed(_driver_query_frame(5, None)[:0])
    framing.start_segments()
    out = io.BytesIO()
    segment_codec_lz4.encode(out, _driver_query_frame(5, None))
    (frame,) = framing.feed(out.getvalue())
    assert QUERY.encode() in frame.body
    big = encode_response(5, 9, _rows(3000))  # over one segment: a run of segments
    wire = io.BytesIO(framing.encode([big]))
    payload = b""
    while wire.tell() < len(wire.getvalue()):
        header = segment_codec_lz4.decode_header(wire)
        payload += bytes(segment_codec_lz4.decode(wire, header).payload)
    assert payload == big
