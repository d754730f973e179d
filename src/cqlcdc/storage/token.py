"""Partition keys as bytes, their Murmur3 token, and the token's bucket.

The token is Cassandra/ScyllaDB's Murmur3Partitioner: the first 64 bits of MurmurHash3
x64_128 (seed 0) of the serialized partition key, including Java's sign extension of tail bytes,
with ``Long.MIN_VALUE`` mapped to ``Long.MAX_VALUE``.

>>> murmur3_token(b"123")
-7468325962851647638
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import Column, TableSchema

_MASK = 0xFFFFFFFFFFFFFFFF
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
MIN_TOKEN = -(1 << 63)
MAX_TOKEN = (1 << 63) - 1
# keys are limited to 16 bits in Cassandra and ScyllaDB (validation.hh: max_key_size)
MAX_KEY_BYTES = 0xFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK
    k ^= k >> 33
    return k


def _signed_byte(b: int) -> int:
    return (b - 256 if b > 127 else b) & _MASK


def murmur3_token(data: bytes) -> int:
    """The Murmur3Partitioner token of a serialized partition key."""
    length = len(data)
    nblocks = length // 16
    h1 = h2 = 0
    for i in range(nblocks):
        k1 = int.from_bytes(data[i * 16 : i * 16 + 8], "little")
        k2 = int.from_bytes(data[i * 16 + 8 : i * 16 + 16], "little")
        k1 = (k1 * _C1) & _MASK
        k1 = _rotl(k1, 31)
        k1 = (k1 * _C2) & _MASK
        h1 ^= k1
        h1 = _rotl(h1, 27)
        h1 = (h1 + h2) & _MASK
        h1 = (h1 * 5 + 0x52DCE729) & _MASK
        k2 = (k2 * _C2) & _MASK
        k2 = _rotl(k2, 33)
        k2 = (k2 * _C1) & _MASK
        h2 ^= k2
        h2 = _rotl(h2, 31)
        h2 = (h2 + h1) & _MASK
        h2 = (h2 * 5 + 0x38495AB5) & _MASK
    tail = data[nblocks * 16 :]
    k1 = k2 = 0
    rem = len(tail)
    for i in range(rem - 1, 7, -1):
        k2 ^= (_signed_byte(tail[i]) << ((i - 8) * 8)) & _MASK
    if rem > 8:
        k2 = (k2 * _C2) & _MASK
        k2 = _rotl(k2, 33)
        k2 = (k2 * _C1) & _MASK
        h2 ^= k2
    for i in range(min(rem, 8) - 1, -1, -1):
        k1 ^= (_signed_byte(tail[i]) << (i * 8)) & _MASK
    if rem > 0:
        k1 = (k1 * _C1) & _MASK
        k1 = _rotl(k1, 31)
        k1 = (k1 * _C2) & _MASK
        h1 ^= k1
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _MASK
    token = h1 - (1 << 64) if h1 >= (1 << 63) else h1
    return MAX_TOKEN if token == MIN_TOKEN else token


def serialize_partition_key(schema: TableSchema, pk: Sequence[Any]) -> bytes:
    """The partition key's storage bytes: one component as is, several as a composite.

    Raises:
        InvalidRequest: the key is longer than ``MAX_KEY_BYTES`` (``key_length``), with
            Cassandra's message: such a key can be neither stored nor looked up.
    """
    cols = schema.partition_key
    parts = [bytes(col.type.serialize(v)) for col, v in zip(cols, pk, strict=True)]
    check_key_length([len(b) for b in parts])
    if len(parts) == 1:
        return parts[0]
    return b"".join(len(b).to_bytes(2, "big") + b + b"\x00" for b in parts)


def key_length(component_lengths: Sequence[int], columns: int | None = None) -> int:
    """The size ScyllaDB gives a key (partition or clustering, or a clustering prefix)
    against ``MAX_KEY_BYTES``: a key of one column as is, of several columns with a 2-byte
    length per component (its compound form; ScyllaDB's test_key_length.py: a 65,535-byte
    single key is fine, two components reach 65,531). ``columns``: the key's column count
    when ``component_lengths`` is a prefix."""
    if (columns or len(component_lengths)) == 1:
        return sum(component_lengths)
    return sum(2 + n for n in component_lengths)


def check_key_length(component_lengths: Sequence[int], columns: int | None = None) -> None:
    """Raises InvalidRequest with Cassandra's message when a key is over the 16-bit limit."""
    length = key_length(component_lengths, columns)
    if length > MAX_KEY_BYTES:
        raise InvalidRequest(f"Key length of {length} is longer than maximum of {MAX_KEY_BYTES}")


def check_clustering_key(columns: Sequence[Column], ck: Sequence[Any]) -> None:
    """A clustering key or prefix within the key length limit (InvalidRequest if not).

    Only variable-length values can reach the limit, so fixed-width columns cost nothing.
    """
    if all(col.type.fixed_size is not None for col in columns[: len(ck)]):
        return
    lengths = [len(col.type.serialize(v)) for col, v in zip(columns, ck)]
    check_key_length(lengths, len(columns))


def deserialize_partition_key(schema: TableSchema, data: bytes) -> tuple[Any, ...]:
    cols = schema.partition_key
    if len(cols) == 1:
        return (cols[0].type.deserialize(data),)
    out = []
    pos = 0
    for col in cols:
        n = int.from_bytes(data[pos : pos + 2], "big")
        out.append(col.type.deserialize(data[pos + 2 : pos + 2 + n]))
        pos += n + 3
    return tuple(out)


def bucket_of(token: int, num_buckets: int) -> int:
    """Buckets are equal token ranges: bucket i holds the i-th slice of the ring."""
    return ((token - MIN_TOKEN) * num_buckets) >> 64
