"""The partitioners: YDB's MD5 of the JSON key (feeds made now) and a stable Murmur3 hash of
the primary key (feeds made before), each cut into equal ranges."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from cqlcdc.changefeed.events import RowEvent
from cqlcdc.changefeed.options import FeedOptions
from cqlcdc.changefeed.partitioner import (
    MD5,
    md5_partition,
    partition_for,
    primary_key_bytes,
    ydb_partition_key,
)
from cqlcdc.changefeed.records import encode, feed_records
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


# -- YDB's partitioner (feeds made now): MD5 of the JSON key array -------------------------


def test_ydb_partition_key_is_the_md5_hex_of_the_key_text() -> None:
    assert ydb_partition_key("[1]") == hashlib.md5(b"[1]").hexdigest()
    assert ydb_partition_key('[1,"\u00e9"]') == hashlib.md5('[1,"é"]'.encode()).hexdigest()


def test_md5_partition_cuts_the_128_bit_range_as_ydb() -> None:
    # ShardFromUint128: value / (UINT128_MAX / count), the last shard taking the rest
    top = (1 << 128) - 1
    assert md5_partition("0" * 32, 4) == 0
    assert md5_partition("f" * 32, 4) == 3  # UINT128_MAX / slice is 4: clamped to the last
    slice_ = top // 3
    assert md5_partition(f"{slice_ - 1:032x}", 3) == 0
    assert md5_partition(f"{slice_:032x}", 3) == 1
    assert md5_partition(f"{2 * slice_:032x}", 3) == 2
    assert {md5_partition(ydb_partition_key(f"[{i}]"), 1) for i in range(50)} == {0}
    with pytest.raises(ValueError, match="at least one partition"):
        md5_partition("0" * 32, 0)


def test_md5_partitions_spread_keys() -> None:
    counts = Counter(md5_partition(ydb_partition_key(f"[{i}]"), 4) for i in range(4000))
    assert sorted(counts) == [0, 1, 2, 3]
    assert min(counts.values()) > 800


def test_a_record_goes_where_a_ydb_consumer_computes(table: TableSchema) -> None:
    """Every format: the partition is YDB's for the JSON key text of the record's key (the
    JSON format's ``key``), and DynamoDB's eventID names it."""
    events = [RowEvent((f"k{i}",), "upsert", None, {"v": "x"}, {"v": "x"}) for i in range(40)]
    for fmt in ("JSON", "DEBEZIUM_JSON", "DYNAMODB_STREAMS_JSON"):
        feed = FeedOptions("UPDATES", fmt, partitions=4)  # type: ignore[arg-type]
        records = feed_records(feed, table, (5,), events, 1, 2, partitioner=MD5)
        for i, rec in enumerate(records):
            text = f'[5,"k{i}"]'
            assert rec.key_text == text
            assert rec.ydb_partition_key == hashlib.md5(text.encode()).hexdigest()
            expected = md5_partition(rec.ydb_partition_key, 4)
            assert rec.partition(4, MD5) == expected
            if fmt == "JSON":
                assert encode(rec.value["key"]) == text
            if fmt == "DYNAMODB_STREAMS_JSON":
                assert rec.value["eventID"].startswith(f"{expected}-")
        assert len({r.partition(4, MD5) for r in records}) == 4
