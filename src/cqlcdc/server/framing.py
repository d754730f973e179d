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

from cqlcdc.errors import ProtocolError
from cqlcdc.server.frames import (
    MAX_BODY_BYTES,
    SUPPORTED_VERSIONS,
    Frame,
    FrameHeader,
    FrameParser,
    Opcode,
)
from cqlcdc.server.segments import SegmentParser, encode_segments

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
        self._segments = SegmentParser()
        self._segments.append(leftover)
        self._held = False

    def keep_plain(self) -> None:
        """Go on without segments (a v5 STARTUP was answered with an ERROR)."""
        self._held = False

    def encode(self, frames: Sequence[bytes]) -> bytes:
        """The bytes to send for ``frames`` (encoded by ``encode_frame``/``encode_response``)."""
        if self._segments is None:
            return b"".join(frames)
        return encode_segments(frames)

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


class FrameReader:
    """Frames from an asyncio stream through a connection's Framing.

    Args:
        reader: the connection's stream.
        framing: the connection's framing (shared with whatever writes responses).
        chunk_bytes: how much to ask the stream for at a time.
    """

    def __init__(
        self, reader: asyncio.StreamReader, framing: Framing, chunk_bytes: int = 64 * 1024
    ) -> None:
        self._reader = reader
        self._framing = framing
        self._chunk_bytes = chunk_bytes
        self._ready: deque[Frame] = deque()

    async def read(self) -> Frame | None:
        """The next frame, or None once the client has closed the connection.

        Raises:
            ProtocolError: a bad frame or segment (see ``Framing.feed``).
        """
        if not self._ready:
            self._ready.extend(self._framing.feed(b""))
        while not self._ready:
            chunk = await self._reader.read(self._chunk_bytes)
            if not chunk:
                return None
            self._ready.extend(self._framing.feed(chunk))
        return self._ready.popleft()


__all__ = ["FIRST_SEGMENTED_VERSION", "FrameReader", "Framing"]
