"""``with_keyspace``: a prepared statement's unqualified tables are bound to the keyspace it
was prepared in (as in Cassandra), so a later ``USE`` cannot redirect its writes."""

from __future__ import annotations

import pytest

from cqlcdc.cql import parse_statement, render, with_keyspace


@pytest.mark.parametrize(
    ("cql", "expected"),
    [
        ("INSERT INTO t (pk) VALUES (?)", "INSERT INTO ks.t (pk) VALUES (?)"),
        ("UPDATE t SET v = ? WHERE pk = ?", "UPDATE ks.t SET v = ? WHERE pk = ?"),
        ("DELETE FROM t WHERE pk = ?", "DELETE FROM ks.t WHERE pk = ?"),
        ("SELECT * FROM t WHERE pk = ?", "SELECT * FROM ks.t WHERE pk = ?"),
        ("SELECT * FROM other.t", "SELECT * FROM other.t"),  # qualified: unchanged
        (
            "BEGIN BATCH INSERT INTO t (pk) VALUES (1); DELETE FROM o.u WHERE pk = 2; APPLY BATCH",
            "BEGIN BATCH INSERT INTO ks.t (pk) VALUES (1); DELETE FROM o.u WHERE pk = 2; "
            "APPLY BATCH",
        ),
        ("DESCRIBE t", "DESCRIBE KEYSPACE t"),  # names a keyspace: unchanged
    ],
)
def test_unqualified_tables_get_the_keyspace(cql: str, expected: str) -> None:
    assert render(with_keyspace(parse_statement(cql), "ks")) == expected


def test_no_keyspace_leaves_the_statement_alone() -> None:
    stmt = parse_statement("INSERT INTO t (pk) VALUES (1)")
    assert with_keyspace(stmt, None) is stmt
