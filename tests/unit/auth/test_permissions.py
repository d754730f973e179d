"""What each statement needs (Cassandra's checkAccess), and the resources it names."""

from __future__ import annotations

import pytest

from cqlcdc.auth import AUTH_STATEMENTS, READABLE_KEYSPACES, required_permissions
from cqlcdc.auth.resources import NO_KEYSPACE, Permission, Resource, permissions_of
from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import InvalidRequest

from .conftest import exactly


def needs(cql: str, keyspace: str | None = "ks") -> list[tuple[str, str]]:
    return [(str(p), str(r)) for p, r in required_permissions(parse_statement(cql), keyspace)]


TABLE = "<table ks.t>"


@pytest.mark.parametrize(
    ("cql", "expected"),
    [
        ("SELECT * FROM t", [("SELECT", TABLE)]),
        ("SELECT v FROM ks.t WHERE pk = 1", [("SELECT", TABLE)]),
        ("SELECT * FROM other.t", [("SELECT", "<table other.t>")]),
        ("SELECT * FROM ks.t_scylla_cdc_log", [("SELECT", "<table ks.t_scylla_cdc_log>")]),
        ("INSERT INTO t (pk) VALUES (1)", [("MODIFY", TABLE)]),
        ("INSERT INTO t JSON '{\"pk\": 1}'", [("MODIFY", TABLE)]),
        ("UPDATE t SET v = 1 WHERE pk = 1", [("MODIFY", TABLE)]),
        ("DELETE FROM t WHERE pk = 1", [("MODIFY", TABLE)]),
        ("DELETE v FROM ks.t WHERE pk = 1", [("MODIFY", TABLE)]),
        # a conditional write reads what it tests: SELECT too
        ("INSERT INTO t (pk) VALUES (1) IF NOT EXISTS", [("MODIFY", TABLE), ("SELECT", TABLE)]),
        ("UPDATE t SET v = 1 WHERE pk = 1 IF EXISTS", [("MODIFY", TABLE), ("SELECT", TABLE)]),
        ("UPDATE t SET v = 1 WHERE pk = 1 IF v = 0", [("MODIFY", TABLE), ("SELECT", TABLE)]),
        ("DELETE FROM t WHERE pk = 1 IF EXISTS", [("MODIFY", TABLE), ("SELECT", TABLE)]),
        ("DELETE FROM t WHERE pk = 1 IF v > 2", [("MODIFY", TABLE), ("SELECT", TABLE)]),
        (
            "BEGIN BATCH INSERT INTO t (pk) VALUES (1); UPDATE t SET v = 1 WHERE pk = 2; "
            "DELETE FROM ks.u WHERE pk = 3; INSERT INTO ks.t (pk) VALUES (4); APPLY BATCH",
            [("MODIFY", TABLE), ("MODIFY", "<table ks.u>")],
        ),
        (
            "BEGIN UNLOGGED BATCH INSERT INTO t (pk) VALUES (1) IF NOT EXISTS; APPLY BATCH",
            [("MODIFY", TABLE), ("SELECT", TABLE)],
        ),
        ("TRUNCATE t", [("MODIFY", TABLE)]),
        ("TRUNCATE TABLE ks.t", [("MODIFY", TABLE)]),
        (
            "CREATE KEYSPACE k2 WITH replication = {'class': 'SimpleStrategy', "
            "'replication_factor': 1}",
            [("CREATE", "<all keyspaces>")],
        ),
        (
            "ALTER KEYSPACE k2 WITH replication = {'class': 'SimpleStrategy', "
            "'replication_factor': 1}",
            [("ALTER", "<keyspace k2>")],
        ),
        ("DROP KEYSPACE k2", [("DROP", "<keyspace k2>")]),
        ("DROP KEYSPACE IF EXISTS k2", [("DROP", "<keyspace k2>")]),
        ("CREATE TABLE t2 (pk int PRIMARY KEY)", [("CREATE", "<keyspace ks>")]),
        ("CREATE TABLE k2.t2 (pk int PRIMARY KEY)", [("CREATE", "<keyspace k2>")]),
        ("ALTER TABLE t ADD w int", [("ALTER", TABLE)]),
        ("ALTER TABLE ks.t WITH cdc = {'enabled': true}", [("ALTER", TABLE)]),
        ("DROP TABLE t", [("DROP", TABLE)]),
        ("DROP TABLE IF EXISTS k2.t", [("DROP", "<table k2.t>")]),
        ("CREATE INDEX ON t (v)", [("ALTER", TABLE)]),
        ("CREATE INDEX IF NOT EXISTS i ON k2.t (KEYS(m))", [("ALTER", "<table k2.t>")]),
        ("CREATE TYPE addr (street text)", [("CREATE", "<keyspace ks>")]),
        ("ALTER TYPE k2.addr ADD city text", [("ALTER", "<keyspace k2>")]),
        ("DROP TYPE addr", [("DROP", "<keyspace ks>")]),
        # only a login, as in Cassandra 4
        ("USE other", []),
        ("DESCRIBE KEYSPACES", []),
        ("DESCRIBE TABLE ks.t", []),
        # role statements: the permission on the role resource...
        ("CREATE ROLE r", [("CREATE", "<all roles>")]),
        ("CREATE USER u WITH PASSWORD 'p'", [("CREATE", "<all roles>")]),
        ("ALTER ROLE r WITH LOGIN = true", [("ALTER", "<role r>")]),
        ("DROP ROLE r", [("DROP", "<role r>")]),
        ("DROP USER IF EXISTS u", [("DROP", "<role u>")]),
        ("GRANT r TO r2", [("AUTHORIZE", "<role r>")]),
        ("REVOKE r FROM r2", [("AUTHORIZE", "<role r>")]),
        # ...and for permissions, AUTHORIZE and every permission given away
        (
            "GRANT SELECT ON ks.t TO r",
            [("AUTHORIZE", TABLE), ("SELECT", TABLE)],
        ),
        (
            "REVOKE MODIFY ON KEYSPACE k2 FROM r",
            [("AUTHORIZE", "<keyspace k2>"), ("MODIFY", "<keyspace k2>")],
        ),
        (
            "GRANT ALL ON t TO r",
            [("AUTHORIZE", TABLE)]
            + [(p, TABLE) for p in ("ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE")],
        ),
        (
            "GRANT ALL PERMISSIONS ON ALL ROLES TO r",
            [("AUTHORIZE", "<all roles>")]
            + [(p, "<all roles>") for p in ("CREATE", "ALTER", "DROP", "AUTHORIZE", "DESCRIBE")],
        ),
        # what a LIST shows depends on who asks, not on a grant
        ("LIST ROLES", []),
        ("LIST USERS", []),
        ("LIST ALL PERMISSIONS OF r", []),
    ],
)
def test_required_permissions(cql: str, expected: list[tuple[str, str]]) -> None:
    assert needs(cql) == expected


@pytest.mark.parametrize(
    "cql",
    [
        "SELECT * FROM system.local",
        "SELECT * FROM system.peers",
        "SELECT * FROM system_schema.tables",
        "SELECT * FROM system_schema.columns WHERE keyspace_name = 'ks'",
        "SELECT * FROM system_distributed.cdc_streams_descriptions_v2",
        "SELECT * FROM system_virtual_schema.keyspaces",
    ],
)
def test_system_keyspaces_are_readable_by_any_login(cql: str) -> None:
    assert needs(cql) == []
    assert needs(cql, None) == []


def test_which_keyspaces_are_readable() -> None:
    assert {
        "system",
        "system_schema",
        "system_distributed",
        "system_virtual_schema",
    } == READABLE_KEYSPACES
    # the changes a table's feeds hold are data: they need a grant
    assert needs("SELECT * FROM system_cqlcdc.feeds") == [("SELECT", "<table system_cqlcdc.feeds>")]


def test_writes_to_readable_keyspaces_still_need_modify() -> None:
    assert needs("INSERT INTO system.local (key) VALUES ('x')") == [
        ("MODIFY", "<table system.local>")
    ]


@pytest.mark.parametrize(
    "cql",
    [
        "SELECT * FROM t",
        "INSERT INTO t (pk) VALUES (1)",
        "UPDATE t SET v = 1 WHERE pk = 1",
        "DELETE FROM t WHERE pk = 1",
        "BEGIN BATCH INSERT INTO t (pk) VALUES (1); APPLY BATCH",
        "TRUNCATE t",
        "CREATE TABLE t (pk int PRIMARY KEY)",
        "ALTER TABLE t ADD w int",
        "DROP TABLE t",
        "CREATE TYPE addr (street text)",
        "GRANT SELECT ON t TO r",
    ],
)
def test_a_table_without_keyspace_and_no_current_one(cql: str) -> None:
    with pytest.raises(InvalidRequest, match=exactly(NO_KEYSPACE)):
        required_permissions(parse_statement(cql), None)


def test_every_statement_kind_has_a_rule() -> None:
    """Each kind the grammar makes (except those still being added elsewhere) is covered,
    so a new statement cannot slip through unchecked."""
    kinds = {
        ast.Select,
        ast.Insert,
        ast.Update,
        ast.Delete,
        ast.Batch,
        ast.Truncate,
        ast.UseKeyspace,
        ast.Describe,
        ast.CreateKeyspace,
        ast.AlterKeyspace,
        ast.DropKeyspace,
        ast.CreateTable,
        ast.AlterTable,
        ast.DropTable,
        ast.CreateType,
        ast.AlterType,
        ast.DropType,
        ast.CreateIndex,
        *AUTH_STATEMENTS,
    }
    from cqlcdc.auth.permissions import _RULES

    assert kinds <= set(_RULES)


def test_drop_index_needs_alter_on_the_index_s_table() -> None:
    indexes = {("ks", "t_v_idx"): "t", ("k2", "i"): "u"}

    def index_table(keyspace: str, index: str) -> str | None:
        return indexes.get((keyspace, index))

    def drop(cql: str, keyspace: str | None) -> list[tuple[str, str]]:
        stmt = parse_statement(cql)
        return [(str(p), str(r)) for p, r in required_permissions(stmt, keyspace, index_table)]

    assert drop("DROP INDEX t_v_idx", "ks") == [("ALTER", TABLE)]
    assert drop("DROP INDEX IF EXISTS k2.i", "ks") == [("ALTER", "<table k2.u>")]
    # no such index: nothing needed, the statement itself says so (Cassandra's authorize)
    assert drop("DROP INDEX ks.nope", None) == []
    assert required_permissions(parse_statement("DROP INDEX ks.t_v_idx"), None) == []
    with pytest.raises(InvalidRequest, match=exactly(NO_KEYSPACE)):
        drop("DROP INDEX t_v_idx", None)


def test_an_unknown_statement_is_refused() -> None:
    class Other:
        pass

    with pytest.raises(InvalidRequest, match=exactly("Other has no permission rule")):
        required_permissions(Other(), "ks")  # type: ignore[arg-type]


# -- resources --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "name", "text", "chain"),
    [
        (Resource.all_keyspaces(), "data", "<all keyspaces>", ["data"]),
        (Resource.keyspace("ks"), "data/ks", "<keyspace ks>", ["data/ks", "data"]),
        (Resource.table("ks", "t"), "data/ks/t", "<table ks.t>", ["data/ks/t", "data/ks", "data"]),
        (Resource.all_roles(), "roles", "<all roles>", ["roles"]),
        (Resource.role("Bob/x"), "roles/Bob/x", "<role Bob/x>", ["roles/Bob/x", "roles"]),
    ],
)
def test_resource_names(resource: Resource, name: str, text: str, chain: list[str]) -> None:
    assert (resource.name, str(resource)) == (name, text)
    assert [r.name for r in resource.chain()] == chain
    assert Resource.from_name(name) == resource
    assert all(r.contains(resource) for r in resource.chain())


def test_containment() -> None:
    ks, t = Resource.keyspace("ks"), Resource.table("ks", "t")
    assert ks.contains(t) and not t.contains(ks)
    assert not Resource.keyspace("k").contains(Resource.table("ks", "t"))
    assert not Resource.all_roles().contains(t)


@pytest.mark.parametrize("name", ["", "functions", "data//t", "data/a/b/c", "mbean/x"])
def test_from_name_refuses_other_texts(name: str) -> None:
    with pytest.raises(ValueError, match="not a resource name"):
        Resource.from_name(name)


def test_applicable_permissions_are_cassandra_s() -> None:
    def names(resource: Resource) -> list[str]:
        return [str(p) for p in resource.applicable_permissions()]

    data = ["CREATE", "ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"]
    assert names(Resource.all_keyspaces()) == names(Resource.keyspace("ks")) == data
    assert names(Resource.table("ks", "t")) == ["ALTER", "DROP", "SELECT", "MODIFY", "AUTHORIZE"]
    assert names(Resource.all_roles()) == ["CREATE", "ALTER", "DROP", "AUTHORIZE", "DESCRIBE"]
    assert names(Resource.role("r")) == ["ALTER", "DROP", "AUTHORIZE"]
    assert permissions_of(None, Resource.role("r")) == Resource.role("r").applicable_permissions()
    assert permissions_of(("SELECT",), Resource.keyspace("ks")) == (Permission.SELECT,)


def test_permission_order_is_cassandra_s() -> None:
    assert [p.ordinal for p in Permission] == list(range(8))
    assert [str(p) for p in Permission] == [
        "CREATE",
        "ALTER",
        "DROP",
        "SELECT",
        "MODIFY",
        "AUTHORIZE",
        "DESCRIBE",
        "EXECUTE",
    ]


def test_from_ast_takes_the_session_keyspace() -> None:
    stmt = parse_statement("GRANT SELECT ON t TO r")
    assert isinstance(stmt, ast.GrantPermissions)
    assert Resource.from_ast(stmt.resource, "ks") == Resource.table("ks", "t")
    with pytest.raises(InvalidRequest, match=exactly(NO_KEYSPACE)):
        Resource.from_ast(stmt.resource, None)
