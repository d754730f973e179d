"""A dropped column stays dropped: a column added again under its name shows nothing written
before the drop, in reads, images and feeds, on the row path and the bulk path.

The first six tests are ScyllaDB's own (``test/cql-pytest/cassandra_tests/validation/
operations/alter_test.py``, from Cassandra's AlterTest), run through the engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import cqlcdc
from cqlcdc.errors import InvalidRequest

pytestmark = pytest.mark.spark

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture(scope="module")
def session(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = cqlcdc.connect(data_dir=tmp_path_factory.mktemp("dropped") / "data", master="local[2]")
    try:
        s.execute(KS)
        yield s
    finally:
        s.close()


def _rows(result: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in result)


def test_drop_column_as_prepared_statement(session: Any) -> None:
    s = session
    s.execute("CREATE TABLE ks.prep (key int PRIMARY KEY, value int)")
    prepared = s.prepare("ALTER TABLE ks.prep DROP value")
    s.execute("INSERT INTO ks.prep (key, value) VALUES (1, 1)")
    assert _rows(s.execute("SELECT * FROM ks.prep")) == [(1, 1)]
    s.execute(prepared)
    s.execute("ALTER TABLE ks.prep ADD value int")
    assert _rows(s.execute("SELECT * FROM ks.prep")) == [(1, None)]


def test_drop_list_and_add_list_with_same_name(session: Any) -> None:
    s = session
    s.execute("CREATE TABLE ks.l (id text PRIMARY KEY, content text, c list<text>)")
    s.execute("INSERT INTO ks.l (id, content, c) VALUES ('test', 'first test', ['first element'])")
    s.execute("ALTER TABLE ks.l DROP c")
    s.execute("ALTER TABLE ks.l ADD c list<text>")
    assert _rows(s.execute("SELECT * FROM ks.l")) == [("test", None, "first test")]
    s.execute("UPDATE ks.l SET c = ['second element'] WHERE id = 'test'")
    assert _rows(s.execute("SELECT * FROM ks.l")) == [("test", ("second element",), "first test")]


def test_drop_list_and_add_map_with_same_name(session: Any) -> None:
    s = session
    s.execute("CREATE TABLE ks.lm (id text PRIMARY KEY, content text, c list<text>)")
    s.execute("INSERT INTO ks.lm (id, content, c) VALUES ('test', 'first test', ['first element'])")
    s.execute("ALTER TABLE ks.lm DROP c")
    with pytest.raises(InvalidRequest, match="Cannot add a collection with the name c because"):
        s.execute("ALTER TABLE ks.lm ADD c map<int, int>")


def test_drop_with_timestamp(session: Any) -> None:
    s = session
    s.execute("CREATE TABLE ks.ts (id int, c1 int, v1 int, todrop int, PRIMARY KEY (id, c1))")
    insert = "INSERT INTO ks.ts (id, c1, v1, todrop) VALUES (?, ?, ?, ?) USING TIMESTAMP ?"
    for i in range(5):
        s.execute(insert, (1, i, i, i, 10000 * i))
    s.execute("ALTER TABLE ks.ts DROP todrop USING TIMESTAMP 20000")
    s.execute("ALTER TABLE ks.ts ADD todrop int")
    s.execute(insert, (1, 100, 100, 100, 30000))
    assert _rows(s.execute("SELECT id, c1, v1, todrop FROM ks.ts")) == [
        (1, 0, 0, None),
        (1, 1, 1, None),
        (1, 2, 2, None),
        (1, 3, 3, 3),
        (1, 4, 4, 4),
        (1, 100, 100, 100),
    ]


def test_drop_static_with_timestamp(session: Any) -> None:
    s = session
    s.execute(
        "CREATE TABLE ks.st (id int, c1 int, v1 int, todrop int static, PRIMARY KEY (id, c1))"
    )
    insert = "INSERT INTO ks.st (id, c1, v1, todrop) VALUES (?, ?, ?, ?) USING TIMESTAMP ?"
    for i in range(5):
        s.execute(insert, (1, i, i, i, 10000 * i))
    s.execute("ALTER TABLE ks.st DROP todrop USING TIMESTAMP 20000")
    s.execute("ALTER TABLE ks.st ADD todrop int static")
    s.execute(insert, (1, 100, 100, 100, 30000))
    # the static value with the largest timestamp (40000, above the drop) shows again
    assert _rows(s.execute("SELECT id, c1, v1, todrop FROM ks.st")) == [
        (1, c, c, 4) for c in (0, 1, 2, 3, 4, 100)
    ]


def test_drop_multiple_with_timestamp(session: Any) -> None:
    s = session
    s.execute(
        "CREATE TABLE ks.mt (id int, c1 int, v1 int, todrop1 int, todrop2 int, "
        "PRIMARY KEY (id, c1))"
    )
    insert = (
        "INSERT INTO ks.mt (id, c1, v1, todrop1, todrop2) VALUES (?, ?, ?, ?, ?) USING TIMESTAMP ?"
    )
    for i in range(5):
        s.execute(insert, (1, i, i, i, i, 10000 * i))
    s.execute("ALTER TABLE ks.mt DROP (todrop1, todrop2) USING TIMESTAMP 20000")
    s.execute("ALTER TABLE ks.mt ADD todrop1 int")
    s.execute("ALTER TABLE ks.mt ADD todrop2 int")
    s.execute(insert, (1, 100, 100, 100, 100, 40000))
    assert _rows(s.execute("SELECT id, c1, v1, todrop1, todrop2 FROM ks.mt")) == [
        (1, 0, 0, None, None),
        (1, 1, 1, None, None),
        (1, 2, 2, None, None),
        (1, 3, 3, 3, 3),
        (1, 4, 4, 4, 4),
        (1, 100, 100, 100, 100),
    ]


def test_a_readded_column_shows_no_old_value_in_images_on_the_bulk_path(session: Any) -> None:
    """Bulk writes (``execute_many``) into a table with images: the preimage of a row
    written after the drop and re-add does not show the dropped column's value, and a row
    that only the dropped column made live is gone."""
    s = session
    s.execute(
        "CREATE TABLE ks.img (pk int, ck int, v int, w int, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
    )
    insert = s.prepare("INSERT INTO ks.img (pk, ck, v, w) VALUES (?, ?, ?, ?)")
    only_w = s.prepare("UPDATE ks.img SET w = ? WHERE pk = ? AND ck = ?")
    s.execute_many([insert] * 40, [(i, 0, i, 100 + i) for i in range(40)])
    s.execute_many([only_w] * 40, [(200 + i, i, 1) for i in range(40)])  # rows of w alone
    s.execute("ALTER TABLE ks.img DROP w")
    s.execute("ALTER TABLE ks.img ADD w int")
    assert _rows(s.execute("SELECT pk, ck, v, w FROM ks.img")) == [
        (i, 0, i, None) for i in range(40)
    ]
    update = s.prepare("UPDATE ks.img SET v = ? WHERE pk = ? AND ck = ?")
    s.execute_many([update] * 40, [(1000 + i, i, 0) for i in range(40)])
    log = [
        tuple(r) for r in s.execute('SELECT "cdc$operation", pk, v, w FROM ks.img_scylla_cdc_log')
    ]
    # every log row: the base's w was dropped and added again, so the log's w was too:
    # nothing written before the drop shows, in the images or in the deltas
    assert all(w is None for _, _, _, w in log), log
    pre = sorted(r[1:] for r in log if r[0] == 0)
    assert pre == [(i, i, None) for i in range(40)]  # each row's image before the update
    post = sorted(r[1:] for r in log if r[0] == 9 and r[2] is not None and r[2] >= 1000)
    assert post == [(i, 1000 + i, None) for i in range(40)]
    # a filter on the re-added column matches no old value, on the Arrow path or the rows
    assert (
        s.execute("SELECT COUNT(*) FROM ks.img_scylla_cdc_log WHERE w = 103 ALLOW FILTERING").one()[
            0
        ]
        == 0
    )
    assert (
        s.execute("SELECT COUNT(*) FROM ks.img_scylla_cdc_log WHERE v = 3 ALLOW FILTERING").one()[0]
        == 3
    )
    assert _rows(s.execute("SELECT pk, v, w FROM ks.img WHERE pk = 3")) == [(3, 1003, None)]


def test_spark_reads_of_a_readded_column_hide_its_old_values(spark: Any, session: Any) -> None:
    s = session
    s.execute(
        "CREATE TABLE ks.sp (pk int, ck int, v int, w text, PRIMARY KEY (pk, ck)) "
        "WITH cdc = {'enabled': true}"
    )
    for i in range(3):
        s.execute("INSERT INTO ks.sp (pk, ck, v, w) VALUES (?, 0, ?, 'old')", (i, i))
    s.execute("ALTER TABLE ks.sp DROP w")
    s.execute("ALTER TABLE ks.sp ADD w text")
    s.execute("UPDATE ks.sp SET w = 'new' WHERE pk = 0 AND ck = 0")

    def read(table: str) -> Any:
        reader = spark.read.format("cqlcdc").option("path", str(s.data_dir))
        return reader.option("table", table).load()

    base = sorted((r.pk, r.v, r.w) for r in read("ks.sp").collect())
    assert base == [(0, 0, "new"), (1, 1, None), (2, 2, None)]
    log = read("ks.sp_scylla_cdc_log")
    assert sorted(r.w for r in log.collect() if r.w is not None) == ["new"]
    assert log.filter("w = 'old'").count() == 0
    assert log.filter("w = 'new'").count() == 1


def test_a_counter_column_cannot_be_added_again(session: Any) -> None:
    s = session
    s.execute("CREATE TABLE ks.cnt (pk int PRIMARY KEY, a counter, b counter)")
    s.execute("UPDATE ks.cnt SET a = a + 1, b = b + 2 WHERE pk = 1")
    s.execute("ALTER TABLE ks.cnt DROP b")
    with pytest.raises(InvalidRequest, match="Cannot re-add previously dropped counter column b"):
        s.execute("ALTER TABLE ks.cnt ADD b counter")
    assert _rows(s.execute("SELECT * FROM ks.cnt")) == [(1, 1)]
