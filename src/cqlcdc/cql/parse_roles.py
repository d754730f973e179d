"""Grammar rules for roles and permissions (Cassandra 4's DCL): CREATE/ALTER/DROP ROLE and
USER, LIST ROLES/USERS, GRANT/REVOKE of roles and of permissions, LIST PERMISSIONS.

A role name is an identifier (lower-cased), a quoted name or a string literal (both keep
their case); a legacy user name keeps its case even unquoted, as in Cassandra. A password
never appears in a syntax error: the token where one is expected is shown as ``'****'``.

>>> from cqlcdc.cql.parser import Parser
>>> Parser.parse("GRANT SELECT ON ks.t TO 'Bob'")
GrantPermissions(permissions=('SELECT',), resource=Resource(kind='TABLE', keyspace='ks', \
name='t'), grantee='Bob')
"""

from __future__ import annotations

from typing import ClassVar, cast

from cqlcdc.cql.ast import (
    APPLICABLE_PERMISSIONS,
    PERMISSION_ORDER,
    AlterRole,
    Constant,
    CreateRole,
    DropRole,
    GrantPermissions,
    GrantRole,
    ListPermissions,
    ListRoles,
    MapLiteral,
    PermissionName,
    Resource,
    RevokePermissions,
    RevokeRole,
    RoleOptions,
    Statement,
)
from cqlcdc.cql.parse_terms import TermsMixin
from cqlcdc.cql.render import render_term
from cqlcdc.cql.tokens import Token, TokenType
from cqlcdc.errors import CqlSyntaxError

_HIDDEN = "****"  # what a syntax error shows instead of a token that may be a password


class RolesMixin(TermsMixin):
    """``create_role``, ``alter_role``, ``drop_role``, ``list_roles``, ``grant_role``,
    ``revoke_role``, ``grant_permissions``, ``revoke_permissions``, ``list_permissions``,
    ``role_options``, ``resource`` and the legacy ``create_user``/``alter_user``/
    ``drop_user``/``list_users``."""

    PERMISSION_WORDS: ClassVar[frozenset[str]] = frozenset(p.lower() for p in PERMISSION_ORDER)
    # Cassandra's role options this engine does not have (no password hashes given as text,
    # no generated passwords, one datacenter and no CIDR filters)
    UNSUPPORTED_ROLE_OPTIONS: ClassVar[dict[str, str]] = {
        "hashed": "HASHED PASSWORD",
        "generated": "GENERATED PASSWORD",
        "access": "ACCESS TO DATACENTERS / ACCESS FROM CIDRS",
    }

    # -- names -------------------------------------------------------------------------------

    def _parse_role_name(self) -> str:
        """``roleName``: an identifier (lower-cased), a quoted name or a string (case kept)."""
        token = self._curr
        if token.type is TokenType.QMARK or token.type is TokenType.COLON:
            raise self._error("Bind variables cannot be used for role names", token)
        if token.type is TokenType.STRING:
            self._advance()
            return token.value
        return self._parse_identifier()

    def _parse_user_name(self) -> str:
        """``username``: an identifier or a string, both kept as written (Cassandra keeps a
        user name's case); a quoted name is refused, as Cassandra refuses it."""
        token = self._curr
        if token.type is TokenType.QUOTED_NAME:
            raise self._error(
                "Quoted strings are are not supported for user names and USER is deprecated, "
                "please use ROLE",
                token,
            )
        if token.type is TokenType.STRING:
            self._advance()
            return token.value
        if token.type is TokenType.WORD and token.value not in self.RESERVED:
            self._advance()
            return token.text
        if token.type is TokenType.WORD:
            raise self._no_viable(token)
        raise self._mismatch("IDENT", token)

    # -- CREATE / ALTER / DROP ROLE ----------------------------------------------------------

    def _parse_create_role(self) -> CreateRole:
        """``CREATE ROLE [IF NOT EXISTS] r [WITH option [AND option]*]`` (CREATE ROLE
        consumed)."""
        if_not_exists = self._parse_if_not_exists()
        name = self._parse_role_name()
        options = self._parse_role_options() if self._match_word("with") else RoleOptions()
        return CreateRole(name, options, if_not_exists)

    def _parse_alter_role(self) -> AlterRole:
        """``ALTER ROLE r [WITH option [AND option]*]`` (ALTER ROLE consumed)."""
        name = self._parse_role_name()
        options = self._parse_role_options() if self._match_word("with") else RoleOptions()
        return AlterRole(name, options)

    def _parse_drop_role(self) -> DropRole:
        """``DROP ROLE [IF EXISTS] r`` (DROP ROLE consumed)."""
        if_exists = self._parse_if_exists()
        return DropRole(self._parse_role_name(), if_exists)

    def _parse_role_options(self) -> RoleOptions:
        """``roleOptions``: PASSWORD = 'p' | LOGIN = bool | SUPERUSER = bool | OPTIONS = {...},
        in any order, joined by AND, each at most once."""
        values: dict[str, object] = {}
        while True:
            token = self._curr
            name = token.value if token.type is TokenType.WORD else ""
            if name in self.UNSUPPORTED_ROLE_OPTIONS:
                option = self.UNSUPPORTED_ROLE_OPTIONS[name]
                raise self._error(f"Role option {option} is not supported", token)
            if name not in ("password", "login", "superuser", "options"):
                raise self._no_viable(token)
            if name in values:
                raise self._error(f"Multiple definition for property '{name.upper()}'", token)
            self._advance()
            if name == "password":
                self._expect_before_password(TokenType.EQ)
                values[name] = self._parse_password("and")
            else:
                self._expect(TokenType.EQ)
                values[name] = self._parse_boolean() if name != "options" else self._parse_map()
            if not self._match_word("and"):
                break
        return RoleOptions(
            password=cast(str | None, values.get("password")),
            login=cast(bool | None, values.get("login")),
            superuser=cast(bool | None, values.get("superuser")),
            options=cast(tuple[tuple[str, str], ...] | None, values.get("options")),
        )

    def _expect_before_password(self, kind: TokenType) -> None:
        """Expect ``kind``; the token found instead may be the password, so it is hidden."""
        if self._curr.type is kind:
            self._advance()
            return
        token = self._curr
        shown = _HIDDEN if token.type is not TokenType.EOF else token.text
        raise self._error(f"mismatched input '{shown}' expecting {kind.value}", token)

    def _parse_password(self, *followers: str) -> str:
        """A password literal. The token after it must be one of ``followers`` (words), a
        ``;`` or the end: anything else may be the rest of a password whose quote was not
        doubled (``'it's'``), so it is hidden too."""
        token = self._curr
        if token.type is not TokenType.STRING:
            shown = _HIDDEN if token.type is not TokenType.EOF else token.text
            raise self._error(f"mismatched input '{shown}' expecting STRING_LITERAL", token)
        self._advance()
        after = self._curr
        if after.type not in (TokenType.EOF, TokenType.SEMICOLON) and not (
            after.type is TokenType.WORD and after.value in followers
        ):
            raise self._error(f"extraneous input '{_HIDDEN}' after the password", after)
        return token.value

    def _parse_boolean(self) -> bool:
        token = self._curr
        if token.type is TokenType.WORD and token.value in ("true", "false"):
            self._advance()
            return token.value == "true"
        raise self._mismatch("BOOLEAN", token)

    def _parse_map(self) -> tuple[tuple[str, str], ...]:
        """``fullMapLiteral`` of constants, as text (Cassandra's ``convertPropertyMap``)."""
        if not self._at(TokenType.LBRACE):
            raise self._mismatch(TokenType.LBRACE.value)
        token = self._curr
        literal = self._parse_term()
        if not isinstance(literal, MapLiteral):
            raise self._error("Invalid value for property 'OPTIONS': expected a map", token)
        entries: dict[str, str] = {}
        for key, value in literal.entries:
            if not isinstance(key, Constant) or key.kind == "null":
                raise self._error(f"Invalid property name: {render_term(key)}", token)
            if not isinstance(value, Constant) or value.kind == "null":
                raise self._error(
                    f"Invalid property value: {render_term(value)} for property: {key.text}",
                    token,
                )
            if key.text in entries:
                raise self._error(f"Multiple definition for property {key.text}", token)
            entries[key.text] = value.text
        return tuple(entries.items())

    # -- legacy users ------------------------------------------------------------------------

    def _parse_create_user(self) -> CreateRole:
        """``CREATE USER [IF NOT EXISTS] u [WITH PASSWORD 'p'] [SUPERUSER | NOSUPERUSER]``:
        a role with LOGIN (CREATE USER consumed)."""
        if_not_exists = self._parse_if_not_exists()
        name = self._parse_user_name()
        password = self._parse_user_password() if self._match_word("with") else None
        superuser = self._parse_user_superuser()
        options = RoleOptions(password=password, login=True, superuser=bool(superuser))
        return CreateRole(name, options, if_not_exists, user=True)

    def _parse_alter_user(self) -> AlterRole:
        """``ALTER USER u [WITH PASSWORD 'p'] [SUPERUSER | NOSUPERUSER]`` (ALTER USER
        consumed)."""
        name = self._parse_user_name()
        password = self._parse_user_password() if self._match_word("with") else None
        options = RoleOptions(password=password, superuser=self._parse_user_superuser())
        return AlterRole(name, options, user=True)

    def _parse_drop_user(self) -> DropRole:
        """``DROP USER [IF EXISTS] u`` (DROP USER consumed)."""
        if_exists = self._parse_if_exists()
        return DropRole(self._parse_user_name(), if_exists, user=True)

    def _parse_user_password(self) -> str:
        """``PASSWORD 'p'`` (no ``=`` in the legacy form)."""
        token = self._curr
        if token.type is TokenType.WORD and token.value in self.UNSUPPORTED_ROLE_OPTIONS:
            option = self.UNSUPPORTED_ROLE_OPTIONS[token.value]
            raise self._error(f"Role option {option} is not supported", token)
        self._expect_word("password")
        return self._parse_password("superuser", "nosuperuser")

    def _parse_user_superuser(self) -> bool | None:
        if self._match_word("superuser"):
            return True
        if self._match_word("nosuperuser"):
            return False
        return None

    # -- LIST --------------------------------------------------------------------------------

    def _parse_list(self) -> Statement:
        """``LIST ROLES ...``, ``LIST USERS`` or ``LIST <permissions> ...``."""
        self._expect_word("list")
        if self._match_word("roles"):
            of = self._parse_role_name() if self._match_word("of") else None
            return ListRoles(of, recursive=not self._match_word("norecursive"))
        if self._match_word("users"):
            return ListRoles(None, recursive=False, users=True)
        permissions = self._parse_permissions()
        resource = self._parse_resource() if self._match_word("on") else None
        of = self._parse_role_name() if self._match_word("of") else None
        recursive = not self._match_word("norecursive")
        return ListPermissions(permissions, resource, of, recursive)

    # -- GRANT / REVOKE ----------------------------------------------------------------------

    def _parse_grant(self) -> GrantRole | GrantPermissions:
        """``GRANT role TO grantee`` or ``GRANT permissions ON resource TO grantee``."""
        self._expect_word("grant")
        if self._at_permissions():
            permissions, resource = self._parse_permissions_on()
            self._expect_word("to")
            return GrantPermissions(permissions, resource, self._parse_role_name())
        role = self._parse_role_name()
        self._expect_word("to")
        return GrantRole(role, self._parse_role_name())

    def _parse_revoke(self) -> RevokeRole | RevokePermissions:
        """``REVOKE role FROM revokee`` or ``REVOKE permissions ON resource FROM revokee``."""
        self._expect_word("revoke")
        if self._at_permissions():
            permissions, resource = self._parse_permissions_on()
            self._expect_word("from")
            return RevokePermissions(permissions, resource, self._parse_role_name())
        role = self._parse_role_name()
        self._expect_word("from")
        return RevokeRole(role, self._parse_role_name())

    def _at_permissions(self) -> bool:
        """Whether a permission list starts here (every permission word is reserved; ``ALL``
        is not, so ``GRANT all TO r`` grants the role named all)."""
        token = self._curr
        if token.type is not TokenType.WORD:
            return False
        if token.value == "all":
            return self._is_word("permissions", "on", offset=1)
        return token.value in self.PERMISSION_WORDS

    def _parse_permissions(self) -> tuple[PermissionName, ...] | None:
        """``ALL [PERMISSIONS]`` (None) or ``perm [PERMISSION] (, perm [PERMISSION])*``, as a
        set in Cassandra's order."""
        if self._match_word("all"):
            self._match_word("permissions")
            return None
        found: set[str] = set()
        while True:
            token = self._curr
            if token.type is not TokenType.WORD or token.value not in self.PERMISSION_WORDS:
                raise self._no_viable(token)
            self._advance()
            if not self._match_word("permission"):
                self._match_word("permissions")
            found.add(token.value.upper())
            if not self._match(TokenType.COMMA):
                return tuple(p for p in PERMISSION_ORDER if p in found)

    def _parse_permissions_on(self) -> tuple[tuple[PermissionName, ...] | None, Resource]:
        """``permissions ON resource``, the permissions narrowed to those the resource
        supports (Cassandra's ``filterPermissions``)."""
        permissions = self._parse_permissions()
        self._expect_word("on")
        token = self._curr
        resource = self._parse_resource()
        if permissions is None:
            return None, resource
        applicable = APPLICABLE_PERMISSIONS[resource.kind]
        kept = tuple(p for p in permissions if p in applicable)
        if not kept:
            kind = "RoleResource" if resource.kind in ("ALL ROLES", "ROLE") else "DataResource"
            raise self._error(
                f"Resource type {kind} does not support any of the requested permissions", token
            )
        return kept, resource

    def _parse_resource(self) -> Resource:
        """``ALL KEYSPACES``, ``KEYSPACE ks``, ``[TABLE | COLUMNFAMILY] [ks.]t``,
        ``ALL ROLES`` or ``ROLE r``."""
        token = self._curr
        if self._is_word("all"):
            if self._match_words("all", "keyspaces"):
                return Resource("ALL KEYSPACES")
            if self._match_words("all", "roles"):
                return Resource("ALL ROLES")
            if self._is_word("functions", "mbeans", offset=1):
                raise self._unsupported_resource(self._peek())
        if self._match_word("keyspace"):
            return Resource("KEYSPACE", name=self._parse_identifier())
        if self._is_word("role", "function", "mbean") and self._names_follow():
            if not self._is_word("role"):
                raise self._unsupported_resource(token)
            self._advance()
            return Resource("ROLE", name=self._parse_role_name())
        if not self._match_word("table"):
            self._match_word("columnfamily")
        name = self._parse_qualified_name()
        return Resource("TABLE", name.keyspace, name.name)

    def _names_follow(self) -> bool:
        """Whether a name follows this word (``ROLE r``), not a keyword (``ON role TO r``:
        the table named role)."""
        token = self._peek()
        if token.type in (TokenType.STRING, TokenType.QUOTED_NAME):
            return True
        return token.type is TokenType.WORD and token.value not in self.RESERVED

    def _unsupported_resource(self, token: Token) -> CqlSyntaxError:
        return self._error(
            f"{token.text.upper()} resources are not supported: cqlcdc has no user-defined "
            "functions and no JMX",
            token,
        )
