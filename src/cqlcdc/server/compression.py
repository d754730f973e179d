"""LZ4 as the native protocol compresses with it: a 4-byte big-endian uncompressed length,
then an LZ4 block (v4 frame bodies, flag 0x01), and v5's compressed segments (the
cassandra-driver's ``SegmentCodec`` with these two functions).

>>> decompress(compress(b"abc" * 100), limit=1000) == b"abc" * 100
True
"""

from __future__ import annotations

from typing import Any

import lz4.block
from cassandra.marshal import int32_pack, int32_unpack
from cassandra.protocol import write_uint_le
from cassandra.segment import CRC32_INITIAL, SegmentCodec, compute_crc32

from cqlcdc.errors import ProtocolError

ALGORITHMS = ("lz4",)  # snappy is v4-only and has no maintained wheel here; v5 allows lz4 alone


def compress(data: bytes) -> bytes:
    block: bytes = lz4.block.compress(data, store_size=False)
    return bytes(int32_pack(len(data))) + block


def decompress(data: bytes, limit: int) -> bytes:
    """The uncompressed bytes, refusing a declared length over ``limit`` (a hostile
    length would otherwise allocate it) or a corrupt block.

    Raises:
        ProtocolError: a short, oversized or corrupt body.
    """
    if len(data) < 4:
        raise ProtocolError("Compressed body shorter than its length prefix")
    size = int32_unpack(data[:4])
    if size < 0 or size > limit:
        raise ProtocolError(f"Compressed body declares {size} bytes (limit {limit})")
    if size == 0:
        return b""
    try:
        out: bytes = lz4.block.decompress(data[4:], uncompressed_size=size)
    except (lz4.block.LZ4BlockError, ValueError) as e:
        raise ProtocolError(f"Corrupt LZ4 body: {e}") from None
    if len(out) != size:
        raise ProtocolError(f"LZ4 body is {len(out)} bytes, its prefix says {size}")
    return out


# payload cut well under the 128 KiB segment limit, so its LZ4 block (at worst a little
# larger than the input) always fits a segment
CHUNK_BYTES = 120_000


class LZ4Segments(SegmentCodec):  # type: ignore[misc]
    """v5 segments compressed with LZ4, every one of them: the driver's codec sends a
    payload LZ4 cannot shrink as is (uncompressed length 0), and its reader then counts
    that segment's header 2 bytes short (``SegmentHeader.segment_length``), so it fails
    when such a segment arrives in two reads. A compressed payload it reads right."""

    def __init__(self, limit: int) -> None:
        super().__init__(compress, lambda data: decompress(data, limit))

    def encode(self, buffer: Any, msg: bytes) -> None:
        chunks = [msg[i : i + CHUNK_BYTES] for i in range(0, len(msg), CHUNK_BYTES)] or [b""]
        for chunk in chunks:
            payload = self.compress(chunk) if chunk else b""
            self.encode_header(buffer, len(payload), len(chunk), len(chunks) == 1)
            buffer.write(payload)
            write_uint_le(buffer, compute_crc32(payload, CRC32_INITIAL))


def segment_codec(limit: int) -> SegmentCodec:
    """v5 segments compressed with LZ4 (each segment's payload is at most 128 KiB)."""
    return LZ4Segments(limit)


__all__ = ["ALGORITHMS", "compress", "decompress", "segment_codec"]
