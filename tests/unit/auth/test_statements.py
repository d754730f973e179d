"""Role and permission statements run against a RoleStore: Cassandra 4's checks, in its
order (checkAccess, then validate), its results and its messages word for word."""

from __future__ import annotations

from typing import Any

import pytest

from cqlcdc.auth import Performer, Permission, Resource, RoleStore, execute_auth
from cqlcdc.auth.resources import NO_KEYSPACE
from cqlcdc.auth.statements import (
    NOT_LOGGED_IN,
    PERMISSIONS_COLUMNS,
    ROLE_MANAGER,
    ROLES_COLUMNS,
    USERS_COLUMNS,
    grant_to_creator,
)
from cqlcdc.cql import ast, parse_statement
from cqlcdc.errors import AuthenticationFailed, CqlError, InvalidRequest, Unauthorized
from cqlcdc.storage.select import ResultSet

from .conftest import exactly

P = Permission
T = Resource.table("ks", "t")
TABLES = {"data/ks/t", "data/ks/u"}  # what exists besides keyspace ks (and the system ones)


def _exists(resource: Resource) -> bool:
    return resource.name in TABLES or resource.name in ("data", "data/ks")


def run(store: RoleStore, who: str | None, cql: str, keyspace: str | None = "ks") -> Any:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.AuthStatement)
    return execute_auth(stmt, Performer(who, store), keyspace, _exists)


def rows(result: ResultSet | None) -> list[tuple[Any, ...]]:
    assert result is not None
    return result.rows


def refused(store: RoleStore, who: str | None, cql: str, error: type[CqlError], msg: str) -> None:
    before = {name: store.get(name) for name in store.names()}
    with pytest.raises(error, match=exactly(msg)):
        run(store, who, cql)
    assert {name: store.get(name) for name in store.names()} == before  # nothing changed


def insufficient(who: str) -> str:
    return f"User {who} does not have sufficient privileges to perform the requested operation"


@pytest.fixture
def roles(store: RoleStore) -> RoleStore:
    """admin: a superuser; alice and bob: plain logins; dev: a group alice is in."""
    system = None
    run(
        store, system, "CREATE ROLE admin WITH PASSWORD = 'a' AND LOGIN = true AND SUPERUSER = true"
    )
    run(store, system, "CREATE ROLE alice WITH PASSWORD = 'wonder' AND LOGIN = true")
    run(store, system, "CREATE USER bob WITH PASSWORD 'builder'")
    run(store, system, "CREATE ROLE dev")
    run(store, system, "GRANT dev TO alice")
    return store


# -- anonymous sessions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "cql",
    [
        "CREATE ROLE r",
        "CREATE USER u WITH PASSWORD 'p'",
        "ALTER ROLE alice WITH PASSWORD = 'p'",
        "DROP ROLE IF EXISTS alice",
        "GRANT dev TO bob",
        "REVOKE dev FROM alice",
        "LIST ROLES",
        "LIST USERS",
        "GRANT SELECT ON ks.t TO alice",
        "REVOKE SELECT ON ks.t FROM alice",
        "LIST ALL PERMISSIONS",
    ],
)
def test_anonymous_sessions_may_not_manage_roles(roles: RoleStore, cql: str) -> None:
    stmt = parse_statement(cql)
    assert isinstance(stmt, ast.AuthStatement)
    with pytest.raises(Unauthorized, match=exactly(NOT_LOGGED_IN)):
        execute_auth(stmt, Performer(None, roles, anonymous=True), "ks", None)
    assert NOT_LOGGED_IN == "You have to be logged in and not anonymous to perform this request"


# -- CREATE -----------------------------------------------------------------------------------


def test_create_role_and_user(roles: RoleStore) -> None:
    admin, alice, bob, dev = (roles.get(n) for n in ("admin", "alice", "bob", "dev"))
    assert admin is not None and admin.is_superuser and admin.can_login
    assert alice is not None and not alice.is_superuser and alice.can_login
    assert bob is not None and (bob.is_superuser, bob.can_login) == (False, True)  # USER: LOGIN
    assert dev is not None and (dev.is_superuser, dev.can_login, dev.salted_hash) == (
        False,
        False,
        None,
    )
    assert roles.authenticate("bob", "builder").name == "bob"
    run(roles, None, "CREATE USER IF NOT EXISTS carol WITH PASSWORD 'c' SUPERUSER")
    carol = roles.get("carol")
    assert carol is not None and carol.is_superuser and carol.can_login


def test_the_creator_may_alter_drop_and_grant_what_it_created(roles: RoleStore) -> None:
    run(roles, "admin", "CREATE ROLE made")
    assert roles.permissions_on("admin", Resource.role("made")) == {P.ALTER, P.DROP, P.AUTHORIZE}
    made_by_admin = roles.get("admin")
    assert made_by_admin is not None and made_by_admin.permissions == {
        "roles/made": frozenset({P.ALTER, P.DROP, P.AUTHORIZE})
    }
    run(roles, None, "CREATE ROLE by_system")  # the system is no role: nothing granted
    assert roles.list_permissions(None, [Resource.role("by_system")], list(P)) == []


def test_create_needs_create_on_all_roles(roles: RoleStore) -> None:
    refused(roles, "alice", "CREATE ROLE r", Unauthorized, insufficient("alice"))
    run(roles, "admin", "GRANT CREATE ON ALL ROLES TO alice")
    run(roles, "alice", "CREATE ROLE r WITH SUPERUSER = false")
    assert roles.permissions_on("alice", Resource.role("r")) == {P.ALTER, P.DROP, P.AUTHORIZE}
    refused(
        roles,
        "alice",
        "CREATE ROLE boss WITH SUPERUSER = true",
        Unauthorized,
        "Only superusers can create a role with superuser status",
    )
    refused(
        roles,
        "alice",
        "CREATE USER boss WITH PASSWORD 'x' SUPERUSER",
        Unauthorized,
        "Only superusers can create a role with superuser status",
    )


def test_create_an_existing_role(roles: RoleStore) -> None:
    refused(roles, "admin", "CREATE ROLE alice", InvalidRequest, "alice already exists")
    refused(roles, "admin", "CREATE USER bob", InvalidRequest, "bob already exists")
    before = roles.get("alice")
    assert run(roles, "admin", "CREATE ROLE IF NOT EXISTS alice WITH SUPERUSER = true") is None
    assert roles.get("alice") == before
    # as in Cassandra the creator's grants are not given for a role that was already there
    assert roles.list_permissions(["admin"], None, list(P)) == []


def test_create_role_refusals(roles: RoleStore) -> None:
    refused(roles, "admin", "CREATE ROLE ''", InvalidRequest, "Role name can't be an empty string")
    refused(
        roles,
        "admin",
        "CREATE ROLE r WITH OPTIONS = {'a': 'b'}",
        InvalidRequest,
        f"{ROLE_MANAGER} doesn't support OPTIONS",
    )
    assert ROLE_MANAGER == "org.apache.cassandra.auth.CassandraRoleManager"
    # checkAccess comes first: no hint about options to one who may not create roles
    refused(
        roles, "bob", "CREATE ROLE r WITH OPTIONS = {'a': 'b'}", Unauthorized, insufficient("bob")
    )


# -- ALTER ------------------------------------------------------------------------------------


def test_a_role_may_change_its_own_password(roles: RoleStore) -> None:
    run(roles, "alice", "ALTER ROLE alice WITH PASSWORD = 'looking-glass'")
    assert roles.authenticate("alice", "looking-glass").name == "alice"
    with pytest.raises(AuthenticationFailed):
        roles.authenticate("alice", "wonder")
    run(roles, "bob", "ALTER USER bob WITH PASSWORD 'fixer'")
    assert roles.authenticate("bob", "fixer").name == "bob"


@pytest.mark.parametrize(
    ("cql", "message"),
    [
        ("ALTER ROLE alice WITH LOGIN = false", "You aren't allowed to alter LOGIN"),
        ("ALTER ROLE alice WITH OPTIONS = {'a': 'b'}", "You aren't allowed to alter OPTIONS"),
        (
            "ALTER ROLE alice WITH SUPERUSER = true",
            "You aren't allowed to alter your own superuser status or that of a role granted "
            "to you",
        ),
        (
            "ALTER ROLE dev WITH SUPERUSER = true",  # granted to alice
            "You aren't allowed to alter your own superuser status or that of a role granted "
            "to you",
        ),
        (
            "ALTER ROLE bob WITH SUPERUSER = true",
            "Only superusers are allowed to alter superuser status",
        ),
        ("ALTER ROLE bob WITH PASSWORD = 'mine'", insufficient("alice")),
        ("ALTER ROLE ghost WITH PASSWORD = 'mine'", insufficient("alice")),
    ],
)
def test_alter_refusals_for_a_plain_role(roles: RoleStore, cql: str, message: str) -> None:
    refused(roles, "alice", cql, Unauthorized, message)


def test_alter_another_role_with_alter_on_it(roles: RoleStore) -> None:
    run(roles, "admin", "GRANT ALTER ON ROLE bob TO alice")
    run(roles, "alice", "ALTER ROLE bob WITH LOGIN = false")
    bob = roles.get("bob")
    assert bob is not None and not bob.can_login
    refused(
        roles,
        "alice",
        "ALTER ROLE bob WITH SUPERUSER = true",
        Unauthorized,
        "Only superusers are allowed to alter superuser status",
    )


def test_alter_by_a_superuser(roles: RoleStore) -> None:
    run(roles, "admin", "ALTER USER bob SUPERUSER")
    assert roles.is_superuser("bob")
    run(roles, "admin", "ALTER ROLE bob WITH SUPERUSER = false AND LOGIN = false")
    bob = roles.get("bob")
    assert bob is not None and (bob.is_superuser, bob.can_login) == (False, False)
    refused(
        roles,
        "admin",
        "ALTER ROLE admin WITH SUPERUSER = false",
        Unauthorized,
        "You aren't allowed to alter your own superuser status or that of a role granted to you",
    )
    refused(roles, "admin", "ALTER ROLE bob", InvalidRequest, "ALTER [ROLE|USER] can't be empty")
    refused(roles, "admin", "ALTER USER bob", InvalidRequest, "ALTER [ROLE|USER] can't be empty")
    refused(
        roles, "admin", "ALTER ROLE ghost WITH LOGIN = true", InvalidRequest, "ghost doesn't exist"
    )
    refused(
        roles,
        "admin",
        "ALTER ROLE bob WITH OPTIONS = {}",
        InvalidRequest,
        f"{ROLE_MANAGER} doesn't support OPTIONS",
    )


# -- DROP -------------------------------------------------------------------------------------


def test_drop_role(roles: RoleStore) -> None:
    run(roles, "admin", "DROP ROLE dev")
    assert not roles.exists("dev") and roles.roles_of("alice") == {"alice"}
    refused(roles, "admin", "DROP ROLE dev", InvalidRequest, "dev doesn't exist")
    assert run(roles, "admin", "DROP ROLE IF EXISTS dev") is None
    run(roles, "admin", "DROP USER bob")
    assert not roles.exists("bob")


def test_drop_refusals(roles: RoleStore) -> None:
    refused(roles, "alice", "DROP ROLE bob", Unauthorized, insufficient("alice"))
    refused(roles, "alice", "DROP ROLE IF EXISTS ghost", Unauthorized, insufficient("alice"))
    refused(
        roles,
        "admin",
        "DROP ROLE admin",
        InvalidRequest,
        "Cannot DROP primary role for current login",
    )
    run(roles, "admin", "GRANT DROP ON ALL ROLES TO alice")
    refused(
        roles,
        "alice",
        "DROP ROLE admin",
        Unauthorized,
        "Only superusers can drop a role with superuser status",
    )
    refused(
        roles,
        "alice",
        "DROP ROLE alice",
        InvalidRequest,
        "Cannot DROP primary role for current login",
    )
    run(roles, "alice", "DROP ROLE bob")
    assert not roles.exists("bob")


# -- GRANT / REVOKE a role --------------------------------------------------------------------


def test_grant_and_revoke_roles(roles: RoleStore) -> None:
    run(roles, "admin", "GRANT dev TO bob")
    assert roles.roles_of("bob") == {"bob", "dev"}
    refused(roles, "admin", "GRANT bob TO dev", InvalidRequest, "bob is a member of dev")
    refused(roles, "admin", "GRANT dev TO dev", InvalidRequest, "dev is a member of dev")
    refused(roles, "admin", "GRANT ghost TO bob", InvalidRequest, "ghost doesn't exist")
    refused(roles, "admin", "GRANT dev TO ghost", InvalidRequest, "ghost doesn't exist")
    run(roles, "admin", "REVOKE dev FROM bob")
    refused(roles, "admin", "REVOKE dev FROM bob", InvalidRequest, "bob is not a member of dev")
    refused(roles, "admin", "REVOKE ghost FROM bob", InvalidRequest, "ghost doesn't exist")


def test_granting_a_role_needs_authorize_on_it(roles: RoleStore) -> None:
    refused(roles, "alice", "GRANT dev TO bob", Unauthorized, insufficient("alice"))
    run(roles, "admin", "GRANT AUTHORIZE ON ROLE dev TO alice")
    run(roles, "alice", "GRANT dev TO bob")
    run(roles, "alice", "REVOKE dev FROM bob")
    refused(roles, "alice", "GRANT admin TO alice", Unauthorized, insufficient("alice"))


# -- LIST ROLES / USERS -----------------------------------------------------------------------


def test_list_roles_for_a_superuser(roles: RoleStore) -> None:
    result = run(roles, "admin", "LIST ROLES")
    assert result.columns == list(ROLES_COLUMNS) == ["role", "super", "login", "options"]
    assert [row[:3] for row in result.rows] == [
        ("admin", True, True),
        ("alice", False, True),
        ("bob", False, True),
        ("dev", False, False),
    ]
    assert all(len(row[3]) == 0 for row in result.rows)
    assert [r[0] for r in rows(run(roles, "admin", "LIST ROLES OF alice"))] == ["alice", "dev"]
    run(roles, "admin", "CREATE ROLE eng")
    run(roles, "admin", "GRANT eng TO dev")
    assert [r[0] for r in rows(run(roles, "admin", "LIST ROLES OF alice"))] == [
        "alice",
        "dev",
        "eng",
    ]
    assert [r[0] for r in rows(run(roles, "admin", "LIST ROLES OF alice NORECURSIVE"))] == [
        "alice",
        "dev",
    ]
    refused(roles, "admin", "LIST ROLES OF ghost", InvalidRequest, "<role ghost> doesn't exist")


def test_list_roles_for_a_plain_role(roles: RoleStore) -> None:
    assert [r[0] for r in rows(run(roles, "alice", "LIST ROLES"))] == ["alice", "dev"]
    assert [r[0] for r in rows(run(roles, "alice", "LIST ROLES OF dev"))] == ["dev"]
    refused(
        roles,
        "alice",
        "LIST ROLES OF bob",
        Unauthorized,
        "You are not authorized to view roles granted to bob ",  # Cassandra's trailing space
    )
    run(roles, "admin", "GRANT DESCRIBE ON ALL ROLES TO alice")
    assert len(rows(run(roles, "alice", "LIST ROLES"))) == 4
    assert [r[0] for r in rows(run(roles, "alice", "LIST ROLES OF bob"))] == ["bob"]


def test_list_users(roles: RoleStore) -> None:
    run(roles, "admin", "ALTER ROLE dev WITH SUPERUSER = true")
    result = run(roles, "admin", "LIST USERS")
    assert result.columns == list(USERS_COLUMNS) == ["name", "super"]
    # logins only; a user is super through a granted role too (Roles.hasSuperuserStatus)
    assert result.rows == [("admin", True), ("alice", True), ("bob", False)]
    assert rows(run(roles, "bob", "LIST USERS")) == [("bob", False)]


# -- GRANT / REVOKE permissions ---------------------------------------------------------------


def test_grant_and_revoke_permissions(roles: RoleStore) -> None:
    run(roles, "admin", "GRANT SELECT ON t TO alice")
    run(roles, "admin", "GRANT ALL PERMISSIONS ON KEYSPACE ks TO dev")
    assert roles.permissions_on("alice", T) == {P.SELECT}
    roles.authorize("alice", P.MODIFY, T)  # through dev, on the keyspace
    run(roles, "admin", "REVOKE ALL ON KEYSPACE ks FROM dev")
    with pytest.raises(Unauthorized):
        roles.authorize("alice", P.MODIFY, T)
    run(roles, "admin", "REVOKE SELECT ON ks.t FROM alice")
    assert roles.list_permissions(None, None, list(P)) == []


def test_grant_permission_refusals(roles: RoleStore) -> None:
    refused(
        roles, "admin", "GRANT SELECT ON ks.t TO ghost", InvalidRequest, "Role ghost doesn't exist"
    )
    refused(
        roles,
        "admin",
        "GRANT SELECT ON ks.nope TO alice",
        InvalidRequest,
        "Resource <table ks.nope> doesn't exist",
    )
    refused(
        roles,
        "admin",
        "GRANT SELECT ON KEYSPACE nope TO alice",
        InvalidRequest,
        "Resource <keyspace nope> doesn't exist",
    )
    refused(
        roles,
        "admin",
        "GRANT ALTER ON ROLE ghost TO alice",
        InvalidRequest,
        "Resource <role ghost> doesn't exist",
    )
    with pytest.raises(InvalidRequest, match=exactly(NO_KEYSPACE)):
        run(roles, "admin", "GRANT SELECT ON t TO alice", keyspace=None)


def test_no_one_grants_what_they_do_not_hold(roles: RoleStore) -> None:
    refused(
        roles,
        "alice",
        "GRANT SELECT ON ks.t TO bob",
        Unauthorized,
        "User alice has no AUTHORIZE permission on <table ks.t> or any of its parents",
    )
    run(roles, "admin", "GRANT AUTHORIZE ON KEYSPACE ks TO dev")
    refused(
        roles,
        "alice",
        "GRANT SELECT ON ks.t TO bob",
        Unauthorized,
        "User alice has no SELECT permission on <table ks.t> or any of its parents",
    )
    run(roles, "admin", "GRANT SELECT ON ALL KEYSPACES TO alice")
    run(roles, "alice", "GRANT SELECT ON ks.t TO bob")
    assert roles.permissions_on("bob", T) == {P.SELECT}
    # ALL is every applicable permission: alice holds neither ALTER nor DROP
    refused(
        roles,
        "alice",
        "GRANT ALL ON ks.t TO bob",
        Unauthorized,
        "User alice has no ALTER permission on <table ks.t> or any of its parents",
    )
    run(roles, "alice", "REVOKE SELECT ON ks.t FROM bob")
    assert roles.permissions_on("bob", T) == frozenset()


# -- LIST PERMISSIONS -------------------------------------------------------------------------


@pytest.fixture
def granted(roles: RoleStore) -> RoleStore:
    run(roles, "admin", "GRANT SELECT ON ks.t TO alice")
    run(roles, "admin", "GRANT MODIFY ON KEYSPACE ks TO dev")
    run(roles, "admin", "GRANT CREATE ON ALL KEYSPACES TO bob")
    run(roles, "admin", "GRANT DESCRIBE ON ALL ROLES TO bob")
    return roles


def test_list_all_permissions(granted: RoleStore) -> None:
    result = run(granted, "admin", "LIST ALL PERMISSIONS")
    assert (
        result.columns
        == list(PERMISSIONS_COLUMNS)
        == [
            "role",
            "username",
            "resource",
            "permission",
        ]
    )
    assert result.rows == [
        ("alice", "alice", "<table ks.t>", "SELECT"),
        ("bob", "bob", "<all keyspaces>", "CREATE"),
        ("bob", "bob", "<all roles>", "DESCRIBE"),
        ("dev", "dev", "<keyspace ks>", "MODIFY"),
    ]


def test_list_permissions_of_a_role_includes_its_roles(granted: RoleStore) -> None:
    assert rows(run(granted, "admin", "LIST ALL PERMISSIONS OF alice")) == [
        ("alice", "alice", "<table ks.t>", "SELECT"),
        ("dev", "dev", "<keyspace ks>", "MODIFY"),
    ]
    assert rows(run(granted, "admin", "LIST MODIFY OF alice")) == [
        ("dev", "dev", "<keyspace ks>", "MODIFY"),
    ]


def test_list_permissions_on_a_resource_and_its_parents(granted: RoleStore) -> None:
    assert rows(run(granted, "admin", "LIST ALL ON ks.t")) == [
        ("alice", "alice", "<table ks.t>", "SELECT"),
        ("bob", "bob", "<all keyspaces>", "CREATE"),
        ("dev", "dev", "<keyspace ks>", "MODIFY"),
    ]
    assert rows(run(granted, "admin", "LIST ALL ON ks.t NORECURSIVE")) == [
        ("alice", "alice", "<table ks.t>", "SELECT"),
    ]
    assert rows(run(granted, "admin", "LIST ALL ON ks.u OF bob NORECURSIVE")) == []
    assert rows(run(granted, "admin", "LIST ALL ON ks.u OF bob")) == [
        ("bob", "bob", "<all keyspaces>", "CREATE"),
    ]


def test_list_permissions_refusals(granted: RoleStore) -> None:
    refused(
        granted,
        "alice",
        "LIST ALL PERMISSIONS",
        Unauthorized,
        "You are not authorized to view everyone's permissions",
    )
    refused(
        granted,
        "alice",
        "LIST ALL PERMISSIONS OF bob",
        Unauthorized,
        "You are not authorized to view bob's permissions",
    )
    refused(granted, "admin", "LIST ALL OF ghost", InvalidRequest, "<role ghost> doesn't exist")
    refused(
        granted, "admin", "LIST ALL ON ks.nope", InvalidRequest, "<table ks.nope> doesn't exist"
    )
    # one's own and those of one's roles may be listed
    assert len(rows(run(granted, "alice", "LIST ALL PERMISSIONS OF alice"))) == 2
    assert rows(run(granted, "alice", "LIST ALL PERMISSIONS OF dev")) == [
        ("dev", "dev", "<keyspace ks>", "MODIFY"),
    ]


def test_grant_to_creator_gives_everything_applicable(roles: RoleStore) -> None:
    grant_to_creator(roles, "alice", Resource.keyspace("ks"))
    grant_to_creator(roles, "alice", T)
    assert roles.permissions_on("alice", Resource.keyspace("ks")) == {
        P.CREATE,
        P.ALTER,
        P.DROP,
        P.SELECT,
        P.MODIFY,
        P.AUTHORIZE,
    }
    assert roles.permissions_on("alice", T) == {P.ALTER, P.DROP, P.SELECT, P.MODIFY, P.AUTHORIZE}
