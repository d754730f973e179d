"""Replaying a CDC log's delta rows into an empty copy rebuilds the table, timestamps included."""

from __future__ import annotations

from typing import Any

import pytest

from cqlcdc.cdc.replay import replay_statements
from cqlcdc.errors import InvalidRequest
from tests.core_model import CoreModel, parse_qualified

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
UDT = "CREATE TYPE ks.u (a int, b text)"
CDC = " WITH cdc = {'enabled': true, 'preimage': 'full', 'postimage': true}"

WIDE = (
    "(pk int, ck int, s int STATIC, v int, w text, fl frozen<list<int>>, m map<int, text>, "
    "st set<int>, l list<int>, ud u, PRIMARY KEY (pk, ck))"
)
ATOMIC = ("s", "v", "w", "fl")


def _replayed(shape: str, statements: list[str], atomic: tuple[str, ...] = ATOMIC) -> list[str]:
    """Run ``statements`` on ks.t, replay its log into ks.r; assert both tables agree."""
    m = CoreModel()
    m.run(KS)
    m.run(UDT)
    m.run(f"CREATE TABLE ks.t {shape}{CDC}")
    m.run(f"CREATE TABLE ks.r {shape}")
    for s in statements:
        m.run(s)
    base = m.table(parse_qualified("ks.t"))
    log = m.logs.get(base.table_id, [])
    replayed = replay_statements(base, log, "ks.r")
    for s in replayed:
        m.run(s)
    assert m.run("SELECT * FROM ks.r") == m.run("SELECT * FROM ks.t")
    keys = ", ".join(c.name for c in base.primary_key)
    for col in atomic:
        q = f"SELECT {keys}, writetime({col}) FROM ks.%s"
        assert m.run(q % "r") == m.run(q % "t"), col
    return replayed


def _rows(m: CoreModel, table: str) -> list[dict[str, Any]]:
    return m.logs[m.table(parse_qualified(table)).table_id]


# -- atomic and static columns ------------------------------------------------------------


def test_insert_and_update_of_atomic_columns() -> None:
    out = _replayed(
        WIDE,
        [
            "INSERT INTO ks.t (pk, ck, v, w) VALUES (0, 0, 1, 'it''s')",
            "UPDATE ks.t USING TIMESTAMP 5 SET v = 2, fl = [1, 2] WHERE pk = 0 AND ck = 1",
            "UPDATE ks.t SET w = null WHERE pk = 0 AND ck = 0",
        ],
    )
    assert out[1] == "UPDATE ks.r USING TIMESTAMP 5 SET fl = [1, 2], v = 2 WHERE pk = 0 AND ck = 1"


def test_row_marker_only_insert() -> None:
    out = _replayed(WIDE, ["INSERT INTO ks.t (pk, ck) VALUES (1, 2) USING TIMESTAMP 7"])
    assert out == ["INSERT INTO ks.r (pk, ck) VALUES (1, 2) USING TIMESTAMP 7"]


def test_insert_with_null_values() -> None:
    _replayed(
        WIDE,
        [
            "UPDATE ks.t USING TIMESTAMP 1 SET v = 1, w = 'x', m = {1: 'a'} "
            "WHERE pk = 0 AND ck = 0",
            "INSERT INTO ks.t (pk, ck, v, w, m) VALUES (0, 0, null, 'y', null)",
        ],
    )


def test_static_row_update_by_partition_key() -> None:
    out = _replayed(
        WIDE,
        [
            "UPDATE ks.t USING TIMESTAMP 3 SET s = 9 WHERE pk = 0",
            "INSERT INTO ks.t (pk, ck, s, v) VALUES (1, 1, 5, 6)",
            "INSERT INTO ks.t (pk, s) VALUES (2, 7)",
            "DELETE s FROM ks.t WHERE pk = 1",
        ],
    )
    assert out[0] == "UPDATE ks.r USING TIMESTAMP 3 SET s = 9 WHERE pk = 0"


def test_table_without_clustering_key() -> None:
    _replayed(
        "(pk int PRIMARY KEY, v int, m map<int, int>)",
        [
            "INSERT INTO ks.t (pk, v, m) VALUES (0, 1, {1: 1})",
            "UPDATE ks.t SET v = 2 WHERE pk = 1",
            "DELETE FROM ks.t WHERE pk = 0",
            "UPDATE ks.t SET m = m + {2: 2} WHERE pk = 0",
        ],
        atomic=("v",),
    )


# -- collections ---------------------------------------------------------------------------


def test_map_overwrite_add_remove_and_delete() -> None:
    out = _replayed(
        WIDE,
        [
            "UPDATE ks.t USING TIMESTAMP 100 SET m = {1: 'a', 2: 'b'} WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET m = m + {3: 'c'}, m[4] = 'd' WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET m = m - {1} WHERE pk = 0 AND ck = 0",
            "DELETE m[2] FROM ks.t WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET m = {} WHERE pk = 0 AND ck = 1",
            "UPDATE ks.t SET m = {9: 'z'} WHERE pk = 0 AND ck = 2",
            "DELETE m FROM ks.t WHERE pk = 0 AND ck = 2",
        ],
    )
    # the tombstone (T-1) and the cells (T) of an overwrite: two statements at T
    assert out[:2] == [
        "UPDATE ks.r USING TIMESTAMP 100 SET m = null WHERE pk = 0 AND ck = 0",
        "UPDATE ks.r USING TIMESTAMP 100 SET m = m + {1: 'a', 2: 'b'} WHERE pk = 0 AND ck = 0",
    ]


def test_column_delete_tombstone_shadows_same_timestamp_cells() -> None:
    # DELETE m at T writes the tombstone at T (logged at T+1): cells at T stay shadowed
    _replayed(
        WIDE,
        [
            "UPDATE ks.t USING TIMESTAMP 50 SET m = m + {1: 'a'} WHERE pk = 0 AND ck = 0",
            "DELETE m FROM ks.t USING TIMESTAMP 50 WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t USING TIMESTAMP 51 SET m = m + {2: 'b'} WHERE pk = 0 AND ck = 0",
        ],
    )


def test_set_add_remove_overwrite() -> None:
    _replayed(
        WIDE,
        [
            "INSERT INTO ks.t (pk, ck, st) VALUES (0, 0, {1, 2, 3})",
            "UPDATE ks.t SET st = st + {4} WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET st = st - {1, 9} WHERE pk = 0 AND ck = 0",
            "DELETE st[2] FROM ks.t WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET st = {7} WHERE pk = 0 AND ck = 1",
        ],
    )


def test_list_append_prepend_set_index_and_remove() -> None:
    out = _replayed(
        WIDE,
        [
            "UPDATE ks.t SET l = [1, 2, 3] WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET l = l + [4] WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET l = [0] + l WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET l[1] = 10 WHERE pk = 0 AND ck = 0",
            "DELETE l[2] FROM ks.t WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET l = l - [3] WHERE pk = 0 AND ck = 0",
            "INSERT INTO ks.t (pk, ck, l) VALUES (0, 1, [5, 5])",
        ],
    )
    assert any("l[SCYLLA_TIMEUUID_LIST_INDEX(" in s and "] = null" in s for s in out)


def test_udt_overwrite_field_set_and_field_delete() -> None:
    out = _replayed(
        WIDE,
        [
            "INSERT INTO ks.t (pk, ck, ud) VALUES (0, 0, {a: 1, b: 'x'})",
            "UPDATE ks.t SET ud.b = 'y' WHERE pk = 0 AND ck = 0",
            "DELETE ud.a FROM ks.t WHERE pk = 0 AND ck = 0",
            "UPDATE ks.t SET ud = {a: 5} WHERE pk = 0 AND ck = 1",
            "UPDATE ks.t SET ud = null WHERE pk = 0 AND ck = 2",
        ],
    )
    assert any(s.endswith("SET ud.a = null WHERE pk = 0 AND ck = 0") for s in out)


def test_collection_tombstone_and_element_changes_in_one_row() -> None:
    # one batch, one timestamp: tombstone, removed and added elements in one delta row
    _replayed(
        WIDE,
        [
            "UPDATE ks.t USING TIMESTAMP 10 SET m = {1: 'a', 2: 'b'} WHERE pk = 0 AND ck = 0",
            "BEGIN BATCH "
            "UPDATE ks.t SET m = {3: 'c'} WHERE pk = 0 AND ck = 0; "
            "UPDATE ks.t SET m = m - {4} WHERE pk = 0 AND ck = 0; "
            "APPLY BATCH",
        ],
    )


# -- TTL -----------------------------------------------------------------------------------


def test_insert_with_collection_and_ttl_three_rows() -> None:
    m_statements = [
        "INSERT INTO ks.t (pk, ck, v, m, l, ud) VALUES (0, 0, 1, {1: 'a'}, [1], {a: 2}) "
        "USING TTL 5000"
    ]
    out = _replayed(WIDE, m_statements)
    assert out[0].startswith("INSERT INTO ks.r (pk, ck, v) VALUES (0, 0, 1) USING TIMESTAMP")
    assert out[0].endswith("AND TTL 5000")
    assert "SET l = null, m = null, ud = null" in out[1] and "TTL" not in out[1]
    assert out[2].endswith("WHERE pk = 0 AND ck = 0") and "AND TTL 5000 SET" in out[2]


def test_ttl_writes_with_dead_cells_and_ttl_replayed() -> None:
    m = CoreModel()
    m.run(KS)
    m.run(UDT)
    for t in ("t", "r"):
        m.run(f"CREATE TABLE ks.{t} {WIDE}{CDC if t == 't' else ''}")
    m.run("UPDATE ks.t USING TTL 1000 SET v = 1, w = null, st = st + {1} WHERE pk = 0 AND ck = 0")
    m.run("INSERT INTO ks.t (pk, ck, w) VALUES (0, 1, 'x') USING TTL 2000")
    out = replay_statements(m.table(parse_qualified("ks.t")), _rows(m, "ks.t"), "ks.r")
    for s in out:
        m.run(s)
    assert m.run("SELECT * FROM ks.r") == m.run("SELECT * FROM ks.t")
    assert m.run("SELECT ttl(v), ttl(w) FROM ks.r") == m.run("SELECT ttl(v), ttl(w) FROM ks.t")


# -- batches -------------------------------------------------------------------------------


def test_batch_with_several_timestamps() -> None:
    _replayed(
        WIDE,
        [
            "BEGIN UNLOGGED BATCH "
            "UPDATE ks.t USING TIMESTAMP 20 SET v = 2 WHERE pk = 0 AND ck = 0; "
            "UPDATE ks.t USING TIMESTAMP 10 SET v = 1, s = 3 WHERE pk = 0 AND ck = 1; "
            "INSERT INTO ks.t (pk, ck, w) VALUES (0, 2, 'a') USING TIMESTAMP 20 AND TTL 900; "
            "DELETE FROM ks.t USING TIMESTAMP 15 WHERE pk = 0 AND ck = 3; "
            "DELETE m FROM ks.t USING TIMESTAMP 10 WHERE pk = 0 AND ck = 0; "
            "UPDATE ks.t USING TIMESTAMP 11 SET m = m + {1: 'x'} WHERE pk = 0 AND ck = 0; "
            "APPLY BATCH",
            "BEGIN BATCH USING TIMESTAMP 30 "
            "INSERT INTO ks.t (pk, ck, v) VALUES (1, 0, 1); "
            "DELETE FROM ks.t WHERE pk = 1 AND ck > 5; "
            "UPDATE ks.t SET s = 1 WHERE pk = 1; "
            "APPLY BATCH",
        ],
    )


# -- deletes -------------------------------------------------------------------------------


def test_row_and_partition_deletes() -> None:
    out = _replayed(
        WIDE,
        [
            "INSERT INTO ks.t (pk, ck, v, s) VALUES (0, 0, 1, 1)",
            "INSERT INTO ks.t (pk, ck, v) VALUES (0, 1, 1)",
            "INSERT INTO ks.t (pk, ck, v) VALUES (1, 1, 1)",
            "DELETE FROM ks.t USING TIMESTAMP 1800000000000000 WHERE pk = 0 AND ck = 0",
            "DELETE FROM ks.t USING TIMESTAMP 1800000000000001 WHERE pk = 1",
        ],
    )
    assert out[-2:] == [
        "DELETE FROM ks.r USING TIMESTAMP 1800000000000000 WHERE pk = 0 AND ck = 0",
        "DELETE FROM ks.r USING TIMESTAMP 1800000000000001 WHERE pk = 1",
    ]


RANGE_SHAPE = (
    "(pk int, c1 int, c2 text, v int, PRIMARY KEY (pk, c1, c2)) "
    "WITH CLUSTERING ORDER BY (c1 {o1}, c2 {o2}) AND cdc = "
    "{{'enabled': true, 'preimage': 'full', 'postimage': true}}"
)


@pytest.mark.parametrize("o1", ["ASC", "DESC"])
@pytest.mark.parametrize("o2", ["ASC", "DESC"])
@pytest.mark.parametrize(
    "where",
    [
        "c1 > 1",
        "c1 >= 1 AND c1 < 3",
        "c1 <= 2",
        "c1 = 1",
        "c1 = 1 AND c2 > 'b'",
        "c1 = 2 AND c2 >= 'a' AND c2 <= 'b'",
        "c1 = 0 AND c2 < 'c'",
        "(c1, c2) > (1, 'b')",
        "(c1, c2) >= (0, 'b') AND (c1, c2) < (2, 'a')",
        "(c1, c2) < (3, 'b')",
    ],
)
def test_range_deletes(o1: str, o2: str, where: str) -> None:
    m = CoreModel()
    m.run(KS)
    shape = RANGE_SHAPE.format(o1=o1, o2=o2)
    m.run(f"CREATE TABLE ks.t {shape}")
    m.run(f"CREATE TABLE ks.r {shape.split(' AND cdc')[0]}")
    for c1 in range(4):
        for c2 in "abc":
            m.run(f"INSERT INTO ks.t (pk, c1, c2, v) VALUES (0, {c1}, '{c2}', {c1})")
    m.run(f"DELETE FROM ks.t WHERE pk = 0 AND {where}")
    out = replay_statements(m.table(parse_qualified("ks.t")), _rows(m, "ks.t"), "ks.r")
    for s in out:
        m.run(s)
    assert m.run("SELECT * FROM ks.r") == m.run("SELECT * FROM ks.t")
    assert len(m.run("SELECT * FROM ks.t")) < 12
    assert out[-1].startswith("DELETE FROM ks.r USING TIMESTAMP")


def test_range_end_without_start_is_an_error() -> None:
    m = CoreModel()
    m.run(KS)
    m.run(f"CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck)){CDC}")
    m.run("DELETE FROM ks.t WHERE pk = 0 AND ck > 1")
    rows = _rows(m, "ks.t")
    with pytest.raises(InvalidRequest, match="has no start"):
        replay_statements(m.table(parse_qualified("ks.t")), rows[1:])


def test_default_target_is_the_base_table_and_images_are_skipped() -> None:
    m = CoreModel()
    m.run(KS)
    m.run(f'CREATE TABLE ks."T" (pk int, ck int, "V" int, PRIMARY KEY (pk, ck)){CDC}')
    m.run('INSERT INTO ks."T" (pk, ck, "V") VALUES (0, 0, 1) USING TIMESTAMP 4')
    m.run('UPDATE ks."T" USING TIMESTAMP 5 SET "V" = 2 WHERE pk = 0 AND ck = 0')
    out = replay_statements(m.table(parse_qualified("ks.T")), _rows(m, "ks.T"))
    assert out == [
        'INSERT INTO ks."T" (pk, ck, "V") VALUES (0, 0, 1) USING TIMESTAMP 4',
        'UPDATE ks."T" USING TIMESTAMP 5 SET "V" = 2 WHERE pk = 0 AND ck = 0',
    ]
