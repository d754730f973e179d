"""Storage core: tokens, timeuuids, reconciliation, shadowing, mutation rules."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cqlcdc.cql import parse_statement
from cqlcdc.storage.cells import Cell, RowMarker
from cqlcdc.storage.token import MAX_TOKEN, bucket_of, murmur3_token
from cqlcdc.storage.uuids import SeededBits, micros_of, random_time_uuid, timeuuid_from_micros
from tests.core_model import CoreModel, parse_qualified

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


# Token values of the cassandra-driver's Murmur3 implementation (its unit tests).
@pytest.mark.parametrize(
    ("data", "token"),
    [
        (b"123", -7468325962851647638),
        (b"\x00\xff\x10\xfa\x99" * 10, 5837342703291459765),
        (b"\xfe" * 8, -8927430733708461935),
        (b"\x10" * 8, 1446172840243228796),
        (str(MAX_TOKEN).encode(), 7162290910810015547),
    ],
)
def test_murmur3_matches_cassandra(data: bytes, token: int) -> None:
    assert murmur3_token(data) == token


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.integers(1, 64))
def test_buckets_are_ordered_token_ranges(token: int, n: int) -> None:
    b = bucket_of(token, n)
    assert 0 <= b < n
    if token < 2**63 - 1:
        assert bucket_of(token + 1, n) >= b


@given(st.integers(min_value=0, max_value=2**55), st.integers(0, 2**64 - 1))
def test_cdc_time_carries_the_write_timestamp(micros: int, seed: int) -> None:
    u = random_time_uuid(micros, SeededBits(seed, "t"))
    assert micros_of(u) == micros
    assert u == random_time_uuid(micros, SeededBits(seed, "t"))  # replays are identical


def test_timeuuid_from_micros_is_rfc_v1() -> None:
    u = timeuuid_from_micros(1606390225588947, 0x1234, 1)
    assert u.version == 1 and u.variant == uuid.RFC_4122
    assert micros_of(u) == 1606390225588947


def test_reconcile_rules() -> None:
    assert Cell(2, 1).reconcile(Cell(1, 2)).value == 1  # higher timestamp wins
    assert Cell(1, 1).reconcile(Cell(1, None)).value is None  # tie: tombstone wins
    assert Cell(1, 1, 5, 100).reconcile(Cell(1, 1)).expiry_s == 0  # tie: later expiry wins
    assert RowMarker(3).reconcile(RowMarker(2)).timestamp == 3


def test_row_liveness_marker_vs_cells() -> None:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    m.run("UPDATE ks.t SET v = 1 WHERE pk = 0 AND ck = 0")
    m.run("UPDATE ks.t SET v = null WHERE pk = 0 AND ck = 0")
    assert m.run("SELECT * FROM ks.t") == []
    m.run("INSERT INTO ks.t (pk, ck) VALUES (0, 1)")
    assert m.run("SELECT * FROM ks.t") == [(0, 1, None)]


def test_collection_overwrite_tombstone_is_t_minus_1() -> None:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (pk int, ck int, v map<int, text>, PRIMARY KEY (pk, ck))")
    m.run(
        "BEGIN UNLOGGED BATCH UPDATE ks.t SET v = v + {1: 'a'} WHERE pk = 0 AND ck = 0; "
        "UPDATE ks.t SET v = {} WHERE pk = 0 AND ck = 0; APPLY BATCH"
    )
    assert [dict(r[2]) for r in m.run("SELECT * FROM ks.t")] == [{1: "a"}]
    m.run(
        "BEGIN UNLOGGED BATCH DELETE v FROM ks.t WHERE pk = 1 AND ck = 0; "
        "UPDATE ks.t SET v = v + {1: 'a'} WHERE pk = 1 AND ck = 0; APPLY BATCH"
    )
    assert m.run("SELECT * FROM ks.t WHERE pk = 1") == []


def test_range_and_partition_tombstones_shadow_older_rows_only() -> None:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (pk int, ck int, v int, PRIMARY KEY (pk, ck))")
    for ck in range(4):
        m.run(f"INSERT INTO ks.t (pk, ck, v) VALUES (0, {ck}, {ck})")
    m.run("DELETE FROM ks.t WHERE pk = 0 AND ck > 0 AND ck <= 2")
    assert [r[1] for r in m.run("SELECT * FROM ks.t")] == [0, 3]
    m.run("INSERT INTO ks.t (pk, ck, v) VALUES (0, 1, 10)")  # newer than the tombstone
    assert [r[1] for r in m.run("SELECT * FROM ks.t")] == [0, 1, 3]
    m.run("DELETE FROM ks.t USING TIMESTAMP 1 WHERE pk = 0")  # older than everything
    assert len(m.run("SELECT * FROM ks.t")) == 3
    m.run("DELETE FROM ks.t WHERE pk = 0")
    assert m.run("SELECT * FROM ks.t") == []


def test_list_operations_resolve_against_state() -> None:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (pk int PRIMARY KEY, l list<int>)")
    m.run("UPDATE ks.t SET l = [1, 2, 1, 3] WHERE pk = 0")
    m.run("UPDATE ks.t SET l = l - [1] WHERE pk = 0")
    assert m.run("SELECT l FROM ks.t") == [((2, 3),)]
    m.run("UPDATE ks.t SET l = [0] + l WHERE pk = 0")
    m.run("UPDATE ks.t SET l[1] = 20 WHERE pk = 0")
    m.run("DELETE l[2] FROM ks.t WHERE pk = 0")
    assert m.run("SELECT l FROM ks.t") == [((0, 20),)]


def test_static_row_shows_with_and_without_clustering_rows() -> None:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (pk int, ck int, s int static, c int, PRIMARY KEY (pk, ck))")
    m.run("UPDATE ks.t SET s = 0 WHERE pk = 0")
    assert m.run("SELECT * FROM ks.t WHERE pk = 0") == [(0, None, 0, None)]
    m.run("UPDATE ks.t SET c = 1 WHERE pk = 0 AND ck = 1")
    assert m.run("SELECT * FROM ks.t WHERE pk = 0") == [(0, 1, 0, 1)]


def test_counters_add_and_cannot_be_set() -> None:
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.c (pk int PRIMARY KEY, n counter)")
    m.run("UPDATE ks.c SET n = n + 5 WHERE pk = 0")
    m.run("UPDATE ks.c SET n = n - 2 WHERE pk = 0")
    assert m.run("SELECT n FROM ks.c") == [(3,)]
    with pytest.raises(InvalidRequest, match="Cannot set the value of counter column n"):
        m.run("UPDATE ks.c SET n = 1 WHERE pk = 0")
    with pytest.raises(InvalidRequest, match="INSERT statements are not allowed on counter"):
        m.run("INSERT INTO ks.c (pk, n) VALUES (1, 1)")


def test_counters_wrap_at_64_bits() -> None:
    """Cassandra and ScyllaDB sum counters in 64-bit two's complement: an overflowing
    increment wraps, and the row stays readable (in one mutation and across mutations)."""
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.c (pk int PRIMARY KEY, n counter)")
    big = 2**63 - 1
    m.run(f"UPDATE ks.c SET n = n + {big} WHERE pk = 0")
    m.run(f"UPDATE ks.c SET n = n + {big} WHERE pk = 0")
    assert m.run("SELECT n FROM ks.c WHERE pk = 0") == [(-2,)]
    m.run(f"BEGIN COUNTER BATCH UPDATE ks.c SET n = n + {big} WHERE pk = 1; "
          f"UPDATE ks.c SET n = n + 2 WHERE pk = 1; APPLY BATCH")  # fmt: skip
    assert m.run("SELECT n FROM ks.c WHERE pk = 1") == [(-(2**63) + 1,)]
    m.run(f"UPDATE ks.c SET n = n - {-(2**63)} WHERE pk = 2")  # minus the smallest bigint
    assert m.run("SELECT n FROM ks.c WHERE pk = 2") == [(-(2**63),)]


@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=6))
def test_counter_sums_are_wrapped_sums(deltas: list[int]) -> None:
    from cqlcdc.storage.cells import CounterCell, wrap_int64

    total = CounterCell(0, 0)
    for delta in deltas:
        total = total.add(CounterCell(1, delta))
    assert -(2**63) <= total.value < 2**63
    assert (total.value - sum(deltas)) % 2**64 == 0
    assert wrap_int64(sum(deltas)) == total.value


def test_select_distinct_partition_keys() -> None:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (pk int, ck int, s int static, PRIMARY KEY (pk, ck))")
    for pk, ck in [(1, 1), (1, 2), (2, 1)]:
        m.run(f"INSERT INTO ks.t (pk, ck, s) VALUES ({pk}, {ck}, {pk * 10})")
    assert sorted(m.run("SELECT DISTINCT pk, s FROM ks.t")) == [(1, 10), (2, 20)]


# What ScyllaDB refuses in writes that name static columns or leave out the clustering key
# (cql-pytest: test_null.py::test_insert_missing_key, test_lwt.py::test_lwt_static_condition,
# cassandra_tests update_test/delete_test ...WithAStaticColumn): each was accepted before,
# the first storing nothing, or failed with a server error.
@pytest.mark.parametrize(
    ("cql", "message"),
    [
        ("INSERT INTO ks.t (p) VALUES (1)", "Missing mandatory PRIMARY KEY part c"),
        ("INSERT INTO ks.t (p, v) VALUES (1, 1)", "Missing mandatory PRIMARY KEY part c"),
        ("UPDATE ks.t SET s = 3 WHERE p = 1 IF r = null", "Missing mandatory PRIMARY KEY part c"),
        (
            "UPDATE ks.t SET s = 5 WHERE p = 0 AND c = 0",
            "Invalid restrictions on clustering columns since the UPDATE statement modifies "
            "only static columns",
        ),
        (
            "UPDATE ks.t SET s = 6 WHERE p = 0 AND c > 0",
            "Invalid restrictions on clustering columns since the UPDATE statement modifies "
            "only static columns",
        ),
        ("UPDATE ks.t SET v = 6 WHERE p = 0 AND c > 0", "Invalid operator in where clause c > 0"),
        (
            "DELETE s FROM ks.t WHERE p = 0 AND c IN (0, 1)",
            "Invalid restrictions on clustering columns since the DELETE statement modifies "
            "only static columns",
        ),
    ],
)
def test_writes_scylla_refuses_for_their_clustering_key(cql: str, message: str) -> None:
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (p int, c int, r int, v int, s int static, PRIMARY KEY (p, c))")
    with pytest.raises(InvalidRequest, match=f"^{message}$"):
        m.run(cql)
    # and what it takes: static columns alone by the partition key, a row by its full key
    m.run("INSERT INTO ks.t (p, s) VALUES (1, 1)")
    m.run("UPDATE ks.t SET s = 3 WHERE p = 1 IF s = 1")
    m.run("UPDATE ks.t SET s = 2, v = 2 WHERE p = 1 AND c = 0")
    m.run("DELETE s FROM ks.t WHERE p = 1")
    assert m.run("SELECT p, c, s, v FROM ks.t") == [(1, 0, None, 2)]


def test_in_on_the_partition_key_reads_partitions_in_key_order_and_orders_across_them() -> None:
    """ScyllaDB sorts a partition-key IN's values and reads them in that order; ORDER BY
    then orders the rows of all of them (cassandra_tests select_order_by_test:
    testInOrderByWithTwoPartitionKeyColumns, select_test: testPartitionKeyColumnRelations)."""
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (c1 int, c2 int, c3 int, PRIMARY KEY ((c1, c2), c3))")
    for row in [(1, 1, 1), (1, 1, 2), (1, 1, 13), (1, 2, 10), (1, 2, 11)]:
        m.run(f"INSERT INTO ks.t (c1, c2, c3) VALUES {row}")
    where = "WHERE c1 = 1 AND c2 IN (2, 1)"
    assert [r[2] for r in m.run(f"SELECT * FROM ks.t {where}")] == [1, 2, 13, 10, 11]
    assert [r[2] for r in m.run(f"SELECT * FROM ks.t {where} ORDER BY c3")] == [1, 2, 10, 11, 13]
    assert [r[2] for r in m.run(f"SELECT * FROM ks.t {where} ORDER BY c3 DESC LIMIT 3")] == [
        13,
        11,
        10,
    ]
    m.run("CREATE TABLE ks.p (p int PRIMARY KEY)")
    for p in range(5):
        m.run(f"INSERT INTO ks.p (p) VALUES ({p})")
    assert m.run("SELECT p FROM ks.p WHERE p IN (4, 0, 3, 1, 3)") == [(0,), (1,), (3,), (4,)]


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        ("SELECT ttl(l) FROM ks.c WHERE k = 0", "TTL expects an atomic column, but l is a "),
        ("SELECT writetime(u) FROM ks.c WHERE k = 0", "WRITETIME expects an atomic column"),
        ("SELECT writetime(k) FROM ks.c", "Cannot use selection function writetime on PRIMARY"),
    ],
)
def test_writetime_and_ttl_take_only_atomic_columns(cql: str, message: str) -> None:
    """A non-frozen collection's cells each have their own time (collections_test:
    testFunctionsOnCollections): refused, not answered with null."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TYPE ks.ut (a int)")
    m.run("CREATE TABLE ks.c (k int PRIMARY KEY, l set<int>, u ut, f frozen<set<int>>)")
    m.run("INSERT INTO ks.c (k, l, u, f) VALUES (0, {1}, {a: 1}, {2}) USING TTL 1000")
    with pytest.raises(InvalidRequest, match=message):
        m.run(cql)
    assert m.run("SELECT ttl(f) FROM ks.c WHERE k = 0")[0][0] > 0  # a frozen one is atomic


def test_filtering_on_a_map_entry_or_a_list_element() -> None:
    """ScyllaDB's test_filtering.py::test_filtering_with_subscript, on the core."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run(
        "CREATE TABLE ks.t (p int PRIMARY KEY, m1 map<int, int>, m2 map<text, text>, "
        "s set<int>, l list<text>, fm frozen<map<int, int>>)"
    )
    m.run("INSERT INTO ks.t (p, m1, m2, fm) VALUES (1, {1:2, 3:4}, {'dog':'cat'}, {1:2})")
    m.run("INSERT INTO ks.t (p, m1, m2) VALUES (2, {2:3, 4:5}, {'black':'white'})")
    m.run("INSERT INTO ks.t (p, l) VALUES (11, ['zero', 'one', 'two'])")

    def ps(where: str) -> list[int]:
        return sorted(r[0] for r in m.run(f"SELECT p FROM ks.t WHERE {where} ALLOW FILTERING"))

    assert ps("m1[1] = 2") == [1]
    assert ps("m2['black'] = 'white'") == [2]
    assert ps("m1[3] > 3") == [1]
    assert ps("m1[null] = 2") == []
    assert ps("fm[1] = 2") == [1]
    assert ps("l[1] = 'one'") == [11]
    assert ps("l[-5] = 'x'") == ps("l[3] = 'three'") == []
    with pytest.raises(InvalidRequest, match="cannot be subscripted"):
        ps("s[2] = 3")
    with pytest.raises(InvalidRequest, match=r"key\(m1\)"):
        ps("m1['black'] = 2")
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        m.run("SELECT p FROM ks.t WHERE m1[1] = 2")


def test_allow_filtering_filters_clustering_restrictions_that_skip_a_column() -> None:
    """ScyllaDB filters a clustering restriction that does not extend the restricted prefix
    when the query allows filtering (test_allow_filtering.py::test_allow_filtering_prefix),
    and refuses it otherwise."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (p int, c1 int, c2 int, v int, PRIMARY KEY (p, c1, c2))")
    for p in range(2):
        for c1 in range(3):
            for c2 in range(3):
                m.run(f"INSERT INTO ks.t (p, c1, c2, v) VALUES ({p}, {c1}, {c2}, 0)")

    def keys(where: str) -> list[tuple[int, int, int]]:
        return sorted(r[:3] for r in m.run(f"SELECT p, c1, c2 FROM ks.t WHERE {where}"))

    assert keys("p = 0 AND c2 > 1 ALLOW FILTERING") == [(0, c1, 2) for c1 in range(3)]
    assert keys("c2 = 1 ALLOW FILTERING") == [(p, c1, 1) for p in range(2) for c1 in range(3)]
    assert keys("p = 1 AND c1 > 0 AND c2 IN (0, 2) ALLOW FILTERING") == [
        (1, 1, 0),
        (1, 1, 2),
        (1, 2, 0),
        (1, 2, 2),
    ]
    with pytest.raises(InvalidRequest, match='PRIMARY KEY column "c2" cannot be restricted'):
        keys("p = 0 AND c2 > 1")


def test_a_read_compares_with_null_as_sql_does() -> None:
    """ScyllaDB's test_null.py: ``v = NULL``, ``i > NULL``, ``s CONTAINS NULL``, ``m
    CONTAINS KEY NULL`` match nothing (with ALLOW FILTERING, which they still need), and
    ``p IN ?`` bound to null reads nothing; a write still refuses a null key."""
    from cqlcdc.errors import InvalidRequest
    from cqlcdc.storage.mutations import WriteContext
    from cqlcdc.storage.select import prepare

    m = CoreModel()
    m.run(KS)
    m.run(
        "CREATE TABLE ks.t (p text, c text, v text, i int, s set<int>, m map<int, int>, "
        "PRIMARY KEY (p, c))"
    )
    m.run("INSERT INTO ks.t (p, c, v, i, s, m) VALUES ('x', 'a', 'v', 1, {1}, {1: 1})")
    m.run("INSERT INTO ks.t (p, c) VALUES ('x', 'b')")
    for where in ("v = NULL", "i > NULL", "i <= NULL", "s CONTAINS NULL", "m CONTAINS KEY NULL"):
        assert m.run(f"SELECT c FROM ks.t WHERE p = 'x' AND {where} ALLOW FILTERING") == []
        with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
            m.run(f"SELECT c FROM ks.t WHERE p = 'x' AND {where}")
    schema = m.table(parse_qualified("ks.t"))
    stmt = parse_statement("SELECT p FROM ks.t WHERE p IN ?")
    res = prepare(schema, stmt, WriteContext(0, 0, 0, bindings=[None]))  # type: ignore[arg-type]
    assert res.partition_keys == []
    with pytest.raises(InvalidRequest, match="null value"):
        m.run("DELETE FROM ks.t WHERE p = null")


def test_a_token_bound_may_be_the_token_of_key_values() -> None:
    """``token(k) >= token(3)`` (select_test: testTokenRange): the bound is the token of
    the partition key made of the given values."""
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (k int PRIMARY KEY)")
    for k in range(8):
        m.run(f"INSERT INTO ks.t (k) VALUES ({k})")
    in_token_order = [r[0] for r in m.run("SELECT k FROM ks.t")]
    for k in range(8):
        at = in_token_order.index(k)
        got = [r[0] for r in m.run(f"SELECT k FROM ks.t WHERE token(k) >= token({k})")]
        assert got == in_token_order[at:]
        got = [r[0] for r in m.run(f"SELECT k FROM ks.t WHERE token(k) < token({k})")]
        assert got == in_token_order[:at]


def test_multi_column_in_restricts_clustering_prefixes() -> None:
    """``(c1, c2) IN ((0, 1), (1, 0))`` in reads and writes (select_multi_column_relation
    and delete tests), literal or bound as one list of tuples."""
    from cqlcdc.storage.mutations import WriteContext
    from cqlcdc.storage.select import prepare

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (p int, c1 int, c2 int, v int, PRIMARY KEY (p, c1, c2))")
    for c1 in range(2):
        for c2 in range(2):
            m.run(f"INSERT INTO ks.t (p, c1, c2, v) VALUES (0, {c1}, {c2}, 0)")

    def keys(where: str) -> list[tuple[int, int]]:
        return [r[:2] for r in m.run(f"SELECT c1, c2 FROM ks.t WHERE p = 0 AND {where}")]

    assert keys("(c1, c2) IN ((1, 0), (0, 1), (1, 0))") == [(0, 1), (1, 0)]
    schema = m.table(parse_qualified("ks.t"))
    stmt = parse_statement("SELECT c1 FROM ks.t WHERE p = 0 AND (c1, c2) IN ?")
    res = prepare(schema, stmt, WriteContext(0, 0, 0, bindings=[[(1, 1), (0, 0)]]))  # type: ignore[arg-type]
    assert sorted(res.ck_prefixes) == [(0, 0), (1, 1)]
    stmt = parse_statement("SELECT c1 FROM ks.t WHERE p = 0 AND (c1, c2) IN (?, ?)")
    res = prepare(schema, stmt, WriteContext(0, 0, 0, bindings=[(1, 1), (0, 0)]))  # type: ignore[arg-type]
    assert sorted(res.ck_prefixes) == [(0, 0), (1, 1)]  # a marker per tuple
    m.run("DELETE FROM ks.t WHERE p = 0 AND (c1, c2) IN ((0, 0), (1, 1))")
    assert keys("c1 >= 0") == [(0, 1), (1, 0)]


def test_one_column_tuples_are_multi_column_relations() -> None:
    """``(c1) = (0)`` and ``(c1) > (?)`` compare one-element tuples (delete_test, update_test,
    select_multi_column_relation_test): they read, update and delete what ``c1 = 0`` would;
    a tuple bound to ``(c1, c2) > ?`` bounds the slice."""
    from cqlcdc.storage.mutations import WriteContext
    from cqlcdc.storage.select import prepare

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (p int, c1 int, c2 int, v int, PRIMARY KEY (p, c1, c2))")
    for c1 in range(3):
        m.run(f"INSERT INTO ks.t (p, c1, c2, v) VALUES (0, {c1}, {c1}, 0)")

    def keys(where: str) -> list[int]:
        return [r[0] for r in m.run(f"SELECT c1 FROM ks.t WHERE p = 0 AND {where}")]

    assert keys("(c1) = (1)") == [1]
    assert keys("(c1) > (0)") == [1, 2]
    assert keys("(c1) IN ((0), (2))") == [0, 2]
    m.run("UPDATE ks.t SET v = 7 WHERE p = 0 AND (c1, c2) = (2, 2)")
    assert m.run("SELECT v FROM ks.t WHERE p = 0 AND (c1, c2) = (2, 2)") == [(7,)]
    m.run("DELETE FROM ks.t WHERE p = 0 AND (c1) = (1)")
    assert keys("c1 >= 0") == [0, 2]
    schema = m.table(parse_qualified("ks.t"))
    stmt = parse_statement("SELECT c1 FROM ks.t WHERE p = 0 AND (c1, c2) > ?")
    res = prepare(schema, stmt, WriteContext(0, 0, 0, bindings=[(0, 0)]))  # type: ignore[arg-type]
    assert res.ck_ranges and res.ck_ranges[0][0].prefix == (0, 0)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("(c1) = (0) AND (c1) > (0)", "c1 cannot be restricted by more than one relation if it"),
        ("(c1) > (0) AND (c1) > (1)", "More than one restriction was found for the start bound"),
        ("(c1) > (0) AND c1 < 2", "Mixing single column relations and multi column relations"),
        ("(p, c1) = (0, 0)", "can only be applied to clustering columns but was applied to: p"),
        ("(c2, c1) = (0, 0)", "Clustering columns may not be skipped in multi-column relations"),
        ("(c1, c2) > (0, 0, 1)", r"Expected 2 elements in value tuple, but got 3: \(0, 0, 1\)"),
        ("(c1, x) = (0, 0)", r"Undefined name x in where clause \('\(c1, x\) = \(0, 0\)'\)"),
        ("(c1, c2) > (0, null)", "Invalid null value in condition for column c2"),
    ],
)
def test_multi_column_relations_are_checked_as_scylla_does(where: str, message: str) -> None:
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (p int, c1 int, c2 int, v int, PRIMARY KEY (p, c1, c2))")
    with pytest.raises(InvalidRequest, match=message):
        m.run(f"SELECT * FROM ks.t WHERE p = 0 AND {where}")


def test_select_a_udt_field_or_a_collection_element() -> None:
    """``SELECT u.a, m[k], l[i], s[e]`` (user_types_test, collections tests): the field or
    element, null where the value has none."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TYPE ks.ut (a int, b text)")
    m.run(
        "CREATE TABLE ks.t (k int PRIMARY KEY, u ut, fu frozen<ut>, m map<int, text>, "
        "l list<text>, s set<int>)"
    )
    m.run(
        "INSERT INTO ks.t (k, u, fu, m, l, s) VALUES (1, {a: 1, b: 'x'}, {a: 2}, "
        "{1: 'one', 2: 'two'}, ['p', 'q'], {5, 6})"
    )
    m.run("INSERT INTO ks.t (k) VALUES (2)")
    assert m.run("SELECT k, u.a, u.b, fu.a, fu.b FROM ks.t WHERE k IN (1, 2)") == [
        (1, 1, "x", 2, None),
        (2, None, None, None, None),
    ]
    assert m.run("SELECT m[2], m[3], l[1], l[5], s[6], s[7] FROM ks.t WHERE k = 1") == [
        ("two", None, "q", None, 6, None)
    ]
    with pytest.raises(InvalidRequest, match="is not a user type"):
        m.run("SELECT k.a FROM ks.t")
    with pytest.raises(InvalidRequest, match=r'for "key\(m\)" of type int'):
        m.run("SELECT m['x'] FROM ks.t")


def test_a_key_compared_with_null_reads_nothing() -> None:
    """ScyllaDB's test_aggregate.py::test_count_empty_eq_null and test_count_empty_in:
    ``p = null`` and ``p IN ()`` name no partition (aggregates still give their row); a
    write still refuses a null key."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (p int, c int, v int, PRIMARY KEY (p, c))")
    m.run("INSERT INTO ks.t (p, c, v) VALUES (1, 1, 1)")
    assert m.run("SELECT count(*) FROM ks.t WHERE p = null") == [(0,)]
    assert m.run("SELECT count(*), count(v), min(v), sum(v) FROM ks.t WHERE p = null") == [
        (0, 0, None, 0)
    ]
    assert m.run("SELECT count(*) FROM ks.t WHERE p IN ()") == [(0,)]
    assert m.run("SELECT * FROM ks.t WHERE p = 1 AND c = null") == []
    with pytest.raises(InvalidRequest, match="null value"):
        m.run("DELETE FROM ks.t WHERE p = null")


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        ("SELECT * FROM ks.t WHERE v != 1 ALLOW FILTERING", 'Unsupported "!=" relation: v != 1'),
        ("SELECT * FROM ks.t WHERE token(p) != 0", r'Unsupported "!=" relation: token\(p\) != 0'),
        (
            "SELECT * FROM ks.t WHERE p = 0 AND s = {1} ALLOW FILTERING",
            r"Collection column 's' \(set<int>\) cannot be restricted by a '=' relation",
        ),
        (
            "SELECT * FROM ks.t WHERE p = 0 AND c1 > 0 AND c2 = 1",
            r'Clustering column "c2" cannot be restricted \(preceding column "c1" is restricted '
            "by a non-EQ relation",
        ),
        (
            "DELETE FROM ks.t WHERE token(p) > 0",
            r"The token function cannot be used in WHERE clauses for UPDATE and DELETE "
            r"statements: token\(p\) > 0",
        ),
        (
            "UPDATE ks.t SET v = 1 WHERE p = 0 AND c1 = 0 AND c2 = 0 AND v = 1",
            "Invalid where clause contains non PRIMARY KEY columns: v",
        ),
        (
            "DELETE FROM ks.t WHERE p = 0 AND f CONTAINS 1",
            "Cannot restrict clustering columns by a CONTAINS relation",
        ),
        ("DELETE FROM ks.u WHERE p1 = 0", "Some partition key parts are missing: p2$"),
    ],
)
def test_where_clauses_scylla_refuses(cql: str, message: str) -> None:
    """ScyllaDB's messages for relations it refuses in reads and writes (cqlpy's
    test_filtering, cassandra_tests' select, update and delete tests)."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run(
        "CREATE TABLE ks.t (p int, c1 int, c2 int, f frozen<set<int>>, v int, s set<int>, "
        "PRIMARY KEY (p, c1, c2, f))"
    )
    m.run("CREATE TABLE ks.u (p1 int, p2 int, v int, PRIMARY KEY ((p1, p2)))")
    with pytest.raises(InvalidRequest, match=message):
        m.run(cql)


def test_order_by_may_skip_clustering_columns_fixed_by_equality() -> None:
    """select_order_by_test's testAllowSkippingEqualityAndSingleValueInRestrictedClusteringColumns:
    ScyllaDB's verify_ordering_is_valid."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (a int, b int, c int, d int, PRIMARY KEY (a, b, c))")
    for b in range(2):
        for c in range(3):
            m.run(f"INSERT INTO ks.t (a, b, c, d) VALUES (0, {b}, {c}, {b * 3 + c})")
    assert m.run("SELECT d FROM ks.t WHERE a = 0 AND b = 0 ORDER BY c DESC") == [(2,), (1,), (0,)]
    assert m.run("SELECT d FROM ks.t WHERE a = 0 AND b = 1 AND c IN (1, 2) ORDER BY c DESC") == [
        (5,),
        (4,),
    ]
    assert m.run("SELECT d FROM ks.t WHERE a = 0 AND (b, c) = (1, 0) ORDER BY c DESC") == [(3,)]
    for where, message in (
        ("ORDER BY d", "only supported on the clustered columns of the PRIMARY KEY, got d"),
        ("AND b < 1 ORDER BY c", "column b doesn't have an ordering or EQ relation"),
        ("ORDER BY b DESC, c ASC", "but column c has opposite ordering"),
        ("ORDER BY c, b", "following their declared order in the PRIMARY KEY"),
    ):
        with pytest.raises(InvalidRequest, match=message):
            m.run(f"SELECT d FROM ks.t WHERE a = 0 {where}")


def test_select_distinct_takes_only_partition_key_restrictions() -> None:
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (k int, a int, b int, s int static, PRIMARY KEY (k, a))")
    m.run("INSERT INTO ks.t (k, a, b, s) VALUES (1, 1, 1, 1)")
    assert m.run("SELECT DISTINCT k FROM ks.t WHERE k = 1") == [(1,)]
    assert m.run("SELECT DISTINCT k, s FROM ks.t WHERE s = 1 ALLOW FILTERING") == [(1, 1)]
    for where in (
        "WHERE a >= 1 ALLOW FILTERING",
        "WHERE k = 1 AND a = 1",
        "WHERE b = 1 ALLOW FILTERING",
    ):
        with pytest.raises(InvalidRequest, match="SELECT DISTINCT with WHERE clause only"):
            m.run(f"SELECT DISTINCT k FROM ks.t {where}")
    with pytest.raises(InvalidRequest, match="PER PARTITION LIMIT is not allowed with SELECT"):
        m.run("SELECT DISTINCT k FROM ks.t PER PARTITION LIMIT 1")


def test_token_selector_and_duration_slices_are_checked() -> None:
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (k1 uuid, k2 text, d duration, PRIMARY KEY ((k1, k2)))")
    with pytest.raises(InvalidRequest, match="k2 cannot be passed as argument 0 of function"):
        m.run("SELECT token(k2, k1) FROM ks.t")
    with pytest.raises(InvalidRequest, match=r"system\.token: 2 required but 1 provided"):
        m.run("SELECT token(k1) FROM ks.t")
    with pytest.raises(InvalidRequest, match="Duration type is unordered for d"):
        m.run("SELECT * FROM ks.t WHERE d > 1s ALLOW FILTERING")
    with pytest.raises(InvalidRequest, match="Key length of 70020 is longer than maximum"):
        k1 = "5d2d2680-7b9d-11ef-8000-000000000000"
        m.run(f"SELECT * FROM ks.t WHERE k1 = {k1} AND k2 = '{'x' * 70000}'")


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("c = 0 AND c > 0", []),
        ("c > 0 AND c = 1", [1]),
        ("c = 1 AND c = 1", [1]),
        ("c = 0 AND c = 1", []),
        ("c > 0 AND c > 1", [2]),
        ("c >= 1 AND c > 1", [2]),
        ("c > 1 AND c < 1", []),
        ("c = 2 AND c IN (2, 3)", [2]),
    ],
)
def test_several_restrictions_on_a_clustering_column_intersect(
    where: str, expected: list[int]
) -> None:
    """cqlpy's test_multiple_restrictions_on_same_column: ScyllaDB intersects them."""
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (p int, c int, PRIMARY KEY (p, c))")
    for c in range(3):
        m.run(f"INSERT INTO ks.t (p, c) VALUES (1, {c})")
    assert [r[0] for r in m.run(f"SELECT c FROM ks.t WHERE p = 1 AND {where}")] == expected


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        ("SELECT * FROM ks.t WHERE token(p, p) > 0", "contains duplicate partition key"),
        (
            "SELECT * FROM ks.t WHERE p > 0",
            "Only EQ and IN relation are supported on the partition",
        ),
        ("UPDATE ks.t SET v = 1 WHERE p > 0 AND c = 0", "Only EQ and IN relation are supported"),
        ("SELECT * FROM ks.t WHERE p = max(1)", "Aggregation functions are not supported in the"),
        (
            "SELECT * FROM ks.t WHERE p = 0 AND (c) IN ((1), (2, 3))",
            r"Expected 1 elements in value tuple, but got 2: \(2, 3\)",
        ),
    ],
)
def test_more_relations_scylla_refuses(cql: str, message: str) -> None:
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (p int, c int, v int, PRIMARY KEY (p, c))")
    with pytest.raises(InvalidRequest, match=message):
        m.run(cql)


def test_not_in_filters_rows_and_a_listed_null_matches_nothing() -> None:
    """cqlpy's test_filtering_with_not_in_relation: NOT IN is a filter on any column (ALLOW
    FILTERING); a null value or a null in the list matches nothing."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (p1 int, p2 int, c int, v int, PRIMARY KEY ((p1, p2), c))")
    for p1 in range(1, 5):
        m.run(f"INSERT INTO ks.t (p1, p2, c, v) VALUES ({p1}, {p1 + 1}, {p1 + 2}, {p1 + 3})")
    m.run("INSERT INTO ks.t (p1, p2, c, v) VALUES (5, 6, 7, NULL)")

    def p1s(where: str) -> list[int]:
        return sorted(r[0] for r in m.run(f"SELECT p1 FROM ks.t WHERE {where} ALLOW FILTERING"))

    assert p1s("p1 NOT IN (2, 4)") == [1, 3, 5]
    assert p1s("c NOT IN (3, 5)") == [2, 4, 5]
    assert p1s("v NOT IN (5, 7)") == [1, 3]
    assert p1s("v NOT IN (5, NULL)") == []
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        m.run("SELECT * FROM ks.t WHERE p1 NOT IN (2, 4)")


def test_write_timestamps_are_bounded_as_scylla_bounds_them() -> None:
    """timestamp_test's testNegativeTimestamps: a negative timestamp is a timestamp, the
    smallest bigint (ScyllaDB's "no timestamp") is refused, in a statement or a batch."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (k int PRIMARY KEY, v int)")
    m.run("INSERT INTO ks.t (k, v) VALUES (1, 1) USING TIMESTAMP -42")
    assert m.run("SELECT writetime(v) FROM ks.t WHERE k = 1") == [(-42,)]
    for cql in (
        f"INSERT INTO ks.t (k, v) VALUES (2, 2) USING TIMESTAMP {-(2**63)}",
        f"BEGIN BATCH USING TIMESTAMP {-(2**63)} INSERT INTO ks.t (k, v) VALUES (2, 2) APPLY BATCH",
    ):
        with pytest.raises(InvalidRequest, match="Out of bound timestamp, must be in"):
            m.run(cql)


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        (
            "INSERT INTO ks.t (id, b, c) VALUES ('k', 1, null)",
            'PRIMARY KEY column "b" cannot be restricted as preceding column "a" is not',
        ),
        (
            "INSERT INTO ks.t (id, a, c) VALUES ('k', 1, null)",
            "Missing mandatory PRIMARY KEY part b",
        ),
        ("INSERT INTO ks.u (id2, a) VALUES ('k', 1)", "Some partition key parts are missing: id1"),
        (
            "UPDATE ks.t SET r = r + 1 WHERE id = 'k' AND a = 1 AND b = 1",
            "for non counter column r",
        ),
    ],
)
def test_inserts_name_the_missing_key_part_as_scylla(cql: str, message: str) -> None:
    """cqlpy's test_null.py: a gap in the clustering key, a missing last part, a missing
    partition key part."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (id text, a int, b int, c list<int>, r int, PRIMARY KEY (id, a, b))")
    m.run("CREATE TABLE ks.u (id1 text, id2 text, a int, PRIMARY KEY ((id1, id2)))")
    with pytest.raises(InvalidRequest, match=message):
        m.run(cql)


def test_a_batch_over_a_megabyte_is_refused_whole() -> None:
    """ScyllaDB's batch_size_fail_threshold_in_kb (1024): a batch of several partitions
    whose data passes it is refused, and nothing of it is written."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (k int PRIMARY KEY, t text)")

    def batch(n: int) -> str:
        inserts = (f"INSERT INTO ks.t (k, t) VALUES ({i}, '{'x' * 1000}')" for i in range(n))
        return "BEGIN BATCH\n" + "\n".join(inserts) + "\nAPPLY BATCH"

    with pytest.raises(InvalidRequest, match="Batch too large"):
        m.run(batch(1100))
    assert m.run("SELECT count(*) FROM ks.t") == [(0,)]
    m.run(batch(900))
    assert m.run("SELECT count(*) FROM ks.t") == [(900,)]


def test_like_filters_string_columns() -> None:
    """cqlpy's test_filter_like_on_desc_column and ScyllaDB's like_matcher: ``%`` any text,
    ``_`` one character, a backslash escapes; strings only."""
    from cqlcdc.errors import InvalidRequest
    from cqlcdc.storage.select import like_pattern

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (a int, b text, n int, PRIMARY KEY (a, b)) "
          "WITH CLUSTERING ORDER BY (b DESC)")  # fmt: skip
    for b in ("one", "two", "o_e", "x.y"):
        m.run(f"INSERT INTO ks.t (a, b, n) VALUES (1, '{b}', 1)")

    def bs(pattern: str) -> list[str]:
        query = f"SELECT b FROM ks.t WHERE b LIKE '{pattern}' ALLOW FILTERING"
        return sorted(r[0] for r in m.run(query))

    assert bs("%%%") == ["o_e", "one", "two", "x.y"]
    assert bs("o%") == ["o_e", "one"]
    assert bs("o_e") == ["o_e", "one"]
    assert bs("o\\_e") == ["o_e"]
    assert bs("x.%") == ["x.y"] and bs("x_y") == ["x.y"] and bs("") == []
    assert like_pattern("a.b").fullmatch("axb") is None
    with pytest.raises(InvalidRequest, match="LIKE is allowed only on string types, which n"):
        m.run("SELECT * FROM ks.t WHERE n LIKE '1' ALLOW FILTERING")
    with pytest.raises(InvalidRequest, match="ALLOW FILTERING"):
        m.run("SELECT * FROM ks.t WHERE b LIKE 'o%'")


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        (
            "DELETE b.a FROM ks.t WHERE k = 0",
            "Frozen UDT column b does not support field deletions",
        ),
        ("DELETE c.a FROM ks.t WHERE k = 0", "Invalid deletion operation for non-UDT column c"),
        ("UPDATE ks.t SET b.a = 0 WHERE k = 0", r"Invalid operation \(b.a = 0\) for frozen UDT"),
        ("UPDATE ks.t SET c.a = 0 WHERE k = 0", r"Invalid operation \(c.a = 0\) for non-UDT col"),
    ],
)
def test_udt_field_writes_scylla_refuses(cql: str, message: str) -> None:
    """user_types_test's testInvalidUDTStatements: operation.cc's messages."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TYPE ks.ut (a int)")
    m.run("CREATE TABLE ks.t (k int PRIMARY KEY, b frozen<ut>, c int, u ut)")
    with pytest.raises(InvalidRequest, match=message):
        m.run(cql)


def test_a_type_a_partition_key_uses_cannot_change() -> None:
    """alter_test's testAlterTypeUsedInPartitionKey: ADD or RENAME of a type (or of a type
    inside one) that a partition key uses is refused; the keys would read differently."""
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TYPE ks.t1 (v1 int)")
    m.run("CREATE TYPE ks.t2 (v1 frozen<t1>, v2 frozen<t1>)")
    m.run("CREATE TABLE ks.p (pk frozen<t2>, val int, PRIMARY KEY (pk))")
    for alter in ("ALTER TYPE ks.t1 ADD v2 int", "ALTER TYPE ks.t1 RENAME v1 TO w"):
        with pytest.raises(InvalidRequest, match="used in the partition key column pk of table"):
            m.run(alter)
    m.run("CREATE TYPE ks.t3 (a int)")
    m.run("CREATE TABLE ks.r (k int PRIMARY KEY, u frozen<t3>)")
    m.run("ALTER TYPE ks.t3 ADD b int")  # a regular column may change


def test_is_not_null_is_refused_outside_views() -> None:
    from cqlcdc.errors import InvalidRequest

    m = CoreModel()
    m.run(KS)
    m.run("CREATE TABLE ks.t (a int, b int, c int, PRIMARY KEY (a, c))")
    with pytest.raises(InvalidRequest, match="'b IS NOT null' is only supported in materialized"):
        m.run("SELECT * FROM ks.t WHERE c = 0 AND b IS NOT NULL")
    with pytest.raises(InvalidRequest, match='Unsupported "IS NOT" relation: b IS NOT 5'):
        m.run("SELECT * FROM ks.t WHERE b IS NOT 5")
