"""Protocol v5 framing: after the handshake, frames travel inside segments (the v5 spec's
"frames"), each with a CRC24-protected header and a CRC32 payload trailer.

A self-contained segment holds one or more whole frames; a frame longer than a segment's
128 KiB payload is cut over a run of segments that are not. The segment codec (header
layout, CRCs, LZ4 when agreed) is the cassandra-driver's ``SegmentCodec``.

>>> wire = encode_segments([b"frame one", b"frame two"])
>>> [(s.payload, s.self_contained) for s in SegmentParser().feed(wire)]
[(b'frame oneframe two', True)]
"""

from __future__ import annotations

import io
from collections.abc import Iterable
from dataclasses import dataclass

from cassandra.segment import CrcException, SegmentCodec
from cassandra.segment import Segment as DriverSegment

from cqlcdc.errors import ProtocolError

MAX_PAYLOAD_BYTES: int = DriverSegment.MAX_PAYLOAD_LENGTH  # 2**17 - 1
_CODEC = SegmentCodec()  # no compressor: the 3-byte header of uncompressed segments
HEADER_BYTES: int = _CODEC.header_length_with_crc
TRAILER_BYTES = 4  # the payload's CRC32


@dataclass(frozen=True, slots=True)
class Segment:
    payload: bytes
    self_contained: bool


class SegmentParser:
    """Cuts a byte stream into segments, checking both CRCs.

    Raises ProtocolError (from ``feed``/``next_segment``) on a CRC mismatch: the stream
    cannot be trusted past it, so close the connection.
    """

    def __init__(self, codec: SegmentCodec = _CODEC) -> None:
        self._buf = bytearray()
        self._codec = codec
        self._header_bytes: int = codec.header_length_with_crc

    @property
    def pending(self) -> int:
        return len(self._buf)

    def append(self, data: bytes) -> None:
        self._buf += data

    def feed(self, data: bytes) -> list[Segment]:
        self.append(data)
        segments = []
        while (segment := self.next_segment()) is not None:
            segments.append(segment)
        return segments

    def next_segment(self) -> Segment | None:
        size = self._header_bytes
        if len(self._buf) < size:
            return None
        try:
            header = self._codec.decode_header(io.BytesIO(bytes(self._buf[:size])))
            # not header.segment_length: it counts a compressed codec's uncompressed-payload
            # segment with the short header
            length = size + header.payload_length + TRAILER_BYTES
            if len(self._buf) < length:
                return None
            body = io.BytesIO(bytes(self._buf[size:length]))
            segment = self._codec.decode(body, header)
        except CrcException as e:
            raise ProtocolError(f"Segment checksum mismatch: {e}") from None
        del self._buf[:length]
        return Segment(bytes(segment.payload), bool(segment.is_self_contained))


def encode_segments(frames: Iterable[bytes], codec: SegmentCodec = _CODEC) -> bytes:
    """Wrap encoded frames in segments: consecutive frames share self-contained segments up
    to the payload limit; a frame over the limit gets a run of its own (not self-contained)."""
    out = io.BytesIO()
    batch = bytearray()
    for frame in frames:
        if len(batch) + len(frame) > MAX_PAYLOAD_BYTES and batch:
            codec.encode(out, bytes(batch))
            batch.clear()
        if len(frame) > MAX_PAYLOAD_BYTES:
            codec.encode(out, frame)  # the driver's codec cuts it into a non-self-contained run
        else:
            batch += frame
    if batch:
        codec.encode(out, bytes(batch))
    return out.getvalue()


__all__ = [
    "HEADER_BYTES",
    "MAX_PAYLOAD_BYTES",
    "TRAILER_BYTES",
    "Segment",
    "SegmentParser",
    "encode_segments",
]
