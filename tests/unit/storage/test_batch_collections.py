"""Collection operations inside one batch: several statements on one cell, one partition,
one timestamp (issue 26, section 2), as ScyllaDB resolves them.

List keys are ScyllaDB's: the statement's timestamp plus a sub-microsecond sequence that the
statements of a batch share (appends count up, prepends count down from the top, at the
timestamp mirrored about 2010-01-01), so no two elements of a batch share a key.
"""

from __future__ import annotations

import pytest

from cqlcdc.errors import InvalidRequest
from cqlcdc.storage.uuids import LIST_SEQ_LIMIT, PREPEND_REFERENCE_US, list_key, micros_of
from cqlcdc.types import native_type
from tests.core_model import CoreModel

KS = "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"


def _model() -> CoreModel:
    m = CoreModel()
    m.run(KS)
    m.run("CREATE TYPE ks.u (a int, b text)")
    m.run(
        "CREATE TABLE ks.t (k int PRIMARY KEY, l list<int>, s set<int>, mp map<int, text>, u u) "
        "WITH cdc = {'enabled': true}"
    )
    return m


def _batch(*statements: str) -> str:
    return "BEGIN BATCH " + "; ".join(statements) + "; APPLY BATCH"


def _list(m: CoreModel) -> object:
    return m.run("SELECT l FROM ks.t WHERE k = 1")[0][0]


def test_prepends_in_one_batch_keep_every_element_latest_first() -> None:
    m = _model()
    m.run(_batch(*(f"UPDATE ks.t SET l = [{i}] + l WHERE k = 1" for i in (1, 2, 3))))
    assert _list(m) == (3, 2, 1)
    # the batch is one change of one row: one log row, its delta every element and its key
    [(delta,)] = m.log("ks.t", "l")
    keys = list(delta.keys())
    assert [delta[k] for k in sorted(keys, key=native_type("timeuuid").sort_key)] == [3, 2, 1]
    assert len(set(keys)) == 3


def test_prepends_appends_and_a_multi_value_prepend_interleave_as_in_scylla() -> None:
    m = _model()
    m.run("UPDATE ks.t SET l = [1] WHERE k = 1")
    m.run(
        _batch(
            "UPDATE ks.t SET l = [4, 5] + l WHERE k = 1",  # keeps its own order
            "UPDATE ks.t SET l = l + [6] WHERE k = 1",
            "UPDATE ks.t SET l = [7] + l WHERE k = 1",
            "UPDATE ks.t SET l = l + [8, 9] WHERE k = 1",
        )
    )
    assert _list(m) == (7, 4, 5, 1, 6, 8, 9)


def test_overwrite_then_append_and_prepend_in_one_batch() -> None:
    m = _model()
    m.run("UPDATE ks.t SET l = [0] WHERE k = 1")
    m.run(
        _batch(
            "UPDATE ks.t SET l = [10] WHERE k = 1",  # its tombstone at T-1 spares T's elements
            "UPDATE ks.t SET l = l + [11] WHERE k = 1",
            "UPDATE ks.t SET l = [9] + l WHERE k = 1",
        )
    )
    assert _list(m) == (9, 10, 11)
    m.run(_batch("UPDATE ks.t SET l = [1] WHERE k = 1", "UPDATE ks.t SET l = [2] WHERE k = 1"))
    assert _list(m) == (1, 2)  # two whole-list writes of one batch: both sets of elements


def test_positional_list_operations_of_a_batch_see_the_list_before_it() -> None:
    m = _model()
    m.run("UPDATE ks.t SET l = [9, 10, 11] WHERE k = 1")
    m.run(
        _batch(
            "UPDATE ks.t SET l[0] = 100 WHERE k = 1",
            "UPDATE ks.t SET l = l - [11] WHERE k = 1",
            "DELETE l[1] FROM ks.t WHERE k = 1",
            "UPDATE ks.t SET l = l + [12] WHERE k = 1",
        )
    )
    assert _list(m) == (100, 12)


def test_set_map_and_udt_operations_on_one_timestamp() -> None:
    m = _model()
    m.run(
        _batch(
            "UPDATE ks.t SET s = s + {1} WHERE k = 1",
            "UPDATE ks.t SET s = s + {2} WHERE k = 1",
            "UPDATE ks.t SET s = s - {1} WHERE k = 1",  # a tombstone wins a tie
            "UPDATE ks.t SET mp = mp + {1: 'a'} WHERE k = 1",
            "UPDATE ks.t SET mp[2] = 'b' WHERE k = 1",
            "DELETE mp[1] FROM ks.t WHERE k = 1",
            "UPDATE ks.t SET u.a = 1 WHERE k = 1",
            "UPDATE ks.t SET u.b = 'x' WHERE k = 1",
        )
    )
    [(s, mp, u)] = m.run("SELECT s, mp, u FROM ks.t WHERE k = 1")
    assert s == {2}
    assert dict(mp) == {2: "b"}
    assert dict(u) == {"a": 1, "b": "x"}
    [(ds, dmp, du)] = m.log("ks.t", "cdc$deleted_elements_s", "cdc$deleted_elements_mp", "u")
    assert ds == {1} and dmp == {1}
    assert du is not None


def test_list_keys_carry_the_statement_timestamp() -> None:
    m = _model()
    m.run("UPDATE ks.t USING TIMESTAMP 1700000000000002 SET l = l + [2] WHERE k = 1")
    m.run("UPDATE ks.t USING TIMESTAMP 1700000000000001 SET l = l + [1] WHERE k = 1")
    assert _list(m) == (1, 2)  # an older append sorts first, as its keys are older
    stamps = sorted(micros_of(k) for (d,) in m.log("ks.t", "l") for k in d)
    assert stamps == [1700000000000001, 1700000000000002]
    m.run("UPDATE ks.t USING TIMESTAMP 1700000000000003 SET l = [0] + l WHERE k = 1")
    [(prepended,)] = m.log("ks.t", "l")[-1:]
    assert [micros_of(k) for k in prepended] == [2 * PREPEND_REFERENCE_US - 1700000000000003]
    assert _list(m) == (0, 1, 2)


def test_a_prepend_before_2010_and_too_many_values_are_refused() -> None:
    m = _model()
    with pytest.raises(InvalidRequest) as caught:
        m.run("UPDATE ks.t USING TIMESTAMP 1000 SET l = [1] + l WHERE k = 1")
    assert caught.value.message == (
        "List prepend custom timestamp must be greater than Jan 1 2010 00:00:00"
    )
    with pytest.raises(InvalidRequest) as caught:
        list_key(1, LIST_SEQ_LIMIT, 0)
    assert caught.value.message == "Too many list values per single CQL statement or batch"


def test_list_keys_order_as_their_sequence_numbers() -> None:
    order = native_type("timeuuid").sort_key
    keys = [list_key(1_700_000_000_000_000, n, 0xABC) for n in range(0, LIST_SEQ_LIMIT, 97)]
    assert sorted(keys, key=order) == keys
    assert {micros_of(k) for k in keys} == {1_700_000_000_000_000}
