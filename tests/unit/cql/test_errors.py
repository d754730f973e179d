"""Syntax errors name the offending token and its 1-based line and column, ANTLR style."""

from __future__ import annotations

import pytest

from cqlcdc.cql import parse_script, parse_statement
from cqlcdc.errors import CqlError, CqlSyntaxError


@pytest.mark.parametrize(
    ("text", "line", "column", "message"),
    [
        ("SELECT * FORM t", 1, 10, "mismatched input 'FORM' expecting K_FROM"),
        ("SELEC * FROM t", 1, 1, "no viable alternative at input 'SELEC'"),
        ("SELECT * FROM", 1, 14, "mismatched input '<EOF>' expecting IDENT"),
        ("SELECT * FROM t WHERE", 1, 22, "mismatched input '<EOF>' expecting IDENT"),
        ("USE ks ks2", 1, 8, "mismatched input 'ks2' expecting EOF"),
        ("USE ks; USE ks2", 1, 9, "mismatched input 'USE' expecting EOF"),
        (
            "CREATE TABLE t (select int PRIMARY KEY)",
            1,
            17,
            "no viable alternative at input 'select'",
        ),
        ("INSERT INTO t (a) VALUES ('abc)", 1, 27, "token recognition error at: '''"),
        ("UPDATE t SET v = v * 2 WHERE k = 1", 1, 18, "no viable alternative at input 'v'"),
        ("UPDATE t SET v = 1 * 2 WHERE k = 1", 1, 20, "mismatched input '*' expecting K_WHERE"),
        (
            "UPDATE t SET v = w + 2 WHERE k = 1",
            1,
            18,
            "Only expressions of the form X = X <op> <value> are supported.",
        ),
        (
            "INSERT INTO t (a) VALUES (1) USING TTL 1 AND TTL 2",
            1,
            46,
            "mismatched input 'TTL' expecting K_TIMESTAMP",
        ),
        (
            "BEGIN BATCH SELECT * FROM t; APPLY BATCH",
            1,
            13,
            "mismatched input 'SELECT' expecting K_APPLY",
        ),
        ("CREATE TABLE t (a int, b int)", 1, 29, "No PRIMARY KEY specifed (exactly one required)"),
        ("", 1, 1, "no viable alternative at input '<EOF>'"),
    ],
)
def test_error_message_and_position(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(CqlSyntaxError) as info:
        parse_statement(text)
    error = info.value
    assert (error.line, error.column) == (line, column)
    assert error.message == f"line {line}:{column} {message}"
    assert error.code == 0x2000


def test_multi_line_positions() -> None:
    text = "SELECT pk,\n       v\n  FROM ks.t\n WHERE pk = = 1;"
    with pytest.raises(CqlSyntaxError) as info:
        parse_statement(text)
    assert (info.value.line, info.value.column) == (4, 13)
    assert str(info.value) == "line 4:13 no viable alternative at input '='"


def test_multi_line_tokenizer_error_after_comment() -> None:
    text = "/* a\n comment */ UPDATE t\n   SET v = # WHERE k = 1"
    with pytest.raises(CqlSyntaxError) as info:
        parse_statement(text)
    assert (info.value.line, info.value.column) == (3, 12)


def test_batch_inner_error_position() -> None:
    text = (
        "BEGIN UNLOGGED BATCH\n"
        "  UPDATE t SET v = 1 WHERE k = 1;\n"
        "  UPDATE t SET v = WHERE k = 2;\n"
        "APPLY BATCH;"
    )
    with pytest.raises(CqlSyntaxError) as info:
        parse_statement(text)
    assert (info.value.line, info.value.column) == (3, 20)
    assert "no viable alternative at input 'WHERE'" in info.value.message


def test_script_errors_are_positioned_in_the_script() -> None:
    script = "USE ks;\n\n-- comment\n   SELECT * FROM t WHERE;\nSELECT * FROM t;"
    results = parse_script(script)
    assert len(results) == 3
    statement, error = results[1]
    assert (statement.line, statement.column) == (4, 4)
    assert isinstance(error, CqlSyntaxError)
    assert (error.line, error.column) == (4, 25)
    assert not isinstance(results[0][1], CqlError)
    assert not isinstance(results[2][1], CqlError)
