"""Whole-column versions of per-value work: tokens, buckets, native encodings, timeuuids.

The bulk path (``cqlcdc.storage.bulk``) handles a million writes without a Python loop per
write; these helpers are its numpy/pyarrow kernels. Each one computes exactly what its scalar
counterpart does (``murmur3_token``, ``bucket_of``, ``CqlType.serialize``,
``timeuuid_from_ticks``); the tests check them against each other.

>>> import pyarrow as pa
>>> int(murmur3_tokens(pa.array([b"123"], pa.binary()))[0])
-7468325962851647638
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.storage.token import murmur3_token
from cqlcdc.storage.uuids import UUID_EPOCH_OFFSET

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]

_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)

# CQL types whose native encoding the bulk path computes column-wise, with the numpy dtype of
# the fixed-width ones (None: the value's own bytes, utf-8 for text)
FIXED_WIDTH: dict[str, str] = {
    "tinyint": ">i1",
    "smallint": ">i2",
    "int": ">i4",
    "bigint": ">i8",
    "timestamp": ">i8",
    "float": ">f4",
    "double": ">f8",
}
VARIABLE_WIDTH = frozenset({"text", "ascii", "blob"})
BULK_TYPES = frozenset({*FIXED_WIDTH, *VARIABLE_WIDTH, "boolean"})


def _rotl(x: U64, r: int) -> U64:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _fmix(k: U64) -> U64:
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xFF51AFD7ED558CCD)
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xC4CEB9FE1A85EC53)
    return k ^ (k >> np.uint64(33))


def _murmur3_fixed(keys: npt.NDArray[np.uint8]) -> I64:
    """Tokens of equal-length keys, one per row of ``keys`` (shape ``(n, length)``)."""
    n, length = keys.shape
    h1 = np.zeros(n, np.uint64)
    h2 = np.zeros(n, np.uint64)
    nblocks = length // 16
    with np.errstate(over="ignore"):
        for i in range(nblocks):
            block = np.ascontiguousarray(keys[:, i * 16 : i * 16 + 16]).view("<u8")
            k1 = block[:, 0] * _C1
            k1 = _rotl(k1, 31) * _C2
            h1 ^= k1
            h1 = _rotl(h1, 27) + h2
            h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)
            k2 = block[:, 1] * _C2
            k2 = _rotl(k2, 33) * _C1
            h2 ^= k2
            h2 = _rotl(h2, 31) + h1
            h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)
        tail = keys[:, nblocks * 16 :].astype(np.int8).astype(np.int64).view(np.uint64)
        rem = tail.shape[1]
        k1 = np.zeros(n, np.uint64)
        k2 = np.zeros(n, np.uint64)
        for i in range(rem - 1, 7, -1):  # Java sign-extends each tail byte
            k2 ^= tail[:, i] << np.uint64((i - 8) * 8)
        if rem > 8:
            k2 = _rotl(k2 * _C2, 33) * _C1
            h2 ^= k2
        for i in range(min(rem, 8) - 1, -1, -1):
            k1 ^= tail[:, i] << np.uint64(i * 8)
        if rem > 0:
            k1 = _rotl(k1 * _C1, 31) * _C2
            h1 ^= k1
        h1 ^= np.uint64(length)
        h2 ^= np.uint64(length)
        h1 = h1 + h2
        h2 = h2 + h1
        h1 = _fmix(h1)
        h2 = _fmix(h2)
        h1 = h1 + h2
    token = h1.view(np.int64)
    # Long.MIN_VALUE is not a token: Murmur3Partitioner maps it to Long.MAX_VALUE
    return np.where(token == np.iinfo(np.int64).min, np.iinfo(np.int64).max, token)


def binary_parts(keys: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """The offsets (n + 1) and the data bytes of a binary (or string) array without nulls,
    as views of the array's own buffers (no copy of the data)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    narrow = pa.types.is_binary(keys.type) or pa.types.is_string(keys.type)
    if not narrow:
        keys = keys.cast(pa.large_binary())
    _, offsets_buf, data_buf = keys.buffers()
    window = slice(keys.offset, keys.offset + len(keys) + 1)
    offsets: npt.NDArray[np.int64] = (
        np.frombuffer(offsets_buf, np.int32)[window].astype(np.int64)
        if narrow
        else np.frombuffer(offsets_buf, np.int64)[window]
    )
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets, data


# below this many keys, the scalar hash is cheaper than numpy's per-operation cost (a
# server's small groups of writes: a few keys at a time)
_SCALAR_BELOW = 16


def murmur3_tokens(keys: pa.Array) -> I64:
    """``murmur3_token`` of every serialized partition key in a binary array (no nulls)."""
    if len(keys) < _SCALAR_BELOW:
        return np.array([murmur3_token(k) for k in keys.to_pylist()], np.int64)
    offsets, data = binary_parts(keys)
    starts = offsets[:-1]
    lengths = np.diff(offsets)
    out = np.empty(len(lengths), np.int64)
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        idx = starts[rows][:, None] + np.arange(int(length), dtype=np.int64)[None, :]
        out[rows] = _murmur3_fixed(data[idx].reshape(len(rows), int(length)))
    return out


def token_buckets(tokens: I64, num_buckets: int) -> npt.NDArray[np.int32]:
    """``bucket_of`` for every token: ``((token - MIN_TOKEN) * num_buckets) >> 64``, exactly."""
    unsigned = tokens.view(np.uint64) ^ np.uint64(1 << 63)  # token - MIN_TOKEN, as uint64
    n = np.uint64(num_buckets)
    with np.errstate(over="ignore"):
        high = (unsigned >> np.uint64(32)) * n
        low = ((unsigned & np.uint64(0xFFFFFFFF)) * n) >> np.uint64(32)
    return ((high + low) >> np.uint64(32)).astype(np.int32)


def splitmix64(x: U64) -> U64:
    """SplitMix64's finalizer: a cheap, well-mixed 64-bit hash (the bulk path's seeds)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _fixed_binary(values: npt.NDArray[np.generic], width: int) -> pa.Array:
    raw = np.ascontiguousarray(values).tobytes()
    fixed = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(width), len(values), [None, pa.py_buffer(raw)]
    )
    return fixed.cast(pa.binary())


def native_bytes(array: pa.Array, cql_name: str) -> pa.Array:
    """The native protocol encoding of every value (``CqlType.serialize``); null -> b""."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if cql_name in VARIABLE_WIDTH:
        return array.cast(pa.binary()).fill_null(b"")
    matrix = fixed_width_bytes(array, cql_name)
    return _fixed_binary(matrix, matrix.shape[1])


def fixed_width_bytes(array: pa.Array, cql_name: str) -> npt.NDArray[np.uint8]:
    """The native encodings of a fixed-width column as an (n, width) byte matrix (a null
    as zeros)."""
    if cql_name == "boolean":
        numbers = array.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
    else:
        if cql_name == "timestamp":
            array = array.cast(pa.int64())
        numbers = array.fill_null(0).to_numpy(zero_copy_only=False).astype(FIXED_WIDTH[cql_name])
    numbers = np.ascontiguousarray(numbers)
    return numbers.view(np.uint8).reshape(len(numbers), numbers.dtype.itemsize)


def length_prefixed(array: pa.Array, cql_name: str) -> pa.Array:
    """Each value as ``int32 length + bytes`` (length -1 for null), the native ``[value]``."""
    data = native_bytes(array, cql_name)
    lengths = pc.binary_length(data).to_numpy(zero_copy_only=False).astype(np.int64)
    valid = ~array.is_null().to_numpy(zero_copy_only=False)
    prefix = _fixed_binary(np.where(valid, lengths, -1).astype(">i4"), 4)
    if not valid.all():
        data = pc.if_else(pa.array(valid), data, pa.scalar(b"", pa.binary()))
    return pc.binary_join_element_wise(prefix, data, b"")


def int_bytes(values: npt.NDArray[np.generic], dtype: str) -> pa.Array:
    """Fixed-width big-endian integers as a binary array (``dtype`` like ``">i8"``)."""
    converted = values.astype(dtype)
    return _fixed_binary(converted, converted.dtype.itemsize)


# byte -> its two lower-case hex digits, as the two bytes of one little-endian uint16
_HEX_PAIRS = np.array([int.from_bytes(f"{b:02x}".encode(), "little") for b in range(256)], "<u2")
_DASHES = (8, 13, 18, 23)


def timeuuid_time(micros: I64) -> I64:
    """The 60-bit timestamp (100 ns since 1582) of a timeuuid made at each ``micros``."""
    ticks: I64 = micros.astype(np.int64) * 10 + UUID_EPOCH_OFFSET
    return ticks


def timeuuid_strings(micros: I64, low: U64) -> pa.Array:
    """Version-1 uuid text (lower case) for each ``(micros, low 64 bits)``.

    ``str(timeuuid_from_ticks(micros * 10 + UUID_EPOCH_OFFSET, low))``, column-wise.
    """
    ticks = timeuuid_time(micros).astype(np.uint64)
    time_low = ticks & np.uint64(0xFFFFFFFF)
    time_mid = (ticks >> np.uint64(32)) & np.uint64(0xFFFF)
    time_hi = ((ticks >> np.uint64(48)) & np.uint64(0x0FFF)) | np.uint64(0x1000)
    high = (time_low << np.uint64(32)) | (time_mid << np.uint64(16)) | time_hi
    n = len(micros)
    raw = np.empty((n, 2), ">u8")
    raw[:, 0] = high
    raw[:, 1] = low
    octets = raw.view(np.uint8).reshape(n, 16)
    digits = _HEX_PAIRS[octets].view(np.uint8)  # (n, 32)
    text = np.empty((n, 36), np.uint8)
    text[:, :8] = digits[:, :8]
    text[:, 9:13] = digits[:, 8:12]
    text[:, 14:18] = digits[:, 12:16]
    text[:, 19:23] = digits[:, 16:20]
    text[:, 24:] = digits[:, 20:]
    text[:, list(_DASHES)] = ord("-")
    offsets = np.arange(0, 36 * (n + 1), 36, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text))


_HEX_VALUE = np.full(256, 255, np.uint8)  # ASCII hex digit -> its value (255: not one)
for _i, _c in enumerate(b"0123456789abcdef"):
    _HEX_VALUE[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _HEX_VALUE[_c] = 10 + _i


def timeuuid_ticks(column: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """The 60-bit timestamps (100 ns since 1582) of timeuuids stored as canonical strings
    (``xxxxxxxx-xxxx-1xxx-...``), without a Python object per value: the strings are
    fixed width, so their bytes are read as one (n, 36) matrix of hex digits.

    >>> timeuuid_ticks(pa.array(["00000001-0002-1003-8000-000000000000"])).tolist()
    [844433520066561]

    Raises:
        ValueError: a null, or a value that is not a canonical uuid string.
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = [_chunk_ticks(c.cast(pa.string())) for c in chunks if len(c)]
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


# the hex digits of a timeuuid's time in its text, most significant first: time_hi after the
# version digit, time_mid, time_low
_TIME_DIGITS = np.array([15, 16, 17, 9, 10, 11, 12, 0, 1, 2, 3, 4, 5, 6, 7], np.intp)


def _uuid_text(chunk: pa.Array) -> npt.NDArray[np.uint8]:
    """The (n, 36) characters of a string array of canonical uuids."""
    if chunk.null_count:
        raise ValueError("timeuuid column has nulls")
    n = len(chunk)
    offsets = np.frombuffer(chunk.buffers()[1], np.int32)[chunk.offset : chunk.offset + n + 1]
    if not (np.diff(offsets) == 36).all():
        raise ValueError("timeuuid column holds values that are not 36-character uuids")
    text = np.frombuffer(chunk.buffers()[2], np.uint8)[offsets[0] : offsets[0] + 36 * n]
    return text.reshape(n, 36)


def _chunk_ticks(chunk: pa.Array) -> npt.NDArray[np.int64]:
    text = _uuid_text(chunk)
    n = len(text)
    nibbles = np.zeros((n, 16), np.uint8)
    nibbles[:, 1:] = _HEX_VALUE[text[:, _TIME_DIGITS]]
    if (nibbles == 255).any():
        return _chunk_order(chunk)[0]  # names the bad value
    packed = np.ascontiguousarray((nibbles[:, 0::2] << 4) | nibbles[:, 1::2])
    return packed.view(">u8")[:, 0].astype(np.int64)


def timeuuid_order(
    column: pa.Array | pa.ChunkedArray,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    """Timeuuid strings in ScyllaDB's timeuuid order, column-wise: the timestamp ticks,
    then the low 64 bits compared as signed bytes (``(lsb ^ 0x8080808080808080)``
    unsigned), as ``TimeuuidType.sort_key`` orders one value.

    Raises:
        ValueError: a null, or a value that is not a canonical uuid string.
    """
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = [_chunk_order(c.cast(pa.string())) for c in chunks if len(c)]
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.uint64)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _chunk_order(chunk: pa.Array) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint64]]:
    text = _uuid_text(chunk)
    n = len(text)
    # 16 nibbles each (the time gets a leading zero), packed into 8 big-endian bytes
    nibbles = np.zeros((n, 32), np.uint8)
    nibbles[:, 1:4] = _HEX_VALUE[text[:, 15:18]]  # time_hi, after the version digit
    nibbles[:, 4:8] = _HEX_VALUE[text[:, 9:13]]  # time_mid
    nibbles[:, 8:16] = _HEX_VALUE[text[:, 0:8]]  # time_low
    nibbles[:, 16:20] = _HEX_VALUE[text[:, 19:23]]  # clock_seq
    nibbles[:, 20:32] = _HEX_VALUE[text[:, 24:36]]  # node
    bad = (nibbles == 255).any(axis=1)
    if bad.any():
        first = chunk[int(np.argmax(bad))].as_py()
        raise ValueError(f"timeuuid column holds a value that is not a hex uuid: {first!r}")
    packed = np.ascontiguousarray((nibbles[:, 0::2] << 4) | nibbles[:, 1::2])  # (n, 16)
    words = packed.view(">u8")  # (n, 2): the time, the low 64 bits
    ticks = words[:, 0].astype(np.int64)
    low = words[:, 1].astype(np.uint64)
    return ticks, low ^ np.uint64(0x8080808080808080)
