"""ScyllaDB's statement extensions that change nothing here: ``USING TIMEOUT`` (Cql.g
usingClause, usingTimestampTimeoutClause, usingTimeoutServiceLevelClause) and ``BYPASS
CACHE``; the timeout is validated as cql3/attributes.cc ``get_timeout`` does, with the cases
of ScyllaDB's test/cqlpy/test_using_timeout.py."""

from __future__ import annotations

import pytest

from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import CqlSyntaxError, InvalidRequest
from cqlcdc.storage.attributes import timeout_ms
from tests.core_model import CoreModel

DURATION_10S = ast.Constant("duration", "10s")


@pytest.mark.parametrize(
    ("cql", "timestamp", "ttl"),
    [
        ("INSERT INTO t (p) VALUES (1) USING TIMEOUT 10s", None, None),
        ("INSERT INTO t (p) VALUES (1) USING TIMEOUT 10s AND TTL 5 AND TIMESTAMP 3", "3", "5"),
        ("INSERT INTO t (p) VALUES (1) USING TIMESTAMP 3 AND TIMEOUT 10s", "3", None),
        ("INSERT INTO t JSON '{}' DEFAULT UNSET USING TIMEOUT 10s", None, None),
        ("UPDATE t USING TIMEOUT 10s AND TTL 5 SET v = 1 WHERE p = 1", None, "5"),
        ("DELETE FROM t USING TIMEOUT 10s AND TIMESTAMP 3 WHERE p = 1", "3", None),
        ("BEGIN BATCH USING TIMEOUT 10s INSERT INTO t (p) VALUES (1); APPLY BATCH", None, None),
    ],
)
def test_writes_take_a_timeout(cql: str, timestamp: str | None, ttl: str | None) -> None:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.Insert | ast.Update | ast.Delete | ast.Batch)
    using = stmt.using
    assert using.timeout == DURATION_10S
    assert (getattr(using.timestamp, "text", None), getattr(using.ttl, "text", None)) == (
        timestamp,
        ttl,
    )


def test_select_takes_bypass_cache_and_a_timeout() -> None:
    stmt = parse_statement(
        "SELECT * FROM t WHERE p = 1 GROUP BY p LIMIT 3 ALLOW FILTERING BYPASS CACHE "
        "USING TIMEOUT 10s"
    )
    assert isinstance(stmt, ast.Select)
    assert (stmt.group_by, stmt.bypass_cache, stmt.using.timeout) == (("p",), True, DURATION_10S)
    marker = parse_statement("SELECT * FROM t USING TIMEOUT ?")
    assert isinstance(marker, ast.Select) and isinstance(marker.using.timeout, ast.BindMarker)


@pytest.mark.parametrize(
    "cql",
    [
        # test_invalid_timeout: SELECT takes no TIMESTAMP or TTL, DELETE no TTL
        "SELECT * FROM t USING TIMEOUT 60s AND TIMESTAMP 42",
        "SELECT * FROM t USING TIMEOUT 60s AND TTL 10000",
        "DELETE FROM t USING TIMEOUT 60s AND TTL 42 WHERE p = 42",
        "INSERT INTO t (p) VALUES (1) USING TIMEOUT 1s AND TIMEOUT 2s",
        "SELECT * FROM t USING TIMEOUT 1s BYPASS CACHE",
        "INSERT INTO t JSON '{}' DEFAULT NOTHING",
        "INSERT INTO t JSON 1",
    ],
)
def test_syntax_errors(cql: str) -> None:
    with pytest.raises(CqlSyntaxError):
        parse_statement(cql)


@pytest.mark.parametrize(
    ("timeout", "message"),
    [
        ("'hey'", 'Invalid STRING constant (hey) for "[timeout]" of type duration'),
        ("3mo", "Timeout values cannot be expressed in days/months"),
        ("40y", "Timeout values cannot be expressed in days/months"),
        ("2d", "Timeout values cannot be expressed in days/months"),
        ("917", 'Invalid INTEGER constant (917) for "[timeout]" of type duration'),
        ("null", "Timeout value cannot be null"),
        ("60s5ns", "Timeout values cannot have granularity finer than milliseconds"),
        ("-10ms", "Timeout values must be non-negative"),
    ],
)
def test_invalid_timeouts(timeout: str, message: str) -> None:
    stmt = parse_statement(f"SELECT * FROM t USING TIMEOUT {timeout}")
    assert isinstance(stmt, ast.Select)
    with pytest.raises(InvalidRequest) as err:
        timeout_ms(stmt.using.timeout, None)
    assert err.value.message == message


@pytest.mark.parametrize(("timeout", "ms"), [("60m", 3_600_000), ("48h", 172_800_000), ("0ms", 0)])
def test_valid_timeouts(timeout: str, ms: int) -> None:
    stmt = parse_statement(f"SELECT * FROM t USING TIMEOUT {timeout}")
    assert isinstance(stmt, ast.Select)
    assert timeout_ms(stmt.using.timeout, None) == ms


def test_a_read_checks_its_timeout_and_answers_as_without_it() -> None:
    m = CoreModel()
    m.run(
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
    )
    m.run("CREATE TABLE ks.t (p int PRIMARY KEY, v int)")
    m.run("INSERT INTO ks.t (p, v) VALUES (1, 2) USING TIMEOUT 1h AND TTL 100")
    plain = m.run("SELECT * FROM ks.t")
    assert plain == [(1, 2)]
    assert m.run("SELECT * FROM ks.t BYPASS CACHE USING TIMEOUT 24h") == plain
    with pytest.raises(InvalidRequest, match=r"^Timeout values must be non-negative$"):
        m.run("SELECT * FROM ks.t USING TIMEOUT -1ms")
