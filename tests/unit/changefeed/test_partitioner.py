"""The partitioner: a stable Murmur3 hash of the primary key, equal token ranges."""

from __future__ import annotations

from collections import Counter

import pytest

from cqlcdc.changefeed.partitioner import partition_for, primary_key_bytes
from cqlcdc.schema.model import TableSchema
from cqlcdc.storage.token import murmur3_token, serialize_partition_key

from .conftest import make_table


def test_golden_partitions_never_change() -> None:
    # pinned: changing these moves every existing key to another partition
    assert [partition_for(str(i).encode(), 8) for i in range(10)] == [5, 7, 6, 3, 3, 4, 0, 2, 5, 3]
    assert murmur3_token(b"123") == -7468325962851647638
    assert partition_for(b"123", 2) == 0
    assert partition_for(b"\x00\x00\x00\x01", 4) == 1
    assert partition_for(b"\x00\x04\x00\x00\x00\x05\x00\x00\x01a\x00", 4) == 3


def test_one_partition_takes_everything() -> None:
    assert {partition_for(str(i).encode(), 1) for i in range(100)} == {0}


def test_partitions_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one partition"):
        partition_for(b"x", 0)


def test_keys_spread_over_all_partitions() -> None:
    counts = Counter(partition_for(i.to_bytes(4, "big"), 4) for i in range(4000))
    assert sorted(counts) == [0, 1, 2, 3]
    assert min(counts.values()) > 800


def test_primary_key_bytes(table: TableSchema) -> None:
    # the static row's key is the partition key: its bytes are CQL's, its hash the token
    assert primary_key_bytes(table, (5,), None) == serialize_partition_key(table, (5,))
    assert primary_key_bytes(table, (5,), ("a",)) == b"\x00\x04\x00\x00\x00\x05\x00\x00\x01a\x00"
    with pytest.raises(ValueError, match="key values"):
        primary_key_bytes(table, (5,), ())


def test_table_without_clustering_hashes_like_the_token_ring() -> None:
    table = make_table("CREATE TABLE ks.kv (pk int PRIMARY KEY, v int)")
    key = primary_key_bytes(table, (1,), ())
    assert key == serialize_partition_key(table, (1,))
