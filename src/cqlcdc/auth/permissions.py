"""What each statement needs, as Cassandra's ``checkAccess`` asks for it: the permissions,
each on a resource, that a non-superuser must hold (there or on a parent) to run it.

>>> from cqlcdc.cql import parse_statement
>>> [(str(p), str(r)) for p, r in required_permissions(parse_statement("SELECT * FROM t"), "ks")]
[('SELECT', '<table ks.t>')]
>>> required_permissions(parse_statement("SELECT * FROM system.local"), None)
[]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cqlcdc.auth.resources import NO_KEYSPACE, Permission, Resource, permissions_of
from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest

Requirement = tuple[Permission, Resource]
# the table an index is on: (keyspace, index name) -> table name, None for no such index
IndexTable = Callable[[str, str], str | None]

# Tables anyone logged in may read: the drivers and CDC clients read these to find nodes,
# schemas and streams (Cassandra keeps system.local/peers and system_schema readable; the
# CDC stream tables are ScyllaDB's system_distributed; the drivers probe system_virtual_schema,
# which we answer as unconfigured). Other system keyspaces, such as
# system_cqlcdc, whose rows are a table's changes, need a grant like any table.
READABLE_KEYSPACES = frozenset(
    {"system", "system_schema", "system_distributed", "system_virtual_schema"}
)

AUTH_STATEMENTS = (
    ast.CreateRole,
    ast.AlterRole,
    ast.DropRole,
    ast.ListRoles,
    ast.GrantRole,
    ast.RevokeRole,
    ast.GrantPermissions,
    ast.RevokePermissions,
    ast.ListPermissions,
)


def table_resource(name: ast.QualifiedName, keyspace: str | None) -> Resource:
    """The resource of a table a statement names (an unqualified one in ``keyspace``).

    Raises:
        InvalidRequest: unqualified and no current keyspace (Cassandra's message).
    """
    ks = name.keyspace or keyspace
    if ks is None:
        raise InvalidRequest(NO_KEYSPACE)
    return Resource.table(ks, name.name)


def _keyspace_of(name: ast.QualifiedName, keyspace: str | None) -> Resource:
    ks = name.keyspace or keyspace
    if ks is None:
        raise InvalidRequest(NO_KEYSPACE)
    return Resource.keyspace(ks)


def _select(stmt: ast.Select, keyspace: str | None) -> list[Requirement]:
    table = table_resource(stmt.table, keyspace)
    if table.parts[1] in READABLE_KEYSPACES:
        return []
    return [(Permission.SELECT, table)]


def _modification(
    stmt: ast.Insert | ast.Update | ast.Delete, keyspace: str | None
) -> list[Requirement]:
    table = table_resource(stmt.table, keyspace)
    needs = [(Permission.MODIFY, table)]
    # a conditional write reads the row it tests, so it also needs SELECT (Cassandra)
    if isinstance(stmt, ast.Insert):
        conditional = stmt.if_not_exists
    else:
        conditional = stmt.if_exists or bool(stmt.conditions)
    if conditional:
        needs.append((Permission.SELECT, table))
    return needs


def _batch(stmt: ast.Batch, keyspace: str | None) -> list[Requirement]:
    needs: list[Requirement] = []
    for child in stmt.statements:
        needs.extend(n for n in _modification(child, keyspace) if n not in needs)
    return needs


def _permissions(
    stmt: ast.GrantPermissions | ast.RevokePermissions, keyspace: str | None
) -> list[Requirement]:
    """AUTHORIZE on the resource, and each permission given away (Cassandra's
    ``PermissionsManagementStatement``: no one grants what they do not hold)."""
    resource = Resource.from_ast(stmt.resource, keyspace)
    granted = permissions_of(stmt.permissions, resource)
    return [(Permission.AUTHORIZE, resource), *((p, resource) for p in granted)]


_RULES: dict[type, Callable[[Any, str | None], list[Requirement]]] = {
    ast.Select: _select,
    ast.Insert: _modification,
    ast.Update: _modification,
    ast.Delete: _modification,
    ast.Batch: _batch,
    ast.Truncate: lambda s, ks: [(Permission.MODIFY, table_resource(s.name, ks))],
    ast.CreateKeyspace: lambda s, ks: [(Permission.CREATE, Resource.all_keyspaces())],
    ast.AlterKeyspace: lambda s, ks: [(Permission.ALTER, Resource.keyspace(s.name))],
    ast.DropKeyspace: lambda s, ks: [(Permission.DROP, Resource.keyspace(s.name))],
    ast.CreateTable: lambda s, ks: [(Permission.CREATE, _keyspace_of(s.name, ks))],
    ast.AlterTable: lambda s, ks: [(Permission.ALTER, table_resource(s.name, ks))],
    ast.CreateIndex: lambda s, ks: [(Permission.ALTER, table_resource(s.table, ks))],
    # a view: ALTER on its base table (Cassandra's CreateViewStatement); none exist to alter
    ast.CreateMaterializedView: lambda s, ks: [(Permission.ALTER, table_resource(s.base, ks))],
    ast.AlterMaterializedView: lambda s, ks: [(Permission.ALTER, _keyspace_of(s.name, ks))],
    ast.DropMaterializedView: lambda s, ks: [(Permission.DROP, _keyspace_of(s.name, ks))],
    ast.DropTable: lambda s, ks: [(Permission.DROP, table_resource(s.name, ks))],
    ast.CreateType: lambda s, ks: [(Permission.CREATE, _keyspace_of(s.name, ks))],
    ast.AlterType: lambda s, ks: [(Permission.ALTER, _keyspace_of(s.name, ks))],
    ast.DropType: lambda s, ks: [(Permission.DROP, _keyspace_of(s.name, ks))],
    # USE and DESCRIBE need only a login, as in Cassandra 4
    ast.UseKeyspace: lambda s, ks: [],
    ast.Describe: lambda s, ks: [],
    ast.CreateRole: lambda s, ks: [(Permission.CREATE, Resource.all_roles())],
    ast.AlterRole: lambda s, ks: [(Permission.ALTER, Resource.role(s.name))],
    ast.DropRole: lambda s, ks: [(Permission.DROP, Resource.role(s.name))],
    ast.GrantRole: lambda s, ks: [(Permission.AUTHORIZE, Resource.role(s.role))],
    ast.RevokeRole: lambda s, ks: [(Permission.AUTHORIZE, Resource.role(s.role))],
    ast.GrantPermissions: _permissions,
    ast.RevokePermissions: _permissions,
    # what a LIST shows depends on who asks (cqlcdc.auth.statements), not on a grant
    ast.ListRoles: lambda s, ks: [],
    ast.ListPermissions: lambda s, ks: [],
}


def _drop_index(
    stmt: ast.DropIndex, keyspace: str | None, index_table: IndexTable | None
) -> list[Requirement]:
    """ALTER on the index's table (Cassandra's ``DropIndexStatement.authorize``); nothing for
    an index that does not exist, which the statement itself then reports."""
    ks = stmt.name.keyspace or keyspace
    if ks is None:
        raise InvalidRequest(NO_KEYSPACE)
    table = None if index_table is None else index_table(ks, stmt.name.name)
    return [] if table is None else [(Permission.ALTER, Resource.table(ks, table))]


def required_permissions(
    stmt: ast.Statement, keyspace: str | None, index_table: IndexTable | None = None
) -> list[Requirement]:
    """``(permission, resource)`` pairs a non-superuser needs for ``stmt`` in the session
    keyspace ``keyspace`` (each held on the resource or a parent); ``index_table`` finds the
    table of the index a DROP INDEX names (without it, DROP INDEX needs nothing).

    Beyond these, role statements have Cassandra's extra rules, which
    ``cqlcdc.auth.statements`` applies: a role may change its own password without ALTER,
    only superusers make or drop superusers, and so on.

    Raises:
        InvalidRequest: a table without a keyspace and no current keyspace.
    """
    if isinstance(stmt, ast.DropIndex):
        return _drop_index(stmt, keyspace, index_table)
    rule = _RULES.get(type(stmt))
    if rule is None:
        raise InvalidRequest(f"{type(stmt).__name__} has no permission rule")
    return rule(stmt, keyspace)


__all__ = [
    "AUTH_STATEMENTS",
    "READABLE_KEYSPACES",
    "IndexTable",
    "Requirement",
    "required_permissions",
    "table_resource",
]
