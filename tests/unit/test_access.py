"""A session's access control (cqlcdc.access) over a stand-in coordinator: the checks before
a statement, the bulk path's all-or-nothing check, role statements under the lock, and the
grants a CREATE gives and a DROP takes away."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cqlcdc import access
from cqlcdc.auth import Permission, Resource, RoleStore, passwords, roles
from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import InvalidRequest, Unauthorized

P = Permission
KS = "CREATE KEYSPACE {} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"


class FakeCatalog:
    """Keyspaces and their tables (``live``); ks.t has the index t_v_idx."""

    def __init__(self) -> None:
        self.live: dict[str, set[str]] = {"ks": {"t"}}

    def keyspace(self, name: str) -> object | None:
        return self if name in self.live else None

    def table(self, keyspace: str, name: str) -> object | None:
        return self if name in self.live.get(keyspace, ()) else None

    def tables(self, keyspace: str) -> list[SimpleNamespace]:
        indexes = {("ks", "t"): ["t_v_idx"]}
        return [
            SimpleNamespace(
                name=t, indexes=[SimpleNamespace(name=i) for i in indexes.get((keyspace, t), [])]
            )
            for t in sorted(self.live.get(keyspace, ()))
        ]


class FakeCoordinator:
    """What cqlcdc.access uses of a Coordinator: roles, catalog, lock and run_ddl."""

    def __init__(self, store: RoleStore) -> None:
        self.roles = store
        self.catalog = FakeCatalog()
        self.lock = threading.RLock()

    def run_ddl(self, stmt: ast.Statement, keyspace: str | None) -> str | None:
        tables = self.catalog.live
        match stmt:
            case ast.CreateKeyspace():
                tables.setdefault(stmt.name, set())
            case ast.DropKeyspace():
                tables.pop(stmt.name, None)
            case ast.CreateTable():
                tables[stmt.name.keyspace or keyspace or ""].add(stmt.name.name)
            case ast.DropTable():
                tables[stmt.name.keyspace or keyspace or ""].discard(stmt.name.name)
        return None


@pytest.fixture
def c(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    cheap = passwords.ScryptParams(4, 8, 1)
    monkeypatch.setattr(roles, "hash_password", lambda p: passwords.hash_password(p, cheap))
    store = RoleStore(tmp_path / "roles.json")
    store.create_role("admin", login=True, superuser=True)
    store.create_role("alice", login=True)
    return FakeCoordinator(store)


def test_check(c: Any) -> None:
    select = parse_statement("SELECT * FROM t")
    access.check(c, None, select, "ks")  # the owner process: nothing is checked
    access.check(c, "admin", select, "ks")
    with pytest.raises(
        Unauthorized, match=r"^User alice has no SELECT permission on <table ks\.t> or any"
    ):
        access.check(c, "alice", select, "ks")
    access.check(c, "alice", parse_statement("SELECT * FROM system.local"), None)
    with pytest.raises(InvalidRequest, match=r"^No keyspace has been specified"):
        access.check(c, "alice", select, None)
    c.roles.grant([P.SELECT], Resource.keyspace("ks"), "alice")
    access.check(c, "alice", select, "ks")


def test_permits_all_or_nothing_each_statement_once(
    c: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert = parse_statement("INSERT INTO ks.t (pk) VALUES (1)")
    other = parse_statement("INSERT INTO ks.u (pk) VALUES (1)")
    assert access.permits(c, None, [insert, other], None)
    assert not access.permits(c, "alice", [insert] * 3, None)
    c.roles.grant([P.MODIFY], Resource.table("ks", "t"), "alice")
    calls: list[ast.Statement] = []
    real = access.required_permissions

    def counting(stmt: ast.Statement, keyspace: str | None, index_table: Any = None) -> Any:
        calls.append(stmt)
        return real(stmt, keyspace, index_table)

    monkeypatch.setattr(access, "required_permissions", counting)
    assert access.permits(c, "alice", [insert] * 1000, None)
    assert len(calls) == 1
    assert not access.permits(c, "alice", [insert, other, insert], None)


def test_run_auth(c: Any) -> None:
    create = parse_statement("CREATE ROLE bob")
    assert isinstance(create, ast.CreateRole)
    with pytest.raises(Unauthorized, match=r"^You have to be logged in and not anonymous"):
        access.run_auth(c, None, True, create, None)
    access.run_auth(c, None, False, create, None)  # the owner process
    assert c.roles.exists("bob")
    grant = parse_statement("GRANT SELECT ON ks.nope TO bob")
    assert isinstance(grant, ast.GrantPermissions)
    with pytest.raises(InvalidRequest, match=r"^Resource <table ks\.nope> doesn't exist$"):
        access.run_auth(c, "admin", False, grant, None)
    grant = parse_statement("GRANT SELECT ON system.local TO bob")  # system tables exist
    assert isinstance(grant, ast.GrantPermissions)
    access.run_auth(c, "admin", False, grant, None)


def test_creators_get_every_permission_on_what_they_create(c: Any) -> None:
    c.roles.grant([P.CREATE], Resource.all_keyspaces(), "alice")
    access.run_ddl(c, "alice", parse_statement(KS.format("made")), None)
    access.run_ddl(c, "alice", parse_statement("CREATE TABLE x (pk int PRIMARY KEY)"), "made")
    assert c.roles.permissions_on("alice", Resource.keyspace("made")) == {
        P.CREATE,
        P.ALTER,
        P.DROP,
        P.SELECT,
        P.MODIFY,
        P.AUTHORIZE,
    }
    assert P.MODIFY in c.roles.permissions_on("alice", Resource.table("made", "x"))
    # IF NOT EXISTS over what is there already gives nothing
    access.run_ddl(
        c, "alice", parse_statement("CREATE TABLE IF NOT EXISTS ks.t (pk int PRIMARY KEY)"), None
    )
    assert c.roles.permissions_on("alice", Resource.table("ks", "t")) == frozenset()
    # the owner process is no role: nothing to grant
    access.run_ddl(c, None, parse_statement(KS.format("owned")), None)
    assert c.roles.list_permissions(None, [Resource.keyspace("owned")], list(P)) == []


def test_a_drop_forgets_the_grants_on_what_it_removed(c: Any) -> None:
    c.catalog.live["ks"].add("u")
    c.roles.grant([P.SELECT], Resource.table("ks", "t"), "alice")
    c.roles.grant([P.SELECT], Resource.table("ks", "u"), "alice")
    c.roles.grant([P.ALTER], Resource.keyspace("ks"), "alice")
    c.roles.grant([P.SELECT], Resource.table("system", "local"), "alice")
    access.run_ddl(c, "admin", parse_statement("DROP TABLE ks.t"), None)
    alice = c.roles.get("alice")
    assert sorted(alice.permissions) == ["data/ks", "data/ks/u", "data/system/local"]
    access.run_ddl(c, "admin", parse_statement("DROP KEYSPACE ks"), None)
    assert sorted(c.roles.get("alice").permissions) == ["data/system/local"]
    # a new keyspace of the same name starts without them
    access.run_ddl(c, "admin", parse_statement(KS.format("ks")), None)
    assert c.roles.permissions_on("alice", Resource.keyspace("ks")) == frozenset()


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (Resource.all_keyspaces(), True),
        (Resource.keyspace("ks"), True),
        (Resource.keyspace("nope"), False),
        (Resource.table("ks", "t"), True),
        (Resource.table("ks", "nope"), False),
        (Resource.keyspace("system"), True),
        (Resource.keyspace("system_schema"), True),
        (Resource.table("system", "local"), True),
        (Resource.table("system_schema", "tables"), True),
        (Resource.table("system", "nope"), False),
    ],
)
def test_exists(c: Any, resource: Resource, expected: bool) -> None:
    assert access.exists(c, resource) is expected


def test_indexes_need_alter_on_their_table(c: Any) -> None:
    create = parse_statement("CREATE INDEX ON ks.t (v)")
    drop = parse_statement("DROP INDEX ks.t_v_idx")
    for stmt in (create, drop):
        with pytest.raises(
            Unauthorized, match=r"^User alice has no ALTER permission on <table ks\.t> or any"
        ):
            access.check(c, "alice", stmt, None)
    # an index that does not exist needs nothing: the statement reports it
    access.check(c, "alice", parse_statement("DROP INDEX IF EXISTS ks.nope"), None)
    c.roles.grant([P.ALTER], Resource.table("ks", "t"), "alice")
    access.check(c, "alice", create, None)
    access.check(c, "alice", drop, None)
