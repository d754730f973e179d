"""Roles, passwords and permissions: Cassandra's PasswordAuthenticator, CassandraRoleManager
and CassandraAuthorizer, in pure Python over one file per data directory (docs/auth.md).

>>> from cqlcdc.cql import parse_statement
>>> required_permissions(parse_statement("INSERT INTO ks.t (pk) VALUES (1)"), None)[0][0]
<Permission.MODIFY: 'MODIFY'>
"""

from __future__ import annotations

from cqlcdc.auth.passwords import hash_password, verify_password
from cqlcdc.auth.permissions import AUTH_STATEMENTS, READABLE_KEYSPACES, required_permissions
from cqlcdc.auth.resources import Permission, Resource
from cqlcdc.auth.roles import DEFAULT_SUPERUSER, Role, RoleStore
from cqlcdc.auth.statements import Performer, execute_auth, grant_to_creator

__all__ = [
    "AUTH_STATEMENTS",
    "DEFAULT_SUPERUSER",
    "READABLE_KEYSPACES",
    "Performer",
    "Permission",
    "Resource",
    "Role",
    "RoleStore",
    "execute_auth",
    "grant_to_creator",
    "hash_password",
    "required_permissions",
    "verify_password",
]
