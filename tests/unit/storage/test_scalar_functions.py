"""The conversion functions (``<type>AsBlob``, ``blobAs<type>``) and the time functions, in
writes, WHERE clauses and selectors (cqlpy's test_counter, cassandra_tests' select, update
and delete tests, which build blobs with ``textAsBlob``)."""

from __future__ import annotations

import pytest

from cqlcdc.errors import InvalidRequest
from tests.core_model import CoreModel

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


@pytest.fixture
def model() -> CoreModel:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (k int PRIMARY KEY, b blob, i int, t text, u timeuuid, c bigint)")
    return m


def test_conversions_in_writes_and_where(model: CoreModel) -> None:
    model.run(
        "INSERT INTO ks.t (k, b, i, t) VALUES "
        "(0, textAsBlob('foo'), blobAsInt(0x00000005), system.blobAsText(0x6869))"
    )
    assert model.run("SELECT b, i, t FROM ks.t WHERE k = blobAsInt(intAsBlob(0))") == [
        (b"foo", 5, "hi")
    ]
    with pytest.raises(InvalidRequest, match="value 0x0005 is not a valid binary representation"):
        model.run("INSERT INTO ks.t (k, i) VALUES (1, blobAsInt(0x0005))")
    with pytest.raises(InvalidRequest, match=r"cannot assign result of function system\.intasblob"):
        model.run("INSERT INTO ks.t (k, i) VALUES (1, intAsBlob(1))")
    with pytest.raises(InvalidRequest, match="Unknown function nosuchasblob"):
        model.run("INSERT INTO ks.t (k, b) VALUES (1, nosuchasblob(1))")


def test_functions_as_selectors(model: CoreModel) -> None:
    model.run(
        "INSERT INTO ks.t (k, b, i, u, c) VALUES "
        "(0, 0x00000007, 5, 5d2d2680-7b9d-11ef-8000-000000000000, 1000)"
    )
    got = model.run(
        "SELECT blobAsInt(intAsBlob(i)), intasblob(i), blobAsInt(b), dateOf(u), "
        "toUnixTimestamp(u), bigintasblob(c), blobAsInt(0x00000003), max(blobAsInt(b)) FROM ks.t"
    )
    expected_ms = 1727310127509
    assert got == [
        (5, b"\x00\x00\x00\x05", 7, expected_ms, expected_ms, (1000).to_bytes(8, "big"), 3, 7)
    ]
    with pytest.raises(InvalidRequest, match="counterasblob"):  # test_counter_to_blob
        model.run("SELECT counterasblob(c) FROM ks.t")
    with pytest.raises(InvalidRequest, match="cannot be passed as argument 0 of function"):
        model.run("SELECT dateOf(c) FROM ks.t")


def test_order_by_needs_the_partition_key_and_puts_static_only_partitions_first() -> None:
    """ScyllaDB's verify_ordering_is_allowed; a partition with only a static row has no
    clustering key and sorts before the rest (select_order_by_test's IN with a null value)."""
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (a int, b int, c int, s int static, PRIMARY KEY (a, b, c))")
    for a, b, c in ((1, 1, 1), (1, 1, 2), (2, 2, 1)):
        m.run(f"INSERT INTO ks.t (a, b, c) VALUES ({a}, {b}, {c})")
    m.run("UPDATE ks.t SET s = 3 WHERE a = 3")
    rows = m.run("SELECT a, b, c FROM ks.t WHERE a IN (1, 2, 3) ORDER BY b DESC, c DESC")
    assert rows == [(2, 2, 1), (1, 1, 2), (1, 1, 1), (3, None, None)]
    rows = m.run("SELECT a, b, c FROM ks.t WHERE a IN (1, 2, 3) ORDER BY b, c")
    assert rows == [(3, None, None), (1, 1, 1), (1, 1, 2), (2, 2, 1)]
    with pytest.raises(InvalidRequest, match="ORDER BY is only supported when the partition"):
        m.run("SELECT * FROM ks.t ORDER BY b")


def test_casts_take_ascii_into_text_but_not_across_representations() -> None:
    """update_test's testTypeCasts: ``(ascii)'x'`` is a text value, ``(text)'x'`` is not an
    ascii one, and int and double casts do not mix."""
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (k int PRIMARY KEY, t text, a ascii, d double, i int)")
    m.run("UPDATE ks.t SET t = (text)(ascii)'foo', a = (ascii)'bar' WHERE k = 0")
    m.run("UPDATE ks.t SET i = (int)3, d = (double)3 WHERE k = 0")
    assert m.run("SELECT t, a, i, d FROM ks.t") == [("foo", "bar", 3, 3.0)]
    for bad in ("a = (text)'foo'", "d = (int)3", "i = (double)3"):
        with pytest.raises(InvalidRequest, match="Cannot assign value"):
            m.run(f"UPDATE ks.t SET {bad} WHERE k = 0")
