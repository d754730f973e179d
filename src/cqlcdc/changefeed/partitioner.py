"""Which topic partition a changefeed record goes to: a stable hash of its primary key.

The hashed bytes are the primary key serialized as CQL serializes a partition key (one
component as is, several as a composite), and the hash is the Murmur3 token the CQL ring
uses, cut into equal token ranges. So the mapping never changes between runs, versions or
machines, and every record of one key lands in one partition, in order.

>>> partition_for(b"\\x00\\x00\\x00\\x01", 4)
1
"""

from __future__ import annotations

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


__all__ = ["partition_for", "primary_key_bytes"]
