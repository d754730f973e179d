"""A session's access control: the checks ``Session.execute`` runs before a statement, the
role statements themselves, and the grants a CREATE gives and a DROP takes away.

Three kinds of session (``Session.role``/``Session.anonymous``):

- a logged-in role (``cqlcdc serve --auth`` sets it after the SASL login): runs only what
  its permissions allow (``cqlcdc.auth``), as Cassandra's CassandraAuthorizer decides;
- the process owning the data directory (``cqlcdc.connect``, ``cqlcdc run``): no role, may
  do anything, role statements included (it is how roles are set up before serving);
- an anonymous client of a server without authentication: nothing is checked, and role
  statements are refused, as Cassandra and ScyllaDB refuse them under
  AllowAllAuthenticator ("You have to be logged in and not anonymous to perform this
  request").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cqlcdc.auth import (
    Performer,
    Permission,
    Resource,
    execute_auth,
    grant_to_creator,
    required_permissions,
)
from cqlcdc.cql import ast
from cqlcdc.errors import Unauthorized
from cqlcdc.storage.select import ResultSet
from cqlcdc.system.tables import SYSTEM_KEYSPACES, system_table

if TYPE_CHECKING:
    from cqlcdc.coordinator import Coordinator, DdlOutcome


def check(c: Coordinator, role: str | None, stmt: ast.Statement, keyspace: str | None) -> None:
    """Return if ``role`` may run ``stmt`` (always without a role).

    Raises:
        Unauthorized: "User r has no P permission on <resource> or any of its parents".
        InvalidRequest: the statement names a table without a keyspace and there is none.
    """
    if role is None:
        return
    for permission, resource in required_permissions(
        stmt, keyspace, lambda ks, index: _index_table(c, ks, index)
    ):
        c.roles.authorize(role, permission, resource)


def _index_table(c: Coordinator, keyspace: str, index: str) -> str | None:
    """The table of keyspace's index ``index`` (None: there is none)."""
    for table in c.catalog.tables(keyspace):
        if any(i.name == index for i in table.indexes):
            return table.name
    return None


def permits(
    c: Coordinator, role: str | None, statements: Sequence[ast.Statement], keyspace: str | None
) -> bool:
    """Whether ``role`` may run every one of ``statements`` (each distinct one checked
    once): the bulk write path runs only then, so a refusal lands in its statement's slot."""
    seen: set[int] = set()
    for stmt in statements:
        if id(stmt) in seen:
            continue
        seen.add(id(stmt))
        try:
            check(c, role, stmt, keyspace)
        except Unauthorized:
            return False
    return True


def run_auth(
    c: Coordinator,
    role: str | None,
    anonymous: bool,
    stmt: ast.AuthStatement,
    keyspace: str | None,
) -> ResultSet | None:
    """Run a role or permission statement under the coordinator's lock, like DDL.

    Raises:
        Unauthorized: an ``anonymous`` session, or ``role`` may not (Cassandra's messages).
        InvalidRequest: a role or resource that does not exist, and the like.
    """
    performer = Performer(role, c.roles, anonymous=anonymous)
    with c.lock:
        return execute_auth(stmt, performer, keyspace, lambda r: exists(c, r))


def run_ddl(
    c: Coordinator, role: str | None, stmt: ast.Statement, keyspace: str | None
) -> DdlOutcome:
    """``Coordinator.run_ddl``, then Cassandra's bookkeeping: the creator of a keyspace or
    table gets every permission on it, and grants on what a DROP removed are forgotten (so a
    later keyspace or table of the same name does not inherit them)."""
    created = _created(stmt, keyspace)
    fresh = created is not None and not exists(c, created)
    outcome = c.run_ddl(stmt, keyspace)
    if fresh and created is not None and role is not None:
        grant_to_creator(c.roles, role, created)
    if isinstance(stmt, ast.DropKeyspace | ast.DropTable):
        forget_dropped(c)
    return outcome


def forget_dropped(c: Coordinator) -> None:
    """Revoke every grant on a keyspace or table that no longer exists."""
    granted = {r for _, r, _ in c.roles.list_permissions(None, None, list(Permission))}
    for resource in sorted(granted, key=lambda r: r.name):
        if resource.is_data and not exists(c, resource):
            c.roles.revoke_all_on(resource)


def exists(c: Coordinator, resource: Resource) -> bool:
    """Whether a data resource exists (system keyspaces and their tables included; role
    resources are the role store's)."""
    if resource.kind == "ALL KEYSPACES":
        return True
    keyspace = resource.parts[1]
    if len(resource.parts) == 2:
        return keyspace in SYSTEM_KEYSPACES or c.catalog.keyspace(keyspace) is not None
    table = resource.parts[2]
    if keyspace in SYSTEM_KEYSPACES:
        return system_table(keyspace, table) is not None
    return c.catalog.table(keyspace, table) is not None


def _created(stmt: ast.Statement, keyspace: str | None) -> Resource | None:
    if isinstance(stmt, ast.CreateKeyspace):
        return Resource.keyspace(stmt.name)
    if isinstance(stmt, ast.CreateTable):
        ks = stmt.name.keyspace or keyspace
        return None if ks is None else Resource.table(ks, stmt.name.name)
    return None


__all__ = ["check", "exists", "forget_dropped", "permits", "run_auth", "run_ddl"]
