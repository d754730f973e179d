"""Permissions and the resources they are granted on, as Cassandra names them.

A resource has a stored name (``data``, ``data/ks``, ``data/ks/t``, ``roles``, ``roles/r``)
and a text for messages (``<all keyspaces>``, ``<keyspace ks>``, ``<table ks.t>``,
``<all roles>``, ``<role r>``). A permission granted on a resource holds on its children:
a check walks the chain from the resource up to its root.

>>> t = Resource.table("ks", "t")
>>> str(t), t.name, [str(r) for r in t.chain()]
('<table ks.t>', 'data/ks/t', ['<table ks.t>', '<keyspace ks>', '<all keyspaces>'])
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest

NO_KEYSPACE = (
    "No keyspace has been specified. USE a keyspace, or explicitly specify keyspace.tablename"
)


class Permission(enum.Enum):
    """Cassandra's permissions, in its order (LIST PERMISSIONS sorts by it)."""

    CREATE = "CREATE"
    ALTER = "ALTER"
    DROP = "DROP"
    SELECT = "SELECT"
    MODIFY = "MODIFY"
    AUTHORIZE = "AUTHORIZE"
    DESCRIBE = "DESCRIBE"
    EXECUTE = "EXECUTE"

    @property
    def ordinal(self) -> int:
        return _ORDER[self]

    def __str__(self) -> str:
        return self.value


_ORDER = {p: i for i, p in enumerate(Permission)}


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource: ``parts`` is its stored name split at ``/`` (a role's name whole).

    Build it with ``all_keyspaces()``, ``keyspace(ks)``, ``table(ks, t)``, ``all_roles()``,
    ``role(r)``, ``from_name(name)`` or ``from_ast(resource, keyspace)``.
    """

    parts: tuple[str, ...]

    @classmethod
    def all_keyspaces(cls) -> Resource:
        return cls(("data",))

    @classmethod
    def keyspace(cls, keyspace: str) -> Resource:
        return cls(("data", keyspace))

    @classmethod
    def table(cls, keyspace: str, table: str) -> Resource:
        return cls(("data", keyspace, table))

    @classmethod
    def all_roles(cls) -> Resource:
        return cls(("roles",))

    @classmethod
    def role(cls, role: str) -> Resource:
        return cls(("roles", role))

    @classmethod
    def from_name(cls, name: str) -> Resource:
        """The resource stored as ``name`` (``data/ks/t``, ``roles/r``...).

        Raises:
            ValueError: not a data or role resource name.
        """
        root, _, rest = name.partition("/")
        if root == "roles":
            return cls.role(rest) if rest else cls.all_roles()
        if root == "data":
            parts = rest.split("/") if rest else []
            if len(parts) <= 2 and all(parts):
                return cls(("data", *parts))
        raise ValueError(f"not a resource name: {name!r}")

    @classmethod
    def from_ast(cls, resource: ast.Resource, keyspace: str | None) -> Resource:
        """The resource a statement names, an unqualified table in ``keyspace``.

        Raises:
            InvalidRequest: an unqualified table and no current keyspace.
        """
        match resource.kind:
            case "ALL KEYSPACES":
                return cls.all_keyspaces()
            case "KEYSPACE":
                return cls.keyspace(resource.name or "")
            case "TABLE":
                ks = resource.keyspace or keyspace
                if ks is None:
                    raise InvalidRequest(NO_KEYSPACE)
                return cls.table(ks, resource.name or "")
            case "ALL ROLES":
                return cls.all_roles()
            case "ROLE":
                return cls.role(resource.name or "")
        raise AssertionError(resource.kind)  # not reached: the kinds above are all of them

    @property
    def name(self) -> str:
        """The stored name (``data/ks/t``)."""
        return "/".join(self.parts)

    @property
    def kind(self) -> ast.ResourceKind:
        if self.parts[0] == "roles":
            return "ALL ROLES" if len(self.parts) == 1 else "ROLE"
        return ("ALL KEYSPACES", "KEYSPACE", "TABLE")[len(self.parts) - 1]

    @property
    def is_data(self) -> bool:
        return self.parts[0] == "data"

    def parent(self) -> Resource | None:
        return Resource(self.parts[:-1]) if len(self.parts) > 1 else None

    def chain(self) -> tuple[Resource, ...]:
        """This resource, then each parent up to the root (``Resources.chain``)."""
        chain: list[Resource] = []
        resource: Resource | None = self
        while resource is not None:
            chain.append(resource)
            resource = resource.parent()
        return tuple(chain)

    def contains(self, other: Resource) -> bool:
        """Whether ``other`` is this resource or one of its children."""
        return other.parts[: len(self.parts)] == self.parts

    def applicable_permissions(self) -> tuple[Permission, ...]:
        """What can be granted on this resource (what GRANT ALL gives), in order."""
        return tuple(Permission(p) for p in ast.APPLICABLE_PERMISSIONS[self.kind])

    def __str__(self) -> str:
        match self.kind:
            case "ALL KEYSPACES":
                return "<all keyspaces>"
            case "KEYSPACE":
                return f"<keyspace {self.parts[1]}>"
            case "TABLE":
                return f"<table {self.parts[1]}.{self.parts[2]}>"
            case "ALL ROLES":
                return "<all roles>"
            case "ROLE":
                return f"<role {self.parts[1]}>"
        raise AssertionError(self.parts)  # not reached


def permissions_of(
    names: tuple[ast.PermissionName, ...] | None, resource: Resource
) -> tuple[Permission, ...]:
    """The permissions a statement lists (None: ALL, which is what ``resource`` supports)."""
    if names is None:
        return resource.applicable_permissions()
    return tuple(Permission(n) for n in names)


__all__ = ["NO_KEYSPACE", "Permission", "Resource", "permissions_of"]
