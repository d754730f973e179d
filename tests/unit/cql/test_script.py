"""split_statements cuts scripts like ``cqlsh -f``; parse_script parses each statement."""

from __future__ import annotations

from cqlcdc.cql import StatementText, ast, parse_script, split_statements


def texts(script: str) -> list[str]:
    return [s.text for s in split_statements(script)]


def test_simple_split_keeps_semicolons_and_positions() -> None:
    script = "USE ks;\nSELECT * FROM t;  INSERT INTO t (k) VALUES (1);"
    assert split_statements(script) == [
        StatementText("USE ks;", 1, 1),
        StatementText("SELECT * FROM t;", 2, 1),
        StatementText("INSERT INTO t (k) VALUES (1);", 2, 19),
    ]


def test_comments_and_empty_statements_are_dropped() -> None:
    script = (
        "-- header; with a semicolon\n"
        "// another; comment\n"
        "/* block;\n comment */\n"
        ";;\n"
        "USE ks; -- trailing; comment\n"
        "   \n"
        "SELECT /* inner; */ * FROM t;\n"
        "-- the end"
    )
    assert split_statements(script) == [
        StatementText("USE ks;", 6, 1),
        StatementText("SELECT /* inner; */ * FROM t;", 8, 1),
    ]


def test_semicolons_in_strings_and_names() -> None:
    script = (
        "INSERT INTO t (k, v) VALUES (1, 'a;b''c;');\n"
        "INSERT INTO t (k, v) VALUES (2, $$x;y$$);\n"
        'SELECT "weird;name" FROM t;'
    )
    assert texts(script) == [
        "INSERT INTO t (k, v) VALUES (1, 'a;b''c;');",
        "INSERT INTO t (k, v) VALUES (2, $$x;y$$);",
        'SELECT "weird;name" FROM t;',
    ]
    assert all(not isinstance(r, Exception) for _, r in parse_script(script))


def test_batch_is_one_statement() -> None:
    script = (
        "BEGIN UNLOGGED BATCH\n"
        "    UPDATE ks.t SET v = {} WHERE pk = 0 AND ck = 0;\n"
        "    UPDATE ks.t SET v = v + {1: 'v1'} WHERE pk = 0 AND ck = 0;\n"
        "APPLY BATCH;\n"
        "SELECT * FROM ks.t;\n"
        "begin batch insert into t (k) values (1); apply   batch ;\n"
        "BEGIN COUNTER BATCH UPDATE c SET n = n + 1 WHERE k = 1; APPLY BATCH;"
    )
    statements = split_statements(script)
    assert [s.line for s in statements] == [1, 5, 6, 7]
    assert statements[0].text.startswith("BEGIN UNLOGGED BATCH\n")
    assert statements[0].text.endswith("APPLY BATCH;")
    assert statements[2].text == "begin batch insert into t (k) values (1); apply   batch ;"
    kinds = [type(r).__name__ for _, r in parse_script(script)]
    assert kinds == ["Batch", "Select", "Batch", "Batch"]


def test_doc_batch_with_stray_semicolon() -> None:
    script = (
        "BEGIN UNLOGGED BATCH;\n"
        "    UPDATE ks.t SET v = {} WHERE pk = 0 AND ck = 0;\n"
        "APPLY BATCH;\n"
        "SELECT * FROM ks.t;"
    )
    results = parse_script(script)
    assert len(results) == 2
    batch = results[0][1]
    assert isinstance(batch, ast.Batch)
    assert batch.kind == "UNLOGGED"
    assert len(batch.statements) == 1


def test_begin_without_batch_is_not_a_batch() -> None:
    assert texts("BEGIN UNLOGGED; USE ks;") == ["BEGIN UNLOGGED;", "USE ks;"]


def test_last_statement_without_semicolon() -> None:
    assert split_statements("USE ks;\n  SELECT * FROM t  -- no semicolon\n") == [
        StatementText("USE ks;", 1, 1),
        StatementText("SELECT * FROM t", 2, 3),
    ]


def test_unterminated_literals_become_errors_not_losses() -> None:
    results = parse_script("USE ks;\nSELECT 'open FROM t;\nUSE other;")
    assert len(results) == 2
    assert isinstance(results[1][1], Exception)
    results = parse_script("USE ks; /* never closed")
    assert len(results) == 2
    assert isinstance(results[1][1], Exception)


def test_multibyte_text_positions() -> None:
    statements = split_statements("INSERT INTO t (k, v) VALUES (1, 'é;ü');\nUSE ks;")
    assert statements[1] == StatementText("USE ks;", 2, 1)
