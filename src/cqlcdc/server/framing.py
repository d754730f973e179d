"""One connection's framing in both directions: plain frames, then (v5) frames in segments.

The switch (native_protocol_v5.spec 2.3.1): OPTIONS, STARTUP and their answers (SUPPORTED,
READY or AUTHENTICATE) are plain; everything after the READY or AUTHENTICATE is in
segments, both ways. So once a v5 STARTUP is parsed the input holds still, and the server
calls ``start_segments()`` right after writing READY/AUTHENTICATE (or ``keep_plain()`` after
an ERROR, when the client may try again).

>>> framing = Framing()
>>> framing.segmented
False
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence

from cassandra.marshal import int32_pack
from cassandra.segment import SegmentCodec

from cqlcdc.errors import ProtocolError
from cqlcdc.server import compression
from cqlcdc.server.budget import BodyBudget
from cqlcdc.server.frames import (
    FLAG_COMPRESSED,
    MAX_BODY_BYTES,
    SUPPORTED_VERSIONS,
    Frame,
    FrameHeader,
    FrameParser,
    Opcode,
    header_size,
)
from cqlcdc.server.segments import MAX_PAYLOAD_BYTES, SegmentParser, encode_segments

FIRST_SEGMENTED_VERSION = 5


class Framing:
    """Frames in and out of one connection.

    ``feed`` raises ProtocolError for a bad frame header (``rejected`` is then that header),
    a bad segment checksum, or segments that cut frames the wrong way; close the
    connection after answering it.

    Args:
        max_body_bytes: the largest frame body accepted.
        versions: the protocol versions accepted.
    """

    def __init__(
        self,
        *,
        max_body_bytes: int = MAX_BODY_BYTES,
        versions: tuple[int, ...] = SUPPORTED_VERSIONS,
    ) -> None:
        self._frames = FrameParser(max_body_bytes=max_body_bytes, versions=versions)
        self._segments: SegmentParser | None = None
        self._held = False
        self._max_body_bytes = max_body_bytes
        self._compressed = False  # an algorithm agreed in STARTUP (LZ4)
        self._compress_out = False  # v4: bodies going out are compressed (after READY)
        self._codec: SegmentCodec | None = None

    def use_compression(self, algorithm: str) -> None:
        """STARTUP agreed on ``algorithm``: compressed v4 frames are read from now on, and
        after STARTUP's answer (``start_segments``/``keep_plain``) frames out are compressed
        too (v4 bodies, or v5 segments both ways).

        Raises:
            ProtocolError: an algorithm this server does not have.
        """
        if algorithm not in compression.ALGORITHMS:
            raise ProtocolError(f"Unsupported compression algorithm: {algorithm}")
        self._compressed = True

    def limit_bodies(self, max_body_bytes: int) -> None:
        """Accept bodies up to ``max_body_bytes`` from the next frame header on (the
        connection lifts its handshake limit once the client is logged in)."""
        self._frames.max_body_bytes = max_body_bytes
        self._max_body_bytes = max_body_bytes

    @property
    def announced(self) -> int:
        """The body length the frame being received announced: what it will hold once
        complete (0 between frames)."""
        return self._frames.announced

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out in a frame."""
        segments = self._segments.pending if self._segments is not None else 0
        return self._frames.pending + segments

    @property
    def segmented(self) -> bool:
        """True once frames travel in segments (both directions)."""
        return self._segments is not None

    @property
    def held(self) -> bool:
        """True between a v5 STARTUP and the server's choice of framing for what follows."""
        return self._held

    @property
    def rejected(self) -> FrameHeader | None:
        """The header a ProtocolError from ``feed`` is about, when it could be read."""
        return self._frames.rejected

    def feed(self, data: bytes) -> list[Frame]:
        """Take received bytes; return the frames now complete (``feed(b"")`` parses what
        arrived while the input was held)."""
        if self._segments is not None:
            return self._feed_segments(data)
        self._frames.append(data)
        frames: list[Frame] = []
        while not self._held and (frame := self._frames.next_frame()) is not None:
            if frame.header.flags & FLAG_COMPRESSED and frame.header.version < 5:
                frame = self._decompressed(frame)
            frames.append(frame)
            header = frame.header
            if header.opcode == Opcode.STARTUP and header.version >= FIRST_SEGMENTED_VERSION:
                self._held = True
        return frames

    def start_segments(self) -> None:
        """Frames go in segments from now on, both ways (call right after writing the
        READY or AUTHENTICATE of a v5 STARTUP)."""
        if self._segments is not None:
            return
        leftover = self._frames.take_buffer()
        if self._compressed:
            self._codec = compression.segment_codec(MAX_PAYLOAD_BYTES)
            self._segments = SegmentParser(self._codec)
        else:
            self._segments = SegmentParser()
        self._segments.append(leftover)
        self._held = False

    def keep_plain(self) -> None:
        """Go on without segments (a v4 STARTUP was answered, or a v5 one with an ERROR)."""
        self._held = False
        self._compress_out = self._compressed

    def encode(self, frames: Sequence[bytes]) -> bytes:
        """The bytes to send for ``frames`` (encoded by ``encode_frame``/``encode_response``)."""
        if self._segments is None:
            if self._compress_out:
                return b"".join(_compress_frame(f) for f in frames)
            return b"".join(frames)
        if self._codec is not None:
            return encode_segments(frames, self._codec)
        return encode_segments(frames)

    def _decompressed(self, frame: Frame) -> Frame:
        if not self._compressed:
            raise ProtocolError("Received a compressed frame, but no compression was agreed")
        body = compression.decompress(frame.body, self._max_body_bytes)
        h = frame.header
        header = FrameHeader(
            h.version, h.flags & ~FLAG_COMPRESSED, h.stream, h.opcode, len(body), h.is_response
        )
        return Frame(header, body)

    def _feed_segments(self, data: bytes) -> list[Frame]:
        assert self._segments is not None
        frames: list[Frame] = []
        for segment in self._segments.feed(data):
            if segment.self_contained:
                if self._frames.in_frame:
                    raise ProtocolError(
                        "Self-contained segment while a frame cut over segments is incomplete"
                    )
                frames += self._frames.feed(segment.payload)
                if self._frames.in_frame:
                    raise ProtocolError("Self-contained segment ends inside a frame")
            else:
                done = self._frames.feed(segment.payload)
                if len(done) > 1 or (done and self._frames.in_frame):
                    raise ProtocolError(
                        "A run of segments that are not self-contained must hold one frame"
                    )
                frames += done
        return frames


def _compress_frame(frame: bytes) -> bytes:
    """A v4 frame with its body compressed (flag 0x01); an empty body stays as it is."""
    size = header_size(frame[0] & 0x7F)
    body = frame[size:]
    if not body:
        return frame
    packed = compression.compress(body)
    header = bytes([frame[0], frame[1] | FLAG_COMPRESSED]) + frame[2 : size - 4]
    return header + bytes(int32_pack(len(packed))) + packed


class FrameReader:
    """Frames from an asyncio stream through a connection's Framing, within the server's
    budget of bodies in memory.

    Before reading the body of a frame whose header is in, the reader reserves the length
    the header announced in ``budget`` (waiting, and so not reading, while the budget is
    spent), unless the body is no larger than a read; each frame it hands out holds
    ``len(frame.body)`` of the budget until its reader calls ``budget.release`` for it.

    Args:
        reader: the connection's stream.
        framing: the connection's framing (shared with whatever writes responses).
        budget: the server-wide budget of request bodies (None: unbounded).
        chunk_bytes: how much to ask the stream for at a time.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        framing: Framing,
        budget: BodyBudget | None = None,
        chunk_bytes: int = 64 * 1024,
    ) -> None:
        self._reader = reader
        self._framing = framing
        self._budget = budget
        self._chunk_bytes = chunk_bytes
        self._ready: deque[Frame] = deque()
        self._reserved = 0  # of the budget, for the frame being received

    async def read(self) -> Frame | None:
        """The next frame, or None once the client has closed the connection.

        Raises:
            ProtocolError: a bad frame or segment (see ``Framing.feed``).
        """
        if not self._ready:
            self._take(self._framing.feed(b""))
        while not self._ready:
            budget = self._budget
            announced = self._framing.announced
            # a small body arrives with a read or two and is charged once complete, so
            # small requests go on while large ones wait for the budget
            if budget is not None and announced > self._chunk_bytes and announced > self._reserved:
                await budget.reserve(announced - self._reserved)
                self._reserved = announced
            chunk = await self._reader.read(self._chunk_bytes)
            if not chunk:
                return None
            self._take(self._framing.feed(chunk))
        return self._ready.popleft()

    def _take(self, frames: list[Frame]) -> None:
        if not frames:
            return
        budget = self._budget
        if budget is not None:  # the reservation becomes the frames' own charge
            budget.release(self._reserved)
            self._reserved = 0
            budget.charge(sum(len(f.body) for f in frames))
        self._ready.extend(frames)

    def close(self) -> None:
        """Give back what the reader holds: its reservation and the frames not handed out."""
        budget = self._budget
        if budget is not None:
            budget.release(self._reserved + sum(len(f.body) for f in self._ready))
        self._reserved = 0
        self._ready.clear()


__all__ = ["FIRST_SEGMENTED_VERSION", "FrameReader", "Framing"]
