"""The roles of a data directory: who may log in, with which password hash, which roles each
is a member of and which permissions it holds, kept in ``<data-dir>/auth/roles.json``.

The file is rewritten whole on every change (a temporary file, fsync, rename, fsync of the
directory), so a crash leaves the old roles or the new ones, never a mix. It holds salted
scrypt hashes (``cqlcdc.auth.passwords``), never a password, and is readable by its owner
only.

>>> store = RoleStore("/tmp/cqlcdc-demo/auth/roles.json")  # doctest: +SKIP
>>> store.ensure_default_superuser()  # doctest: +SKIP
True
>>> store.authenticate("cassandra", "cassandra").is_superuser  # doctest: +SKIP
True
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cqlcdc.auth.passwords import hash_password, needs_rehash, parse_hash, verify_password
from cqlcdc.auth.resources import Permission, Resource
from cqlcdc.errors import AuthenticationFailed, InvalidRequest, ServerError, Unauthorized
from cqlcdc.location import Location

DEFAULT_SUPERUSER = "cassandra"
DEFAULT_PASSWORD = "cassandra"  # as Cassandra: change it (ALTER ROLE) once you have logged in
FORMAT = 1

_dummy_hash: list[str] = []  # checked against for unknown roles, so they take as long


@dataclass(frozen=True, slots=True)
class Role:
    """One role as stored. ``permissions`` maps a resource's stored name to what is granted
    on it directly (not through other roles); ``member_of`` holds the roles granted to it.
    ``salted_hash`` never shows in a repr; a role without one cannot log in by password."""

    name: str
    is_superuser: bool = False
    can_login: bool = False
    member_of: frozenset[str] = frozenset()
    options: tuple[tuple[str, str], ...] = ()
    permissions: Mapping[str, frozenset[Permission]] = field(default_factory=dict, hash=False)
    salted_hash: str | None = field(default=None, repr=False)


class RoleStore:
    """The roles of one data directory, safe to use from many threads.

    Readers see a snapshot (the mapping is replaced whole, never changed in place); writers
    take the store's lock, write the file, then swap the snapshot.

    Args:
        path: the roles file (created, with its directory, on the first change).

    Raises:
        ServerError: the file exists but is not a roles file this version reads.
    """

    def __init__(self, path: Location | str | os.PathLike[str]) -> None:
        self.location = Location.of(path)
        self._lock = threading.Lock()
        self._roles: dict[str, Role] = self._load()

    # -- reading -----------------------------------------------------------------------------

    def get(self, name: str) -> Role | None:
        return self._roles.get(name)

    def exists(self, name: str) -> bool:
        return name in self._roles

    def names(self) -> list[str]:
        """Every role's name, sorted."""
        return sorted(self._roles)

    def roles_of(self, name: str, recursive: bool = True) -> frozenset[str]:
        """``name`` and the roles granted to it (with ``recursive``, those granted to them
        too); empty for a role that does not exist (Cassandra's ``getRoles``)."""
        roles = self._roles
        if name not in roles:
            return frozenset()
        if not recursive:
            return frozenset({name, *(r for r in roles[name].member_of if r in roles)})
        return frozenset(_closure(roles, name))

    def is_superuser(self, name: str) -> bool:
        """Whether ``name`` or a role granted to it (at any depth) is a superuser."""
        roles = self._roles
        return any(roles[r].is_superuser for r in self.roles_of(name))

    def permissions_on(self, name: str, resource: Resource) -> frozenset[Permission]:
        """What ``name`` holds on ``resource`` itself, directly or through its roles (a
        superuser holds everything that applies)."""
        if self.is_superuser(name):
            return frozenset(resource.applicable_permissions())
        roles = self._roles
        held: set[Permission] = set()
        for role in self.roles_of(name):
            held |= roles[role].permissions.get(resource.name, frozenset())
        return frozenset(held)

    def authorize(self, role_name: str, permission: Permission, resource: Resource) -> None:
        """Return if ``role_name`` holds ``permission`` on ``resource`` or one of its parents
        (or is a superuser).

        Raises:
            Unauthorized: Cassandra's "User r has no P permission on <resource> or any of its
                parents".
        """
        for r in resource.chain():
            if permission in self.permissions_on(role_name, r):
                return
        raise Unauthorized(
            f"User {role_name} has no {permission} permission on {resource} or any of its parents"
        )

    def list_permissions(
        self,
        grantees: Iterable[str] | None,
        resources: Iterable[Resource] | None,
        permissions: Iterable[Permission],
    ) -> list[tuple[str, Resource, Permission]]:
        """``(role, resource, permission)`` granted directly, for the given roles (None:
        all) and resources (None: all), sorted by role, resource name and permission."""
        roles = self._roles
        names = sorted(roles) if grantees is None else sorted(set(grantees) & set(roles))
        wanted = set(permissions)
        only = None if resources is None else {r.name for r in resources}
        out: list[tuple[str, Resource, Permission]] = []
        for name in names:
            for resource_name, held in roles[name].permissions.items():
                if only is not None and resource_name not in only:
                    continue
                resource = Resource.from_name(resource_name)
                out.extend((name, resource, p) for p in held if p in wanted)
        out.sort(key=lambda row: (row[0], row[1].name, row[2].ordinal))
        return out

    # -- logging in --------------------------------------------------------------------------

    def authenticate(self, name: str, password: str) -> Role:
        """The role ``name`` if ``password`` is its password and it may log in. A hash made
        with weaker parameters than today's is replaced by a new one.

        Raises:
            AuthenticationFailed: "Provided username <name> and/or password are incorrect"
                (an unknown role, a role without a password, a wrong password), or "<name>
                is not permitted to log in" (a role without LOGIN), as Cassandra says.
        """
        role = self._roles.get(name)
        stored = role.salted_hash if role is not None else None
        if role is None or stored is None:
            verify_password(password, _dummy())  # as slow as a real check: no role probing
            raise AuthenticationFailed(f"Provided username {name} and/or password are incorrect")
        if not verify_password(password, stored):
            raise AuthenticationFailed(f"Provided username {name} and/or password are incorrect")
        if not role.can_login:
            raise AuthenticationFailed(f"{name} is not permitted to log in")
        if needs_rehash(stored):
            fresh = hash_password(password)
            self._update(lambda roles: _rehash(roles, name, stored, fresh))
        return self._roles.get(name, role)

    def ensure_default_superuser(self) -> bool:
        """On a data directory without roles, create Cassandra's default superuser
        ``cassandra`` (password ``cassandra``, LOGIN, SUPERUSER). Returns whether it did."""
        if self._roles:
            return False
        salted = hash_password(DEFAULT_PASSWORD)

        def create(roles: dict[str, Role]) -> bool:
            if roles:
                return False
            roles[DEFAULT_SUPERUSER] = Role(
                DEFAULT_SUPERUSER, is_superuser=True, can_login=True, salted_hash=salted
            )
            return True

        return self._update(create)

    # -- changing roles ----------------------------------------------------------------------

    def create_role(
        self,
        name: str,
        *,
        password: str | None = None,
        login: bool = False,
        superuser: bool = False,
        options: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """Add a role (its password hashed here; the password is not kept).

        Raises:
            InvalidRequest: "<name> already exists".
        """
        salted = None if password is None else hash_password(password)
        role = Role(name, superuser, login, options=options, salted_hash=salted)

        def create(roles: dict[str, Role]) -> bool:
            if name in roles:
                raise InvalidRequest(f"{name} already exists")
            roles[name] = role
            return True

        self._update(create)

    def alter_role(
        self,
        name: str,
        *,
        password: str | None = None,
        login: bool | None = None,
        superuser: bool | None = None,
        options: tuple[tuple[str, str], ...] | None = None,
    ) -> None:
        """Change what is given (None: unchanged).

        Raises:
            InvalidRequest: "<name> doesn't exist".
        """
        salted = None if password is None else hash_password(password)

        def alter(roles: dict[str, Role]) -> bool:
            role = _existing(roles, name)
            roles[name] = dataclasses.replace(
                role,
                salted_hash=role.salted_hash if salted is None else salted,
                can_login=role.can_login if login is None else login,
                is_superuser=role.is_superuser if superuser is None else superuser,
                options=role.options if options is None else options,
            )
            return True

        self._update(alter)

    def drop_role(self, name: str) -> None:
        """Remove a role, its memberships (of it and in it), what it was granted and what
        was granted on it (Cassandra's ``dropRole``, ``revokeAllFrom``, ``revokeAllOn``).

        Raises:
            InvalidRequest: "<name> doesn't exist".
        """
        on_it = Resource.role(name).name

        def drop(roles: dict[str, Role]) -> bool:
            _existing(roles, name)
            del roles[name]
            for other, role in list(roles.items()):
                if name in role.member_of or on_it in role.permissions:
                    roles[other] = dataclasses.replace(
                        role,
                        member_of=role.member_of - {name},
                        permissions={k: v for k, v in role.permissions.items() if k != on_it},
                    )
            return True

        self._update(drop)

    def grant_role(self, role: str, grantee: str) -> None:
        """Make ``grantee`` a member of ``role``.

        Raises:
            InvalidRequest: either does not exist, or the grant would make a cycle ("<a> is
                a member of <b>", Cassandra's message).
        """

        def grant(roles: dict[str, Role]) -> bool:
            _existing(roles, role)
            target = _existing(roles, grantee)
            if role in _closure(roles, grantee):
                raise InvalidRequest(f"{grantee} is a member of {role}")
            if grantee in _closure(roles, role):
                raise InvalidRequest(f"{role} is a member of {grantee}")
            roles[grantee] = dataclasses.replace(target, member_of=target.member_of | {role})
            return True

        self._update(grant)

    def revoke_role(self, role: str, revokee: str) -> None:
        """Take ``revokee`` out of ``role``.

        Raises:
            InvalidRequest: either does not exist, or "<revokee> is not a member of <role>".
        """

        def revoke(roles: dict[str, Role]) -> bool:
            _existing(roles, role)
            target = _existing(roles, revokee)
            if role not in target.member_of:
                raise InvalidRequest(f"{revokee} is not a member of {role}")
            roles[revokee] = dataclasses.replace(target, member_of=target.member_of - {role})
            return True

        self._update(revoke)

    def grant(self, permissions: Iterable[Permission], resource: Resource, grantee: str) -> None:
        """Grant ``permissions`` on ``resource`` to ``grantee``.

        Raises:
            InvalidRequest: "Role <grantee> doesn't exist".
        """
        added = frozenset(permissions)

        def grant(roles: dict[str, Role]) -> bool:
            role = roles.get(grantee)
            if role is None:
                raise InvalidRequest(f"Role {grantee} doesn't exist")
            held = role.permissions.get(resource.name, frozenset())
            if added <= held:
                return False
            permissions = {**role.permissions, resource.name: held | added}
            roles[grantee] = dataclasses.replace(role, permissions=permissions)
            return True

        self._update(grant)

    def revoke(self, permissions: Iterable[Permission], resource: Resource, revokee: str) -> None:
        """Revoke ``permissions`` on ``resource`` from ``revokee`` (those not granted are
        ignored, as in Cassandra).

        Raises:
            InvalidRequest: "Role <revokee> doesn't exist".
        """
        removed = frozenset(permissions)

        def revoke(roles: dict[str, Role]) -> bool:
            role = roles.get(revokee)
            if role is None:
                raise InvalidRequest(f"Role {revokee} doesn't exist")
            held = role.permissions.get(resource.name, frozenset())
            if not held & removed:
                return False
            permissions = {k: v for k, v in role.permissions.items() if k != resource.name}
            if held - removed:
                permissions[resource.name] = held - removed
            roles[revokee] = dataclasses.replace(role, permissions=permissions)
            return True

        self._update(revoke)

    def revoke_all_on(self, resource: Resource) -> None:
        """Forget every grant on ``resource`` and its children (after a DROP, so a new
        keyspace or table of the same name starts without them)."""

        def revoke(roles: dict[str, Role]) -> bool:
            changed = False
            for name, role in list(roles.items()):
                kept = {
                    k: v
                    for k, v in role.permissions.items()
                    if not resource.contains(Resource.from_name(k))
                }
                if len(kept) != len(role.permissions):
                    roles[name] = dataclasses.replace(role, permissions=kept)
                    changed = True
            return changed

        self._update(revoke)

    # -- the file ----------------------------------------------------------------------------

    def _update(self, change: Callable[[dict[str, Role]], bool]) -> bool:
        """Apply ``change`` to a copy of the roles; if it reports a change, write the file,
        then publish the copy. A change that raises leaves both untouched."""
        with self._lock:
            roles = dict(self._roles)
            if not change(roles):
                return False
            self._write(roles)
            self._roles = roles
            return True

    def _write(self, roles: Mapping[str, Role]) -> None:
        self.location.parent.makedirs()
        document = {"format": FORMAT, "roles": {n: _to_json(r) for n, r in sorted(roles.items())}}
        # password hashes: readable by the owner only (on a local disk)
        self.location.write_atomically(json.dumps(document, indent=1, sort_keys=True), 0o600)

    def _load(self) -> dict[str, Role]:
        text = self.location.read_text()
        if text is None:
            return {}
        try:
            document = json.loads(text)
            if not isinstance(document, dict) or document.get("format") != FORMAT:
                raise ValueError(f"not a roles file of format {FORMAT}")
            entries = document["roles"]
            if not isinstance(entries, dict):
                raise ValueError("'roles' is not an object")
            return {name: _from_json(name, entry) for name, entry in entries.items()}
        except (ValueError, KeyError, TypeError) as e:
            raise ServerError(f"roles file {self.location} is damaged: {e}") from None


def _closure(roles: Mapping[str, Role], name: str) -> set[str]:
    """``name`` and every role granted to it, at any depth."""
    found: set[str] = set()
    pending = [name]
    while pending:
        current = pending.pop()
        if current in found or current not in roles:
            continue
        found.add(current)
        pending.extend(roles[current].member_of)
    return found


def _existing(roles: Mapping[str, Role], name: str) -> Role:
    role = roles.get(name)
    if role is None:
        raise InvalidRequest(f"{name} doesn't exist")
    return role


def _rehash(roles: dict[str, Role], name: str, old: str, fresh: str) -> bool:
    role = roles.get(name)
    if role is None or role.salted_hash != old:  # dropped or changed meanwhile
        return False
    roles[name] = dataclasses.replace(role, salted_hash=fresh)
    return True


def _dummy() -> str:
    if not _dummy_hash:
        _dummy_hash.append(hash_password(os.urandom(16).hex()))
    return _dummy_hash[0]


def _to_json(role: Role) -> dict[str, Any]:
    return {
        "is_superuser": role.is_superuser,
        "can_login": role.can_login,
        "salted_hash": role.salted_hash,
        "member_of": sorted(role.member_of),
        "options": dict(role.options),
        "permissions": {
            resource: [p.value for p in sorted(held, key=lambda p: p.ordinal)]
            for resource, held in sorted(role.permissions.items())
        },
    }


def _from_json(name: str, entry: Any) -> Role:
    """A role from its file entry; every field checked (the message names the role and the
    field, never a hash)."""
    if not isinstance(entry, dict):
        raise ValueError(f"role {name!r} is not an object")
    salted = entry.get("salted_hash")
    if salted is not None:
        if not isinstance(salted, str):
            raise ValueError(f"role {name!r}: salted_hash is not a string")
        parse_hash(salted)
    flags = (entry["is_superuser"], entry["can_login"])
    member_of, options, permissions = entry["member_of"], entry["options"], entry["permissions"]
    if not all(isinstance(f, bool) for f in flags):
        raise ValueError(f"role {name!r}: is_superuser and can_login must be booleans")
    if not (isinstance(member_of, list) and all(isinstance(m, str) for m in member_of)):
        raise ValueError(f"role {name!r}: member_of is not a list of names")
    if not (isinstance(options, dict) and all(isinstance(v, str) for v in options.values())):
        raise ValueError(f"role {name!r}: options is not a map of text")
    if not isinstance(permissions, dict):
        raise ValueError(f"role {name!r}: permissions is not an object")
    held: dict[str, frozenset[Permission]] = {}
    for resource, names in permissions.items():
        Resource.from_name(resource)
        held[resource] = frozenset(Permission(p) for p in names)
    return Role(
        name,
        is_superuser=flags[0],
        can_login=flags[1],
        member_of=frozenset(member_of),
        options=tuple(options.items()),
        permissions=held,
        salted_hash=salted,
    )


__all__ = ["DEFAULT_PASSWORD", "DEFAULT_SUPERUSER", "Role", "RoleStore"]
