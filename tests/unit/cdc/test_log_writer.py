"""The CDC log writer on cases the seed documents only describe in words (reference notes)."""

from __future__ import annotations

import pytest

from tests.core_model import CoreModel

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
COLS = ("cdc$batch_seq_no", "cdc$operation", "cdc$ttl", "ck", "v", "cdc$deleted_v")


def model(*ddl: str) -> CoreModel:
    m = CoreModel()
    m.run(KS)
    for d in ddl:
        m.run(d)
    return m


def test_insert_with_collection_and_ttl_gives_three_rows() -> None:
    # reference 4: op 2 (marker, ttl), op 1 (tombstone, no ttl), op 1 (cells, ttl)
    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v map<int, int>, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    m.run("INSERT INTO ks.t (pk, ck, v) VALUES (0, 0, {1: 1}) USING TTL 5")
    rows = m.log("ks.t", *COLS)
    assert [(r[0], r[1], r[2]) for r in rows] == [(0, 2, 5), (1, 1, None), (2, 1, 5)]
    assert rows[1][5] is True and rows[1][4] is None
    assert dict(rows[2][4]) == {1: 1} and rows[2][5] is None


def test_update_with_ttl_and_null_splits_dead_cells_first() -> None:
    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v int, w int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    m.run("UPDATE ks.t USING TTL 10 SET v = 1, w = null WHERE pk = 0 AND ck = 0")
    rows = m.log("ks.t", "cdc$batch_seq_no", "cdc$ttl", "v", "cdc$deleted_w")
    assert rows == [(0, None, None, True), (1, 10, 1, None)]


def test_batch_with_two_timestamps_gives_two_groups() -> None:
    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    m.run(
        "BEGIN UNLOGGED BATCH "
        "UPDATE ks.t USING TIMESTAMP 20 SET v = 2 WHERE pk = 0 AND ck = 0; "
        "UPDATE ks.t USING TIMESTAMP 10 SET v = 1 WHERE pk = 0 AND ck = 1; "
        "APPLY BATCH"
    )
    rows = m.log("ks.t", "cdc$batch_seq_no", "ck", "v", "cdc$end_of_batch")
    assert rows == [(0, 1, 1, True), (0, 0, 2, True)]
    times = [r["cdc$time"] for r in m.logs[m.table(_q("ks.t")).table_id]]
    assert times[0] != times[1]


def test_unsplit_batch_keeps_clustering_order_and_end_of_batch() -> None:
    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    m.run(
        "BEGIN BATCH INSERT INTO ks.t (pk, ck, v) VALUES (0, 1, 1); "
        "UPDATE ks.t SET v = 0 WHERE pk = 0 AND ck = 0; APPLY BATCH"
    )
    rows = m.log("ks.t", "cdc$batch_seq_no", "cdc$operation", "ck", "cdc$end_of_batch")
    assert rows == [(0, 1, 0, None), (1, 2, 1, True)]


def test_partition_delete_without_clustering_key_has_preimage() -> None:
    # reference 5 / scylladb#26382
    m = model(
        "CREATE TABLE ks.t (pk int PRIMARY KEY, v int) "
        "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
    )
    m.run("INSERT INTO ks.t (pk, v) VALUES (0, 7)")
    m.run("DELETE FROM ks.t WHERE pk = 0")
    rows = m.log("ks.t", "cdc$operation", "v")
    assert rows == [(2, 7), (9, 7), (0, 7), (4, None)]


def test_postimage_suppressed_for_row_deleted_in_same_group() -> None:
    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true, 'postimage': true}"
    )
    m.run(
        "BEGIN BATCH UPDATE ks.t SET v = 1 WHERE pk = 0 AND ck = 0; "
        "DELETE FROM ks.t WHERE pk = 0 AND ck = 0; APPLY BATCH"
    )
    ops = [r[0] for r in m.log("ks.t", "cdc$operation")]
    assert 9 not in ops and ops == [1, 3]


def test_empty_overwrite_gets_postimage_with_nulls() -> None:
    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v set<int>, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true, 'postimage': true}"
    )
    m.run("UPDATE ks.t SET v = {} WHERE pk = 0 AND ck = 0")
    assert m.log("ks.t", "cdc$operation", "v", "cdc$deleted_v") == [
        (1, None, True),
        (9, None, None),
    ]


def test_delta_keys_mode_keeps_keys_and_ttl_only() -> None:
    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true, 'delta': 'keys'}"
    )
    m.run("UPDATE ks.t USING TTL 3 SET v = 1 WHERE pk = 0 AND ck = 0")
    assert m.log("ks.t", "cdc$operation", "ck", "v", "cdc$ttl") == [(1, 0, None, 3)]


def test_degenerate_range_delete_logs_nothing() -> None:
    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    m.run("DELETE FROM ks.t WHERE pk = 0 AND ck > 5 AND ck < 2")
    assert m.log("ks.t", "cdc$operation") == []


def test_descending_clustering_range_bounds_follow_clustering_order() -> None:
    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)) "
        "WITH CLUSTERING ORDER BY (ck DESC) AND cdc = {'enabled': true}"
    )
    m.run("DELETE FROM ks.t WHERE pk = 0 AND ck > 1")
    assert m.log("ks.t", "cdc$operation", "ck") == [(5, None), (8, 1)]


@pytest.mark.parametrize(
    ("stmt", "expected"),
    [
        ("DELETE v FROM ks.t USING TIMESTAMP 100 WHERE pk = 0 AND ck = 0", 101),
        ("UPDATE ks.t USING TIMESTAMP 100 SET v = {1} WHERE pk = 0 AND ck = 0", 100),
    ],
)
def test_collection_tombstone_time_compensation(stmt: str, expected: int) -> None:
    from cqlcdc.storage.uuids import micros_of

    m = model(
        "CREATE TABLE ks.t (pk int, ck int, v set<int>, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    m.run(stmt)
    (row,) = m.logs[m.table(_q("ks.t")).table_id]
    assert micros_of(row["cdc$time"]) == expected


def _q(name: str):  # type: ignore[no-untyped-def]
    from tests.core_model import parse_qualified

    return parse_qualified(name)
