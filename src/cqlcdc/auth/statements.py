"""Running role and permission statements against a ``RoleStore``, with Cassandra 4's
checks (its ``checkAccess``, then its ``validate``, then the change) and messages.

Who runs a statement is a ``Performer``: a logged-in role, or the system (``name`` None:
the process that owns the data directory, which may do anything, as Cassandra's internal
calls may). With authentication off every session is anonymous, and as in Cassandra and
ScyllaDB (AllowAllAuthenticator) role statements are refused: "You have to be logged in
and not anonymous to perform this request".

>>> from pathlib import Path
>>> import tempfile
>>> from cqlcdc.cql import parse_statement
>>> store = RoleStore(Path(tempfile.mkdtemp()) / "roles.json")
>>> system = Performer(None, store)
>>> execute_auth(parse_statement("CREATE ROLE bob WITH LOGIN = true"), system, None, None)
>>> [row[:3] for row in execute_auth(parse_statement("LIST ROLES"), system, None, None).rows]
[('bob', False, True)]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cqlcdc.auth.permissions import required_permissions
from cqlcdc.auth.resources import Permission, Resource
from cqlcdc.auth.roles import RoleStore
from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest, Unauthorized
from cqlcdc.storage.select import ResultSet
from cqlcdc.types import BooleanType, MapType, TextType

ResourceExists = Callable[[Resource], bool]

_TEXT = TextType()
_BOOLEAN = BooleanType()
_OPTIONS = MapType(_TEXT, _TEXT)
ROLES_COLUMNS = ("role", "super", "login", "options")
USERS_COLUMNS = ("name", "super")
PERMISSIONS_COLUMNS = ("role", "username", "resource", "permission")

NOT_LOGGED_IN = "You have to be logged in and not anonymous to perform this request"
ROLE_MANAGER = "org.apache.cassandra.auth.CassandraRoleManager"  # named in its messages


@dataclass(frozen=True, slots=True)
class Performer:
    """Who runs a statement: the role ``name`` (None: the system), over ``store``;
    ``anonymous`` is every session while authentication is off."""

    name: str | None
    store: RoleStore
    anonymous: bool = False

    @property
    def is_super(self) -> bool:
        return self.name is None or self.store.is_superuser(self.name)

    def roles(self) -> frozenset[str]:
        """This role and those granted to it (none for the system)."""
        return frozenset() if self.name is None else self.store.roles_of(self.name)

    def ensure(self, permission: Permission, resource: Resource) -> None:
        """Cassandra's ``ensurePermission``: held on ``resource`` or a parent.

        Raises:
            Unauthorized: "User r has no P permission on <resource> or any of its parents".
        """
        if self.name is not None:
            self.store.authorize(self.name, permission, resource)

    def has(self, permission: Permission, resource: Resource) -> bool:
        try:
            self.ensure(permission, resource)
        except Unauthorized:
            return False
        return True

    def check_role_permission(self, permission: Permission, resource: Resource) -> None:
        """``AuthenticationStatement.checkPermission``: the same check, with the message
        Cassandra gives for role management."""
        if not self.has(permission, resource):
            raise Unauthorized(
                f"User {self.name} does not have sufficient privileges to perform the "
                "requested operation"
            )


def execute_auth(
    stmt: ast.AuthStatement,
    performer: Performer,
    keyspace: str | None,
    resource_exists: ResourceExists | None,
) -> ResultSet | None:
    """Run one role or permission statement: the rows of a LIST, else None.

    Args:
        stmt: the statement.
        performer: who runs it.
        keyspace: the session's keyspace (for ``ON t``).
        resource_exists: whether a data resource (keyspace, table) exists; None: all do.

    Raises:
        Unauthorized: an anonymous session, or a check failed (Cassandra's messages).
        InvalidRequest: a role or resource that does not exist, and the like.
    """
    if performer.anonymous:
        raise Unauthorized(NOT_LOGGED_IN)
    run = _STATEMENTS[type(stmt)]
    return run(stmt, performer, keyspace, resource_exists or (lambda r: True))


# -- roles -----------------------------------------------------------------------------------


def _create_role(
    stmt: ast.CreateRole, who: Performer, keyspace: str | None, exists: ResourceExists
) -> None:
    who.check_role_permission(Permission.CREATE, Resource.all_roles())
    options = stmt.options
    if options.superuser and not who.is_super:
        raise Unauthorized("Only superusers can create a role with superuser status")
    _validate(options)
    if stmt.name == "":
        raise InvalidRequest("Role name can't be an empty string")
    store = who.store
    if store.exists(stmt.name):
        if stmt.if_not_exists:
            return None
        raise InvalidRequest(f"{stmt.name} already exists")
    store.create_role(
        stmt.name,
        password=options.password,
        login=bool(options.login),
        superuser=bool(options.superuser),
        options=options.options or (),
    )
    if who.name is not None:  # the creator may alter, drop and grant the new role
        role = Resource.role(stmt.name)
        store.grant(role.applicable_permissions(), role, who.name)
    return None


def _alter_role(
    stmt: ast.AlterRole, who: Performer, keyspace: str | None, exists: ResourceExists
) -> None:
    options = stmt.options
    if options.superuser is not None:
        if stmt.name in who.roles():
            raise Unauthorized(
                "You aren't allowed to alter your own superuser status or that of a role "
                "granted to you"
            )
        if not who.is_super:
            raise Unauthorized("Only superusers are allowed to alter superuser status")
    if not who.is_super:
        if who.name == stmt.name:  # one's own password only (PasswordAuthenticator)
            for option, value in (("LOGIN", options.login), ("OPTIONS", options.options)):
                if value is not None:
                    raise Unauthorized(f"You aren't allowed to alter {option}")
        else:
            who.check_role_permission(Permission.ALTER, Resource.role(stmt.name))
    _validate(options)
    if options.empty:
        raise InvalidRequest("ALTER [ROLE|USER] can't be empty")
    who.store.alter_role(
        stmt.name,
        password=options.password,
        login=options.login,
        superuser=options.superuser,
        options=options.options,
    )
    return None


def _validate(options: ast.RoleOptions) -> None:
    """``RoleOptions.validate``: CassandraRoleManager supports LOGIN, SUPERUSER and PASSWORD,
    and refuses OPTIONS (the grammar accepts it for role managers that take it).

    Raises:
        InvalidRequest: Cassandra's "...CassandraRoleManager doesn't support OPTIONS".
    """
    if options.options is not None:
        raise InvalidRequest(f"{ROLE_MANAGER} doesn't support OPTIONS")


def _drop_role(
    stmt: ast.DropRole, who: Performer, keyspace: str | None, exists: ResourceExists
) -> None:
    store = who.store
    who.check_role_permission(Permission.DROP, Resource.role(stmt.name))
    if store.exists(stmt.name) and store.is_superuser(stmt.name) and not who.is_super:
        raise Unauthorized("Only superusers can drop a role with superuser status")
    if not store.exists(stmt.name):
        if stmt.if_exists:
            return None
        raise InvalidRequest(f"{stmt.name} doesn't exist")
    if who.name == stmt.name:
        raise InvalidRequest("Cannot DROP primary role for current login")
    store.drop_role(stmt.name)
    return None


def _grant_role(
    stmt: ast.GrantRole | ast.RevokeRole,
    who: Performer,
    keyspace: str | None,
    exists: ResourceExists,
) -> None:
    who.check_role_permission(Permission.AUTHORIZE, Resource.role(stmt.role))
    member = stmt.grantee if isinstance(stmt, ast.GrantRole) else stmt.revokee
    for name in (stmt.role, member):
        if not who.store.exists(name):
            raise InvalidRequest(f"{name} doesn't exist")
    if isinstance(stmt, ast.GrantRole):
        who.store.grant_role(stmt.role, member)
    else:
        who.store.revoke_role(stmt.role, member)
    return None


def _list_roles(
    stmt: ast.ListRoles, who: Performer, keyspace: str | None, exists: ResourceExists
) -> ResultSet:
    store = who.store
    if stmt.of is not None and not store.exists(stmt.of):
        raise InvalidRequest(f"{Resource.role(stmt.of)} doesn't exist")
    if who.has(Permission.DESCRIBE, Resource.all_roles()):
        names = store.names() if stmt.of is None else store.roles_of(stmt.of, stmt.recursive)
    elif who.name is not None and stmt.of is None:
        names = store.roles_of(who.name, stmt.recursive)
    elif who.name is not None and stmt.of in store.roles_of(who.name):
        names = store.roles_of(stmt.of, stmt.recursive)
    else:  # Cassandra's message, trailing space included
        raise Unauthorized(f"You are not authorized to view roles granted to {stmt.of} ")
    rows: list[tuple[Any, ...]] = []
    for name in sorted(names):
        role = store.get(name)
        if role is None:  # dropped meanwhile
            continue
        if stmt.users:
            if role.can_login:
                rows.append((name, store.is_superuser(name)))
        else:
            rows.append((name, role.is_superuser, role.can_login, _OPTIONS.make(role.options)))
    if stmt.users:
        return ResultSet(list(USERS_COLUMNS), [_TEXT, _BOOLEAN], rows)
    return ResultSet(list(ROLES_COLUMNS), [_TEXT, _BOOLEAN, _BOOLEAN, _OPTIONS], rows)


# -- permissions -----------------------------------------------------------------------------


def _check_resource(resource: Resource, store: RoleStore, exists: ResourceExists) -> bool:
    if resource.kind == "ROLE":
        return store.exists(resource.parts[1])
    return not resource.is_data or exists(resource)


def _grant_permissions(
    stmt: ast.GrantPermissions | ast.RevokePermissions,
    who: Performer,
    keyspace: str | None,
    exists: ResourceExists,
) -> None:
    requirements = required_permissions(stmt, keyspace)
    for permission, resource in requirements:
        who.ensure(permission, resource)
    resource = requirements[0][1]
    granted = [p for p, _ in requirements[1:]]
    member = stmt.grantee if isinstance(stmt, ast.GrantPermissions) else stmt.revokee
    if not who.store.exists(member):
        raise InvalidRequest(f"Role {member} doesn't exist")
    if not _check_resource(resource, who.store, exists):
        raise InvalidRequest(f"Resource {resource} doesn't exist")
    if isinstance(stmt, ast.GrantPermissions):
        who.store.grant(granted, resource, member)
    else:
        who.store.revoke(granted, resource, member)
    return None


def _list_permissions(
    stmt: ast.ListPermissions, who: Performer, keyspace: str | None, exists: ResourceExists
) -> ResultSet:
    store = who.store
    resource = None if stmt.resource is None else Resource.from_ast(stmt.resource, keyspace)
    if resource is not None and not _check_resource(resource, store, exists):
        raise InvalidRequest(f"{resource} doesn't exist")
    if stmt.of is not None and not store.exists(stmt.of):
        raise InvalidRequest(f"{Resource.role(stmt.of)} doesn't exist")
    if not who.is_super and stmt.of not in who.roles():
        whose = "everyone" if stmt.of is None else stmt.of
        raise Unauthorized(f"You are not authorized to view {whose}'s permissions")
    wanted = (
        list(Permission) if stmt.permissions is None else [Permission(p) for p in stmt.permissions]
    )
    resources: tuple[Resource, ...] | None = None
    if resource is not None:
        resources = resource.chain() if stmt.recursive else (resource,)
    grantees = None if stmt.of is None else store.roles_of(stmt.of)
    rows = [
        (role, role, str(on), str(permission))
        for role, on, permission in store.list_permissions(grantees, resources, wanted)
    ]
    return ResultSet(list(PERMISSIONS_COLUMNS), [_TEXT] * 4, rows)


_STATEMENTS: dict[type, Callable[..., ResultSet | None]] = {
    ast.CreateRole: _create_role,
    ast.AlterRole: _alter_role,
    ast.DropRole: _drop_role,
    ast.GrantRole: _grant_role,
    ast.RevokeRole: _grant_role,
    ast.ListRoles: _list_roles,
    ast.GrantPermissions: _grant_permissions,
    ast.RevokePermissions: _grant_permissions,
    ast.ListPermissions: _list_permissions,
}


def grant_to_creator(store: RoleStore, role: str, resource: Resource) -> None:
    """Give the creator of a keyspace or table every permission on it (as Cassandra does
    after CREATE KEYSPACE and CREATE TABLE)."""
    store.grant(resource.applicable_permissions(), resource, role)


__all__ = [
    "NOT_LOGGED_IN",
    "PERMISSIONS_COLUMNS",
    "ROLES_COLUMNS",
    "ROLE_MANAGER",
    "USERS_COLUMNS",
    "Performer",
    "execute_auth",
    "grant_to_creator",
]
