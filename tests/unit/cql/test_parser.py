"""The parser produces the documented AST for each statement form."""

from __future__ import annotations

import pytest

from cqlcdc.cql import ast as a
from cqlcdc.cql import parse_statement
from cqlcdc.errors import CqlSyntaxError


def INT(text: str) -> a.Constant:
    return a.Constant("integer", text)


def STR(text: str) -> a.Constant:
    return a.Constant("string", text)


KS_T = a.QualifiedName("ks", "t")
PK0 = a.Relation(("pk",), "=", INT("0"))
CK0 = a.Relation(("ck",), "=", INT("0"))


def value_of(term_text: str) -> a.Term:
    statement = parse_statement(f"INSERT INTO t (v) VALUES ({term_text})")
    assert isinstance(statement, a.Insert)
    return statement.values[0]


def assignment_of(text: str) -> a.Assignment:
    statement = parse_statement(f"UPDATE ks.t SET {text} WHERE pk = 0")
    assert isinstance(statement, a.Update)
    (assignment,) = statement.assignments
    return assignment


@pytest.mark.parametrize(
    ("text", "term"),
    [
        ("42", INT("42")),
        ("-7", INT("-7")),
        ("- 7", INT("-7")),
        ("1.5", a.Constant("float", "1.5")),
        ("-2e10", a.Constant("float", "-2e10")),
        ("nan", a.Constant("float", "NaN")),
        ("INFINITY", a.Constant("float", "Infinity")),
        ("-Infinity", a.Constant("float", "-Infinity")),
        ("TRUE", a.Constant("boolean", "true")),
        ("False", a.Constant("boolean", "false")),
        ("NULL", a.Constant("null", "null")),
        ("'it''s'", STR("it's")),
        ("$$it's$$", STR("it's")),
        ("0xCAFE", a.Constant("hex", "0xcafe")),
        ("1h30m", a.Constant("duration", "1h30m")),
        ("-1h", a.Constant("duration", "-1h")),
        ("PT2H", a.Constant("duration", "PT2H")),
        ("{}", a.MapLiteral(())),
        ("{1: 'a'}", a.MapLiteral(((INT("1"), STR("a")),))),
        ("{1, 2}", a.SetLiteral((INT("1"), INT("2")))),
        ('{a: 1, "B": 2}', a.UdtLiteral((("a", INT("1")), ("B", INT("2"))))),
        ("{key: 1}", a.UdtLiteral((("key", INT("1")),))),
        ("{true: 1}", a.MapLiteral(((a.Constant("boolean", "true"), INT("1")),))),
        ("[]", a.ListLiteral(())),
        ("[1, [2]]", a.ListLiteral((INT("1"), a.ListLiteral((INT("2"),))))),
        ("(1, 'x')", a.TupleLiteral((INT("1"), STR("x")))),
        ("(int) 3", a.TypeCast(a.TypeRef("int"), INT("3"))),
        (
            "(ks.ut) {a: 1}",
            a.TypeCast(a.TypeRef("ut", keyspace="ks"), a.UdtLiteral((("a", INT("1")),))),
        ),
        (
            "(map<int, text>) {}",
            a.TypeCast(a.TypeRef("map", (a.TypeRef("int"), a.TypeRef("text"))), a.MapLiteral(())),
        ),
        ("now()", a.FunctionCall("now", ())),
        ("Interval('PT24H')", a.FunctionCall("interval", (STR("PT24H"),))),
        ('"MyFn"(1, 2)', a.FunctionCall("MyFn", (INT("1"), INT("2")))),
        ("?", a.BindMarker(None, 0)),
        (":v", a.BindMarker("v", 0)),
        (':"V"', a.BindMarker("V", 0)),
    ],
)
def test_terms(text: str, term: a.Term) -> None:
    assert value_of(text) == term


def test_bind_markers_are_numbered_in_order() -> None:
    statement = parse_statement("UPDATE t USING TTL ? SET v = ? WHERE pk = :pk AND ck IN ?")
    assert isinstance(statement, a.Update)
    assert statement.using.ttl == a.BindMarker(None, 0)
    assert statement.assignments == (a.SetColumn("v", a.BindMarker(None, 1)),)
    assert [r.value for r in statement.where] == [a.BindMarker("pk", 2), a.BindMarker(None, 3)]


def test_a_marker_name_used_twice_is_one_variable() -> None:
    """ScyllaDB's default dialect: ``:x`` twice is one bind variable (Cassandra's two)."""
    statement = parse_statement("SELECT * FROM t WHERE p = :x AND c = ? AND d = :X AND e = :y")
    assert isinstance(statement, a.Select)
    assert [r.value for r in statement.where] == [
        a.BindMarker("x", 0),
        a.BindMarker(None, 1),
        a.BindMarker("x", 0),
        a.BindMarker("y", 2),
    ]


@pytest.mark.parametrize(
    ("text", "assignment"),
    [
        ("x = 1", a.SetColumn("x", INT("1"))),
        ("x = null", a.SetColumn("x", a.Constant("null", "null"))),
        ("m = m + {1: 'a'}", a.AddTo("m", a.MapLiteral(((INT("1"), STR("a")),)))),
        ("m = m - {1}", a.RemoveFrom("m", a.SetLiteral((INT("1"),)))),
        ("l = l + [1]", a.AddTo("l", a.ListLiteral((INT("1"),)))),
        ("l = [1] + l", a.Prepend("l", a.ListLiteral((INT("1"),)))),
        ("l = l - [1]", a.RemoveFrom("l", a.ListLiteral((INT("1"),)))),
        ("m['k'] = 2", a.SetElement("m", STR("k"), INT("2"))),
        ("l[0] = 2", a.SetElement("l", INT("0"), INT("2"))),
        ("u.f = 2", a.SetField("u", "f", INT("2"))),
        ('U."F" = 2', a.SetField("u", "F", INT("2"))),
        ("c = c + 1", a.AddTo("c", INT("1"))),
        ("c = c - 1", a.RemoveFrom("c", INT("1"))),
        ("c = c -1", a.RemoveFrom("c", INT("1"))),
        ("c = c + -1", a.AddTo("c", INT("-1"))),
        ("ttl = ttl + 1", a.AddTo("ttl", INT("1"))),
        ("x = now()", a.SetColumn("x", a.FunctionCall("now", ()))),
    ],
)
def test_assignments(text: str, assignment: a.Assignment) -> None:
    assert assignment_of(text) == assignment


@pytest.mark.parametrize("text", ["x = y + 1", "l = [1] + m", "x = x * 2"])
def test_unsupported_assignments(text: str) -> None:
    with pytest.raises(CqlSyntaxError):
        assignment_of(text)


def test_create_table_inline_primary_key_and_options() -> None:
    statement = parse_statement(
        'create table if not exists KS.T (K int primary key, "V" frozen<list<int>> static,)'
        " with cdc = {'enabled': 'true'} and CLUSTERING ORDER BY (c) and compact storage"
    )
    assert statement == a.CreateTable(
        a.QualifiedName("ks", "t"),
        (
            a.ColumnDef("k", a.TypeRef("int")),
            a.ColumnDef(
                "V",
                a.TypeRef("frozen", (a.TypeRef("list", (a.TypeRef("int"),)),)),
                static=True,
            ),
        ),
        ("k",),
        (),
        (("c", "ASC"),),
        (("cdc", a.MapLiteral(((STR("enabled"), STR("true")),))),),
        compact_storage=True,
        if_not_exists=True,
    )


def test_create_table_composite_key() -> None:
    statement = parse_statement(
        "CREATE TABLE t (a int, b int, c int, d int, PRIMARY KEY ((a, b), c, d))"
    )
    assert isinstance(statement, a.CreateTable)
    assert (statement.partition_key, statement.clustering_key) == (("a", "b"), ("c", "d"))


@pytest.mark.parametrize(
    "text",
    [
        "CREATE TABLE t (a int PRIMARY KEY, b int PRIMARY KEY)",
        "CREATE TABLE t (a int PRIMARY KEY, b int, PRIMARY KEY (b))",
        "CREATE TABLE t (a int, b int)",
        "CREATE TABLE t (a int PRIMARY KEY) WITH x = 1 AND x = 2",
    ],
)
def test_create_table_errors(text: str) -> None:
    with pytest.raises(CqlSyntaxError):
        parse_statement(text)


def test_keyspace_statements() -> None:
    assert parse_statement(
        "CREATE KEYSPACE IF NOT EXISTS Ks WITH REPLICATION = "
        "{'class': 'SimpleStrategy', 'replication_factor': 1} AND DURABLE_WRITES = 'false'"
    ) == a.CreateKeyspace(
        "ks",
        (("class", "SimpleStrategy"), ("replication_factor", "1")),
        durable_writes=False,
        if_not_exists=True,
    )
    assert parse_statement("ALTER KEYSPACE ks WITH durable_writes = true") == a.AlterKeyspace(
        "ks", durable_writes=True
    )
    # ScyllaDB 6's tablets option: its options as texts (the catalog reads them)
    assert parse_statement(
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', "
        "'replication_factor': 1} AND tablets = {'enabled': false, 'initial': 8}"
    ) == a.CreateKeyspace(
        "ks",
        (("class", "SimpleStrategy"), ("replication_factor", "1")),
        tablets=(("enabled", "false"), ("initial", "8")),
    )
    assert parse_statement("ALTER KEYSPACE ks WITH tablets = {'enabled': 'true'}") == (
        a.AlterKeyspace("ks", tablets=(("enabled", "true"),))
    )
    with pytest.raises(CqlSyntaxError, match=r"property 'tablets'\. It should"):
        parse_statement("CREATE KEYSPACE ks WITH tablets = false")
    with pytest.raises(CqlSyntaxError, match="Unknown property 'tablet'"):
        parse_statement("CREATE KEYSPACE ks WITH tablet = {'enabled': false}")


def test_changefeed_options_are_upper_cased() -> None:
    statement = parse_statement(
        "ALTER TABLE t ADD CHANGEFEED updates WITH (mode = 'UPDATES', Format = 'JSON', "
        "RETENTION_PERIOD = Interval('PT24H'), INITIAL_SCAN = TRUE)"
    )
    assert statement == a.AlterTable(
        a.QualifiedName(None, "t"),
        a.AddChangefeed(
            "updates",
            (
                ("MODE", STR("UPDATES")),
                ("FORMAT", STR("JSON")),
                ("RETENTION_PERIOD", a.FunctionCall("interval", (STR("PT24H"),))),
                ("INITIAL_SCAN", a.Constant("boolean", "true")),
            ),
        ),
    )


def test_changefeed_keyword_is_still_a_column_name() -> None:
    add = parse_statement("ALTER TABLE t ADD changefeed int")
    drop = parse_statement("ALTER TABLE t DROP changefeed")
    assert add == a.AlterTable(
        a.QualifiedName(None, "t"), a.AddColumns((a.ColumnDef("changefeed", a.TypeRef("int")),))
    )
    assert drop == a.AlterTable(a.QualifiedName(None, "t"), a.DropColumns(("changefeed",)))


def test_delete_forms() -> None:
    statement = parse_statement(
        "DELETE v, m['k'], l[1], u.f FROM ks.t USING TIMESTAMP 5 WHERE pk = 0 AND ck = 0 "
        "IF v = 1 AND m['k'] != 'x' AND u.f IN (1, 2)"
    )
    assert statement == a.Delete(
        KS_T,
        (
            a.DeleteTarget("v"),
            a.DeleteTarget("m", key=STR("k")),
            a.DeleteTarget("l", key=INT("1")),
            a.DeleteTarget("u", field="f"),
        ),
        (PK0, CK0),
        a.Using(timestamp=INT("5")),
        conditions=(
            a.Condition("v", "=", INT("1")),
            a.Condition("m", "!=", STR("x"), key=STR("k")),
            a.Condition("u", "IN", a.TupleLiteral((INT("1"), INT("2"))), field="f"),
        ),
    )
    with pytest.raises(CqlSyntaxError, match="expecting K_TIMESTAMP"):
        parse_statement("DELETE FROM t USING TTL 5 WHERE pk = 0")


def test_relations() -> None:
    statement = parse_statement(
        "SELECT * FROM t WHERE token(pk) > 5 AND (c1, c2) >= (1, 2) AND s CONTAINS 3 "
        "AND m CONTAINS KEY 'k' AND m['k'] = 1 AND c IN (1, 2) AND (c1, c2) IN ((1, 2)) "
        "AND (c1) = (3)"
    )
    assert isinstance(statement, a.Select)
    assert statement.where == (
        a.Relation(("pk",), ">", INT("5"), token=True),
        a.Relation(("c1", "c2"), ">=", a.TupleLiteral((INT("1"), INT("2"))), multi=True),
        a.Relation(("s",), "CONTAINS", INT("3")),
        a.Relation(("m",), "CONTAINS KEY", STR("k")),
        a.Relation(("m",), "=", INT("1"), key=STR("k")),
        a.Relation(("c",), "IN", a.TupleLiteral((INT("1"), INT("2")))),
        a.Relation(
            ("c1", "c2"), "IN", a.TupleLiteral((a.TupleLiteral((INT("1"), INT("2"))),)), multi=True
        ),
        # a parenthesised single column is a multi-column relation of one-element tuples
        a.Relation(("c1",), "=", a.TupleLiteral((INT("3"),)), multi=True),
    )


def test_select_selectors_and_clauses() -> None:
    statement = parse_statement(
        'SELECT DISTINCT "cdc$time", writetime(v) AS wt, TTL(v), token(pk), COUNT(*) '
        "FROM ks.t WHERE pk = 0 ORDER BY ck DESC, c2 ASC PER PARTITION LIMIT 2 LIMIT ? "
        "ALLOW FILTERING"
    )
    assert statement == a.Select(
        KS_T,
        (
            a.Selector(a.ColumnRef("cdc$time")),
            a.Selector(a.FunctionCall("writetime", (a.ColumnRef("v"),)), "wt"),
            a.Selector(a.FunctionCall("ttl", (a.ColumnRef("v"),))),
            a.Selector(a.FunctionCall("token", (a.ColumnRef("pk"),))),
            a.Selector(a.FunctionCall("count", (a.ColumnRef("*"),))),
        ),
        (PK0,),
        (a.Ordering("ck", descending=True), a.Ordering("c2")),
        limit=a.BindMarker(None, 0),
        per_partition_limit=INT("2"),
        allow_filtering=True,
        distinct=True,
    )


@pytest.mark.parametrize(
    ("text", "selectors", "json"),
    [
        ("SELECT json FROM t", ("json",), False),
        ("SELECT json AS j FROM t", ("json",), False),
        ("SELECT JSON json FROM t", ("json",), True),
        ("SELECT JSON * FROM t", (), True),
    ],
)
def test_json_keyword_or_column(text: str, selectors: tuple[str, ...], json: bool) -> None:
    statement = parse_statement(text)
    assert isinstance(statement, a.Select)
    assert tuple(s.expr.name for s in statement.selectors if isinstance(s.expr, a.ColumnRef)) == (
        selectors
    )
    assert statement.json is json


def test_batch_forms() -> None:
    doc_form = parse_statement(
        "BEGIN UNLOGGED BATCH;\n    UPDATE ks.t SET v = {} WHERE pk = 0 AND ck = 0;\n"
        "    INSERT INTO ks.t (pk, ck) VALUES (0, 1)\nAPPLY BATCH;"
    )
    assert doc_form == a.Batch(
        "UNLOGGED",
        (
            a.Update(KS_T, (a.SetColumn("v", a.MapLiteral(())),), (PK0, CK0)),
            a.Insert(KS_T, ("pk", "ck"), (INT("0"), INT("1"))),
        ),
    )
    counter = parse_statement(
        "BEGIN COUNTER BATCH USING TIMESTAMP 3 UPDATE t SET c = c + 1 WHERE pk = 0; APPLY BATCH"
    )
    assert isinstance(counter, a.Batch)
    assert (counter.kind, counter.using) == ("COUNTER", a.Using(timestamp=INT("3")))
    assert parse_statement("BEGIN BATCH APPLY BATCH") == a.Batch("LOGGED", ())


def test_insert_json_and_using() -> None:
    assert parse_statement(
        "INSERT INTO t JSON '{\"k\": 1}' DEFAULT NULL USING TTL 5 AND TIMESTAMP 7"
    ) == a.Insert(
        a.QualifiedName(None, "t"),
        (),
        (),
        a.Using(timestamp=INT("7"), ttl=INT("5")),
        json=STR('{"k": 1}'),
    )


@pytest.mark.parametrize(
    ("text", "kind", "name"),
    [
        ("DESCRIBE TABLE ks.t", "TABLE", a.QualifiedName("ks", "t")),
        ("DESC COLUMNFAMILY t", "TABLE", a.QualifiedName(None, "t")),
        ("describe type ks.ut", "TYPE", a.QualifiedName("ks", "ut")),
        ("DESCRIBE KEYSPACE ks", "KEYSPACE", a.QualifiedName(None, "ks")),
        ("DESCRIBE KEYSPACE", "KEYSPACE", None),
        ("DESC TABLES", "TABLES", None),
        ("DESC types", "TYPES", None),
        ("DESCRIBE KEYSPACES", "KEYSPACES", None),
        ("DESCRIBE FULL SCHEMA", "SCHEMA", None),
        ("DESCRIBE CLUSTER", "CLUSTER", None),
        ("DESCRIBE ks", "KEYSPACE", a.QualifiedName(None, "ks")),
        ("DESCRIBE ks.t", "TABLE", a.QualifiedName("ks", "t")),
        ("DESCRIBE tables.t", "TABLE", a.QualifiedName("tables", "t")),
    ],
)
def test_describe(text: str, kind: a.DescribeKind, name: a.QualifiedName | None) -> None:
    assert parse_statement(text) == a.Describe(kind, name)


def test_type_statements() -> None:
    assert parse_statement("CREATE TYPE ks.ut (a int, b frozen<tuple<int, text>>)") == (
        a.CreateType(
            a.QualifiedName("ks", "ut"),
            (
                ("a", a.TypeRef("int")),
                (
                    "b",
                    a.TypeRef(
                        "frozen", (a.TypeRef("tuple", (a.TypeRef("int"), a.TypeRef("text"))),)
                    ),
                ),
            ),
        )
    )
    assert parse_statement("ALTER TYPE ut ADD d int") == a.AlterType(
        a.QualifiedName(None, "ut"), add=("d", a.TypeRef("int"))
    )
    assert parse_statement("ALTER TYPE ut RENAME a TO b AND c TO d") == a.AlterType(
        a.QualifiedName(None, "ut"), renames=(("a", "b"), ("c", "d"))
    )
    assert parse_statement("TRUNCATE ks.t") == parse_statement("TRUNCATE TABLE ks.t")


def test_vector_type() -> None:
    statement = parse_statement("CREATE TABLE t (k int PRIMARY KEY, v vector<float, 3>)")
    assert isinstance(statement, a.CreateTable)
    assert statement.columns[1].type == a.TypeRef("vector", (a.TypeRef("float"),), size=3)


def test_unreserved_keywords_as_names() -> None:
    statement = parse_statement(
        "UPDATE key.type SET ttl = 1, timestamp = 2, writetime = 3, values = 4, status = 5 "
        "WHERE key = 0"
    )
    assert isinstance(statement, a.Update)
    assert statement.table == a.QualifiedName("key", "type")
    assert [x.column for x in statement.assignments] == [
        "ttl",
        "timestamp",
        "writetime",
        "values",
        "status",
    ]


def test_deep_nesting_is_a_syntax_error() -> None:
    with pytest.raises(CqlSyntaxError, match="nested deeper"):
        parse_statement("INSERT INTO t (v) VALUES (" + "[" * 5000 + "]" * 5000 + ")")
    with pytest.raises(CqlSyntaxError, match="nested deeper"):
        parse_statement(
            "CREATE TABLE t (k int PRIMARY KEY, v " + "list<" * 5000 + "int" + ">" * 5000 + ")"
        )
    with pytest.raises(CqlSyntaxError, match="nested deeper"):
        parse_statement("INSERT INTO t (v) VALUES (" + "(int) " * 5000 + "1)")


@pytest.mark.parametrize(
    "text",
    [
        "CREATE TABLE ks.t (a int, , b int, PRIMARY KEY (a))",
        "CREATE TABLE ks.t (a int,,, b int, PRIMARY KEY (a),)",
        "CREATE TABLE ks.t (a int, b int, PRIMARY KEY (a), , )",
    ],
)
def test_empty_column_entries_after_a_comma_are_taken(text: str) -> None:
    """ScyllaDB's Cql.g: ``'(' cfamColumns ( ',' cfamColumns? )* ')'``."""
    stmt = parse_statement(text)
    assert isinstance(stmt, a.CreateTable)
    assert [c.name for c in stmt.columns] == ["a", "b"] and stmt.partition_key == ("a",)


def test_the_first_column_entry_may_not_be_empty() -> None:
    with pytest.raises(CqlSyntaxError):
        parse_statement("CREATE TABLE ks.t (, a int PRIMARY KEY)")
