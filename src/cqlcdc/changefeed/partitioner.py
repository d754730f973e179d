"""Which topic partition a changefeed record goes to: a stable hash of its primary key.

Feeds made now use YDB's rule (``MD5``): the MD5 of the record's key as the compact JSON
array of its key values (the ``key`` of a JSON-format record, UTF-8), read as a 128-bit
number, picks one of ``partitions`` equal slices of [0, 2^128 - 1] (YDB's
``TMd5Partitioner``: ``ShardFromDecimal(HexBytesToDecimal(MD5::Calc(key json)), count)``).
Feeds made before keep ``MURMUR3``: the Murmur3 token of the primary key serialized as CQL
serializes a partition key, cut into equal token ranges. Either way the mapping never
changes between runs, versions or machines, and every record of one key lands in one
partition, in order.

>>> ydb_partition_key("[1]")
'35dba5d75538a9bbe0b4da4422759a0e'
>>> md5_partition(ydb_partition_key("[1]"), 4)
0
>>> partition_for(b"\\x00\\x00\\x00\\x01", 4)
1
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.token import bucket_of, murmur3_token


def primary_key_bytes(schema: TableSchema, pk: Sequence[Any], ck: Sequence[Any] | None) -> bytes:
    """The bytes a record's key is hashed by.

    Args:
        schema: the table.
        pk: the partition key values, in partition key order.
        ck: the clustering key values; None for the static row, whose key is the partition
            key alone (so its bytes are exactly the CQL partition key and its hash the
            partition's token).

    Returns:
        One component's native protocol bytes, or for several components the CQL composite
        form: per component a 2-byte big-endian length, the bytes, and a 0 byte.
    """
    columns = schema.partition_key + (schema.clustering_key if ck is not None else ())
    values = tuple(pk) + (tuple(ck) if ck is not None else ())
    if len(columns) != len(values):
        raise ValueError(f"{len(values)} key values for the {len(columns)} key columns")
    if len(columns) == 1:
        return bytes(columns[0].type.serialize(values[0]))
    out = bytearray()
    for column, value in zip(columns, values):
        data = column.type.serialize(value)
        out += len(data).to_bytes(2, "big") + data + b"\x00"
    return bytes(out)


def partition_for(key_bytes: bytes, partitions: int) -> int:
    """The topic partition of a key: partition i holds the i-th of ``partitions`` equal
    slices of the Murmur3 token ring.

    Raises:
        ValueError: ``partitions`` is not positive.
    """
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    if partitions == 1:  # the whole ring (no hash needed)
        return 0
    return bucket_of(murmur3_token(key_bytes), partitions)


MD5 = "md5"  # YDB's: schema.model.FEED_PARTITIONER, what every feed made now uses
MURMUR3 = "murmur3"  # the feeds of data directories made before (no entry in the catalog)
_UINT128_MAX = (1 << 128) - 1


def ydb_partition_key(key_text: str) -> str:
    """YDB's partition key of a record: the lower-case hex MD5 of its key's JSON text (the
    compact JSON array of the key values, as a JSON-format record's ``key``), as YDB's
    ``TChangeRecord::GetPartitionKey`` computes it (``MD5::Calc(WriteJson(key, false))``)."""
    return hashlib.md5(key_text.encode()).hexdigest()


def md5_partition(partition_key: str, partitions: int) -> int:
    """The partition of an MD5 partition key (hex) among ``partitions``: the 128-bit number
    divided by the width of one of ``partitions`` equal slices, the last slice taking the
    remainder (YDB's ``ShardFromUint128``).

    Raises:
        ValueError: ``partitions`` is not positive.
    """
    if partitions < 1:
        raise ValueError(f"a topic has at least one partition, not {partitions}")
    shard = int(partition_key, 16) // (_UINT128_MAX // partitions)
    return min(shard, partitions - 1)


__all__ = [
    "MD5",
    "MURMUR3",
    "md5_partition",
    "partition_for",
    "primary_key_bytes",
    "ydb_partition_key",
]
