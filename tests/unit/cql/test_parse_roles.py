"""The role and permission grammar: every form Cassandra 4 accepts, the AST it gives, the
canonical text it renders back to, its syntax errors, and passwords kept out of them."""

from __future__ import annotations

import re

import pytest

from cqlcdc.cql import parse_script, parse_statement, render
from cqlcdc.cql.ast import (
    AlterRole,
    CreateRole,
    DropRole,
    GrantPermissions,
    GrantRole,
    ListPermissions,
    ListRoles,
    Resource,
    RevokePermissions,
    RevokeRole,
    RoleOptions,
    Statement,
)
from cqlcdc.errors import CqlError, CqlSyntaxError

ALL_KS = Resource("ALL KEYSPACES")
KS = Resource("KEYSPACE", name="ks")
T = Resource("TABLE", "ks", "t")


@pytest.mark.parametrize(
    ("cql", "node"),
    [
        ("CREATE ROLE r", CreateRole("r")),
        ("create role R", CreateRole("r")),  # an identifier is lower-cased
        ('CREATE ROLE "Mixed Case"', CreateRole("Mixed Case")),
        ("CREATE ROLE 'Str ing'", CreateRole("Str ing")),
        ("CREATE ROLE IF NOT EXISTS r", CreateRole("r", if_not_exists=True)),
        (
            "CREATE ROLE IF NOT EXISTS r WITH PASSWORD = 'pw' AND LOGIN = true "
            "AND SUPERUSER = false AND OPTIONS = {'a': 'b', 'n': 1}",
            CreateRole(
                "r",
                RoleOptions(
                    password="pw", login=True, superuser=False, options=(("a", "b"), ("n", "1"))
                ),
                if_not_exists=True,
            ),
        ),
        (
            "CREATE ROLE r WITH SUPERUSER = TRUE AND LOGIN = False",
            CreateRole("r", RoleOptions(login=False, superuser=True)),
        ),
        ("CREATE ROLE r WITH PASSWORD = $$p'w$$", CreateRole("r", RoleOptions(password="p'w"))),
        ("CREATE ROLE r WITH PASSWORD = 'it''s'", CreateRole("r", RoleOptions(password="it's"))),
        ("CREATE ROLE r WITH OPTIONS = {}", CreateRole("r", RoleOptions(options=()))),
        # legacy users: LOGIN always, the name's case kept even unquoted
        (
            "CREATE USER Bob WITH PASSWORD 'pw' SUPERUSER",
            CreateRole("Bob", RoleOptions(password="pw", login=True, superuser=True), user=True),
        ),
        (
            "CREATE USER IF NOT EXISTS 'bob' WITH PASSWORD 'pw' NOSUPERUSER",
            CreateRole(
                "bob", RoleOptions(password="pw", login=True, superuser=False), True, user=True
            ),
        ),
        ("CREATE USER bob", CreateRole("bob", RoleOptions(login=True, superuser=False), user=True)),
        ("ALTER ROLE r WITH PASSWORD = 'x'", AlterRole("r", RoleOptions(password="x"))),
        ("ALTER ROLE r WITH LOGIN = false", AlterRole("r", RoleOptions(login=False))),
        ("ALTER ROLE r", AlterRole("r")),
        (
            "ALTER USER Bob WITH PASSWORD 'x' NOSUPERUSER",
            AlterRole("Bob", RoleOptions(password="x", superuser=False), user=True),
        ),
        ("ALTER USER bob SUPERUSER", AlterRole("bob", RoleOptions(superuser=True), user=True)),
        ("DROP ROLE r", DropRole("r")),
        ("DROP ROLE IF EXISTS 'R'", DropRole("R", if_exists=True)),
        ("DROP USER Bob", DropRole("Bob", user=True)),
        ("DROP USER IF EXISTS bob", DropRole("bob", if_exists=True, user=True)),
        ("GRANT r TO r2", GrantRole("r", "r2")),
        ("GRANT 'R' TO \"R2\"", GrantRole("R", "R2")),
        ("GRANT all TO r2", GrantRole("all", "r2")),  # ALL is not reserved: a role named all
        ("REVOKE r FROM r2", RevokeRole("r", "r2")),
        ("GRANT ALL PERMISSIONS ON ALL KEYSPACES TO r", GrantPermissions(None, ALL_KS, "r")),
        ("GRANT ALL ON KEYSPACE ks TO r", GrantPermissions(None, KS, "r")),
        ("GRANT SELECT ON KEYSPACE ks TO r", GrantPermissions(("SELECT",), KS, "r")),
        ("GRANT SELECT ON TABLE ks.t TO r", GrantPermissions(("SELECT",), T, "r")),
        ("GRANT SELECT PERMISSION ON ks.t TO r", GrantPermissions(("SELECT",), T, "r")),
        ("GRANT MODIFY ON COLUMNFAMILY ks.t TO r", GrantPermissions(("MODIFY",), T, "r")),
        (
            "GRANT MODIFY ON t TO r",
            GrantPermissions(("MODIFY",), Resource("TABLE", None, "t"), "r"),
        ),
        (
            'GRANT ALTER ON "Ks"."T" TO r',
            GrantPermissions(("ALTER",), Resource("TABLE", "Ks", "T"), "r"),
        ),
        (
            "GRANT SELECT ON role TO r",  # the table named role
            GrantPermissions(("SELECT",), Resource("TABLE", None, "role"), "r"),
        ),
        (
            "GRANT ALTER ON ROLE r2 TO r",
            GrantPermissions(("ALTER",), Resource("ROLE", name="r2"), "r"),
        ),
        (
            "GRANT DESCRIBE ON ALL ROLES TO r",
            GrantPermissions(("DESCRIBE",), Resource("ALL ROLES"), "r"),
        ),
        (
            "GRANT ALL ON ROLE 'Bob' TO r",
            GrantPermissions(None, Resource("ROLE", name="Bob"), "r"),
        ),
        # several at once (Cassandra 5's form), kept in Cassandra's order, narrowed to
        # those the resource supports as Cassandra's filterPermissions narrows them
        ("GRANT MODIFY, SELECT ON ks.t TO r", GrantPermissions(("SELECT", "MODIFY"), T, "r")),
        ("GRANT CREATE, SELECT ON ks.t TO r", GrantPermissions(("SELECT",), T, "r")),
        ("REVOKE SELECT ON ks.t FROM r", RevokePermissions(("SELECT",), T, "r")),
        ("REVOKE ALL ON ALL KEYSPACES FROM r", RevokePermissions(None, ALL_KS, "r")),
        ("LIST ROLES", ListRoles()),
        ("LIST ROLES OF r", ListRoles("r")),
        ("LIST ROLES OF 'R' NORECURSIVE", ListRoles("R", recursive=False)),
        ("LIST ROLES NORECURSIVE", ListRoles(recursive=False)),
        ("LIST USERS", ListRoles(recursive=False, users=True)),
        ("LIST ALL", ListPermissions(None)),
        ("LIST ALL PERMISSIONS", ListPermissions(None)),
        ("LIST ALL PERMISSIONS OF r", ListPermissions(None, of="r")),
        ("LIST ALL ON ALL KEYSPACES", ListPermissions(None, ALL_KS)),
        ("LIST SELECT ON ks.t OF r NORECURSIVE", ListPermissions(("SELECT",), T, "r", False)),
        ("LIST MODIFY PERMISSION ON KEYSPACE ks", ListPermissions(("MODIFY",), KS)),
        ("LIST ALL NORECURSIVE", ListPermissions(None, recursive=False)),
    ],
)
def test_accepted_forms(cql: str, node: Statement) -> None:
    assert parse_statement(cql) == node
    assert parse_statement(cql + ";") == node
    assert parse_statement(render(node)) == node  # the rendering reads back the same


@pytest.mark.parametrize(
    "line",
    [
        "CREATE ROLE r",
        "CREATE ROLE IF NOT EXISTS r WITH PASSWORD = 'p''w' AND LOGIN = true AND SUPERUSER = "
        "false AND OPTIONS = {'a': 'b'}",
        "CREATE ROLE 'Mixed' WITH LOGIN = false",
        "CREATE USER bob WITH PASSWORD 'pw' SUPERUSER",
        "CREATE USER IF NOT EXISTS 'Bob' NOSUPERUSER",
        "ALTER ROLE r WITH SUPERUSER = true",
        "ALTER USER 'Bob' WITH PASSWORD 'x'",
        "DROP ROLE IF EXISTS r",
        "DROP USER 'Bob'",
        "GRANT r TO 'select'",
        "REVOKE r FROM r2",
        "GRANT ALL PERMISSIONS ON ALL KEYSPACES TO r",
        "GRANT SELECT, MODIFY ON TABLE ks.t TO r",
        "GRANT ALTER ON TABLE t TO r",
        'REVOKE DROP ON KEYSPACE "Ks" FROM r',
        "GRANT AUTHORIZE ON ROLE 'R 2' TO r",
        "REVOKE DESCRIBE ON ALL ROLES FROM r",
        "LIST ROLES OF r NORECURSIVE",
        "LIST USERS",
        "LIST ALL PERMISSIONS ON TABLE ks.t OF r NORECURSIVE",
        "LIST SELECT ON KEYSPACE ks",
    ],
)
def test_canonical_text_is_an_identity(line: str) -> None:
    assert render(parse_statement(line)) == line


@pytest.mark.parametrize(
    ("cql", "column", "message"),
    [
        ("CREATE ROLE", 12, "mismatched input '<EOF>' expecting IDENT"),
        ("CREATE ROLE ?", 13, "Bind variables cannot be used for role names"),
        ("GRANT r TO :who", 12, "Bind variables cannot be used for role names"),
        ("CREATE ROLE r WITH FOO = 1", 20, "no viable alternative at input 'FOO'"),
        ("CREATE ROLE r WITH LOGIN = 1", 28, "mismatched input '1' expecting BOOLEAN"),
        ("CREATE ROLE r WITH LOGIN = 'true'", 28, "mismatched input ''true'' expecting BOOLEAN"),
        ("CREATE ROLE r WITH LOGIN true", 26, "mismatched input 'true' expecting '='"),
        (
            "CREATE ROLE r WITH LOGIN = true AND LOGIN = false",
            37,
            "Multiple definition for property 'LOGIN'",
        ),
        ("CREATE ROLE r WITH LOGIN = true AND", 36, "no viable alternative at input '<EOF>'"),
        ("CREATE ROLE r WITH OPTIONS = 'x'", 30, "mismatched input ''x'' expecting '{'"),
        (
            "CREATE ROLE r WITH OPTIONS = {'a': 'b', 'a': 'c'}",
            30,
            "Multiple definition for property a",
        ),
        (
            "CREATE ROLE r WITH OPTIONS = {'a': null}",
            30,
            "Invalid property value: null for property: a",
        ),
        ("CREATE ROLE r WITH OPTIONS = {'a': ?}", 30, "Invalid property value: ? for property: a"),
        ("CREATE ROLE r WITH OPTIONS = {null: 'a'}", 30, "Invalid property name: null"),
        (
            "CREATE ROLE r WITH HASHED PASSWORD = 'x'",
            20,
            "Role option HASHED PASSWORD is not supported",
        ),
        (
            "CREATE ROLE r WITH GENERATED PASSWORD",
            20,
            "Role option GENERATED PASSWORD is not supported",
        ),
        (
            "CREATE ROLE r WITH ACCESS TO ALL DATACENTERS",
            20,
            "Role option ACCESS TO DATACENTERS / ACCESS FROM CIDRS is not supported",
        ),
        (
            "CREATE USER u WITH HASHED PASSWORD 'x'",
            20,
            "Role option HASHED PASSWORD is not supported",
        ),
        (
            'CREATE USER "Bob"',
            13,
            "Quoted strings are are not supported for user names and USER is deprecated, please "
            "use ROLE",
        ),
        ("CREATE USER select", 13, "no viable alternative at input 'select'"),
        ("CREATE USER u SUPER", 15, "mismatched input 'SUPER' expecting EOF"),
        ("CREATE ROLE r IF NOT EXISTS", 15, "mismatched input 'IF' expecting EOF"),
        ("DROP ROLE", 10, "mismatched input '<EOF>' expecting IDENT"),
        ("GRANT TO r", 7, "no viable alternative at input 'TO'"),
        ("GRANT r r2", 9, "mismatched input 'r2' expecting K_TO"),
        ("REVOKE r TO r2", 10, "mismatched input 'TO' expecting K_FROM"),
        ("GRANT SELECT ks.t TO r", 14, "mismatched input 'ks' expecting K_ON"),
        ("GRANT SELECT ON ks.t", 21, "mismatched input '<EOF>' expecting K_TO"),
        ("GRANT SELECT ON TO r", 17, "no viable alternative at input 'TO'"),
        ("GRANT INSERT ON ks.t TO r", 7, "no viable alternative at input 'INSERT'"),
        ("GRANT SELECT, ON ks.t TO r", 15, "no viable alternative at input 'ON'"),
        (
            "GRANT CREATE ON ks.t TO r",
            17,
            "Resource type DataResource does not support any of the requested permissions",
        ),
        (
            "GRANT DESCRIBE ON KEYSPACE ks TO r",
            19,
            "Resource type DataResource does not support any of the requested permissions",
        ),
        (
            "GRANT EXECUTE ON ALL KEYSPACES TO r",
            18,
            "Resource type DataResource does not support any of the requested permissions",
        ),
        (
            "GRANT SELECT ON ALL ROLES TO r",
            17,
            "Resource type RoleResource does not support any of the requested permissions",
        ),
        (
            "REVOKE MODIFY ON ROLE r2 FROM r",
            18,
            "Resource type RoleResource does not support any of the requested permissions",
        ),
        (
            "GRANT EXECUTE ON ALL FUNCTIONS TO r",
            22,
            "FUNCTIONS resources are not supported: cqlcdc has no user-defined functions and "
            "no JMX",
        ),
        (
            "GRANT EXECUTE ON FUNCTION ks.f(int) TO r",
            18,
            "FUNCTION resources are not supported: cqlcdc has no user-defined functions and no JMX",
        ),
        (
            "GRANT SELECT ON MBEAN 'org.apache:type=x' TO r",
            17,
            "MBEAN resources are not supported: cqlcdc has no user-defined functions and no JMX",
        ),
        ("LIST", 5, "no viable alternative at input '<EOF>'"),
        ("LIST ROLES OF", 14, "mismatched input '<EOF>' expecting IDENT"),
        ("LIST USERS OF r", 12, "mismatched input 'OF' expecting EOF"),
        ("LIST ALL OF r ON ks.t", 15, "mismatched input 'ON' expecting EOF"),
    ],
)
def test_syntax_errors(cql: str, column: int, message: str) -> None:
    with pytest.raises(CqlSyntaxError) as info:
        parse_statement(cql)
    assert info.value.message == f"line 1:{column} {message}"
    assert info.value.code == 0x2000


SECRET = "Sup3r-s3cret"


@pytest.mark.parametrize(
    "cql",
    [
        f"CREATE ROLE r WITH PASSWORD '{SECRET}'",
        f"CREATE ROLE r WITH PASSWORD == '{SECRET}'",
        f"CREATE ROLE r WITH PASSWORD = {SECRET}",
        f'CREATE ROLE r WITH PASSWORD = "{SECRET}"',
        f"CREATE ROLE r WITH PASSWORD = ['{SECRET}']",
        f"CREATE ROLE r WITH PASSWORD = ('{SECRET}')",
        f"CREATE ROLE r WITH PASSWORD = -'{SECRET}'",
        f"CREATE ROLE r WITH PASSWORD = 0x{SECRET}",
        f"CREATE ROLE r WITH PASSWORD = '{SECRET}' '{SECRET}'",
        f"CREATE ROLE r WITH PASSWORD = $${SECRET}$$ $${SECRET}$$",
        f"CREATE ROLE r WITH PASSWORD = '{SECRET}",
        f"CREATE ROLE r WITH PASSWORD = $${SECRET}",
        # a quote not doubled: the rest of the password follows the literal
        f"CREATE ROLE r WITH PASSWORD = 'Sup3r'{SECRET}'' AND LOGIN = true",
        f"CREATE ROLE r WITH PASSWORD = 'Sup3r' {SECRET}' AND LOGIN = true'",
        f"CREATE ROLE r WITH LOGIN = true AND PASSWORD = 'x'{SECRET}''",
        f"CREATE USER u WITH PASSWORD = '{SECRET}'",
        f"CREATE USER u WITH PASSWORD {SECRET}",
        f"CREATE USER u WITH PASSWORD 'x'{SECRET}''",
        f"ALTER USER u WITH PASSWORD 'x' {SECRET}",
        f"ALTER ROLE r WITH PASSWORD = '{SECRET}' '{SECRET}'",
        f"ALTER ROLE r WITH PASSWORD = 'x' {SECRET} AND LOGIN = true",
        f"CREATE ROLE r WITH PASSWORD = '{SECRET}' AND LOGIN = maybe",
        f"CREATE ROLE r WITH PASSWORD = '{SECRET}' AND PASSWORD = 'x'",
        f"CREATE ROLE r WITH PASSWORD = '{SECRET}' AND HASHED PASSWORD = 'x'",
        f"CREATE ROLE r WITH PASSWORD = '{SECRET}' AND",
        f"CREATE ROLE r WITH PASSWORD = '{SECRET}' garbage",
    ],
)
def test_a_password_never_appears_in_an_error(cql: str) -> None:
    with pytest.raises(CqlError) as info:
        parse_statement(cql)
    text = f"{info.value} {info.value!r} {info.value.args}"
    assert "3r-s3" not in text and "s3cret" not in text
    for half in re.split(r"\W", SECRET):
        assert half not in str(info.value).split("'")


def test_hidden_tokens_show_as_stars_at_their_position() -> None:
    with pytest.raises(CqlSyntaxError) as info:
        parse_statement(f"CREATE ROLE r WITH PASSWORD = 'x'{SECRET}' AND LOGIN = true'")
    assert info.value.message == "line 1:34 extraneous input '****' after the password"
    with pytest.raises(CqlSyntaxError) as info:
        parse_statement(f"CREATE ROLE r WITH PASSWORD {SECRET}")
    assert info.value.message == "line 1:29 mismatched input '****' expecting '='"


def test_a_password_never_appears_in_a_repr() -> None:
    for cql in [
        f"CREATE ROLE r WITH PASSWORD = '{SECRET}' AND LOGIN = true",
        f"CREATE USER u WITH PASSWORD '{SECRET}'",
        f"ALTER ROLE r WITH PASSWORD = '{SECRET}'",
    ]:
        node = parse_statement(cql)
        assert SECRET not in repr(node) and SECRET not in str(node)
        assert SECRET in render(node)  # rendering is CQL: the password is part of it


def test_role_statements_in_a_script() -> None:
    script = (
        "CREATE ROLE IF NOT EXISTS ops WITH PASSWORD = 'o;p' AND LOGIN = true;\n"
        "GRANT ALL ON KEYSPACE ks TO ops;\n"
        "LIST ALL PERMISSIONS OF ops;\n"
    )
    statements = [parsed for _, parsed in parse_script(script)]
    assert statements == [
        CreateRole("ops", RoleOptions(password="o;p", login=True), if_not_exists=True),
        GrantPermissions(None, KS, "ops"),
        ListPermissions(None, of="ops"),
    ]
