"""Grammar rules for keyspaces, user-defined types, USE and DESCRIBE."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from cqlcdc.cql.ast import (
    AlterKeyspace,
    AlterType,
    Constant,
    CreateKeyspace,
    CreateType,
    Describe,
    DescribeKind,
    DropKeyspace,
    DropType,
    MapLiteral,
    QualifiedName,
    Term,
    TypeRef,
    UseKeyspace,
)
from cqlcdc.cql.parse_terms import TermsMixin
from cqlcdc.cql.tokens import Token, TokenType


@dataclass(slots=True)
class KeyspaceProperties:
    """What ``WITH ...`` of CREATE / ALTER KEYSPACE gave (None / empty: not given)."""

    replication: tuple[tuple[str, str], ...] = ()
    durable_writes: bool | None = None
    tablets: tuple[tuple[str, str], ...] = ()


class SchemaMixin(TermsMixin):
    """``create_keyspace``, ``keyspace_properties``, ``create_type``, ``alter_type``,
    ``use``, ``describe``."""

    # DESCRIBE <word> [name]: the kind each word names, and whether a name follows.
    DESCRIBE_KINDS: ClassVar[dict[str, tuple[DescribeKind, bool]]] = {
        "table": ("TABLE", True),
        "columnfamily": ("TABLE", True),
        "type": ("TYPE", True),
        "keyspace": ("KEYSPACE", True),
        "index": ("INDEX", True),
        "tables": ("TABLES", False),
        "columnfamilies": ("TABLES", False),
        "types": ("TYPES", False),
        "keyspaces": ("KEYSPACES", False),
        "schema": ("SCHEMA", False),
        "cluster": ("CLUSTER", False),
        "functions": ("FUNCTIONS", False),
        "aggregates": ("AGGREGATES", False),
    }

    # -- keyspaces ---------------------------------------------------------------------------

    def _parse_create_keyspace(self) -> CreateKeyspace:
        """``CREATE KEYSPACE [IF NOT EXISTS] ks [WITH replication = {...} AND
        durable_writes = bool AND tablets = {...}]`` (CREATE and KEYSPACE already consumed)."""
        if_not_exists = self._parse_if_not_exists()
        name = self._parse_identifier()
        properties = KeyspaceProperties()
        if self._match_word("with"):
            properties = self._parse_keyspace_properties()
        return CreateKeyspace(
            name,
            properties.replication,
            properties.durable_writes is not False,
            if_not_exists=if_not_exists,
            tablets=properties.tablets,
        )

    def _parse_alter_keyspace(self) -> AlterKeyspace:
        """``ALTER KEYSPACE ks WITH ...`` (ALTER and KEYSPACE already consumed)."""
        name = self._parse_identifier()
        self._expect_word("with")
        properties = self._parse_keyspace_properties()
        return AlterKeyspace(
            name, properties.replication, properties.durable_writes, properties.tablets
        )

    def _parse_keyspace_properties(self) -> KeyspaceProperties:
        properties = KeyspaceProperties()
        seen: set[str] = set()
        while True:
            token = self._curr
            name = self._parse_identifier()
            if name in seen:
                raise self._error(f"Multiple definition for property {name}", token)
            seen.add(name)
            self._expect(TokenType.EQ)
            value_token = self._curr
            value = self._parse_term()
            if name == "replication":
                properties.replication = self._property_map(name, value, value_token)
            elif name == "durable_writes":
                properties.durable_writes = self._boolean_property(name, value, value_token)
            elif name == "tablets":  # ScyllaDB 6's; the catalog checks its options
                properties.tablets = self._property_map(name, value, value_token)
            else:
                raise self._error(f"Unknown property '{name}'", token)
            if not self._match_word("and"):
                return properties

    def _property_map(self, name: str, value: Term, token: Token) -> tuple[tuple[str, str], ...]:
        """``{'class': 'SimpleStrategy', 'replication_factor': 1}`` -> pairs of texts (a
        boolean as ``true``/``false``: ``tablets = {'enabled': false}``)."""
        if not isinstance(value, MapLiteral):
            raise self._error(f"Invalid value for property '{name}'. It should be a map.", token)
        pairs: list[tuple[str, str]] = []
        for key, item in value.entries:
            if (
                not isinstance(key, Constant)
                or not isinstance(item, Constant)
                or key.kind == "null"
                or item.kind == "null"
            ):
                raise self._error(f"Invalid value for property '{name}'", token)
            pairs.append((key.text, item.text))
        return tuple(pairs)

    def _boolean_property(self, name: str, value: Term, token: Token) -> bool:
        if isinstance(value, Constant) and value.kind in ("boolean", "string"):
            text = value.text.lower()
            if text in ("true", "false"):
                return text == "true"
        raise self._error(f"Invalid boolean value for property '{name}'", token)

    def _parse_drop_keyspace(self) -> DropKeyspace:
        """``DROP KEYSPACE [IF EXISTS] ks`` (DROP and KEYSPACE already consumed)."""
        if_exists = self._parse_if_exists()
        return DropKeyspace(self._parse_identifier(), if_exists)

    def _parse_use(self) -> UseKeyspace:
        self._expect_word("use")
        return UseKeyspace(self._parse_identifier())

    # -- user-defined types ------------------------------------------------------------------

    def _parse_create_type(self) -> CreateType:
        """``CREATE TYPE [IF NOT EXISTS] ks.ut (f type, ...)`` (CREATE TYPE consumed)."""
        if_not_exists = self._parse_if_not_exists()
        name = self._parse_qualified_name()
        self._expect(TokenType.LPAREN)
        fields: list[tuple[str, TypeRef]] = []
        while True:
            field = self._parse_identifier()
            fields.append((field, self._parse_type()))
            if not self._match(TokenType.COMMA) or self._at(TokenType.RPAREN):
                break
        self._expect(TokenType.RPAREN)
        return CreateType(name, tuple(fields), if_not_exists)

    def _parse_alter_type_statement(self) -> AlterType:
        """``ALTER TYPE ut ADD f type`` or ``ALTER TYPE ut RENAME a TO b [AND ...]``."""
        name = self._parse_qualified_name()
        if self._match_word("add"):
            field = self._parse_identifier()
            return AlterType(name, add=(field, self._parse_type()))
        self._expect_word("rename")
        renames: list[tuple[str, str]] = []
        while True:
            old = self._parse_identifier()
            self._expect_word("to")
            renames.append((old, self._parse_identifier()))
            if not self._match_word("and"):
                return AlterType(name, renames=tuple(renames))

    def _parse_drop_type(self) -> DropType:
        """``DROP TYPE [IF EXISTS] ut`` (DROP TYPE already consumed)."""
        if_exists = self._parse_if_exists()
        return DropType(self._parse_qualified_name(), if_exists)

    # -- DESCRIBE ----------------------------------------------------------------------------

    def _parse_describe(self) -> Describe:
        """``DESCRIBE TABLE t`` / ``TYPE ut`` / ``KEYSPACE [ks]`` / ``INDEX i`` / ``TABLES`` /
        ``TYPES`` / ``KEYSPACES`` / ``[FULL] SCHEMA`` / ``CLUSTER`` / ``FUNCTIONS`` /
        ``AGGREGATES``, or ``DESCRIBE name`` (a keyspace if
        unqualified, a table if qualified)."""
        self._expect_word("describe", "desc")
        self._match_word("full")  # DESC FULL SCHEMA: the same output here
        described = self._parse_describe_target()
        if self._match_word("with"):
            self._expect_word("internals")
            return replace(described, internals=True)
        return described

    def _parse_describe_target(self) -> Describe:
        token = self._curr
        entry = self.DESCRIBE_KINDS.get(token.value)
        if token.type is TokenType.WORD and entry is not None and not self._at(TokenType.DOT, 1):
            kind, named = entry
            self._advance()
            if not named:
                return Describe(kind)
            if kind == "KEYSPACE":
                if (
                    self._at_end()
                    or self._at(TokenType.SEMICOLON)
                    or (self._is_word("with") and self._is_word("internals", offset=1))
                ):
                    return Describe(kind)
                return Describe(kind, QualifiedName(None, self._parse_identifier()))
            return Describe(kind, self._parse_qualified_name())
        name = self._parse_qualified_name()
        return Describe("KEYSPACE" if name.keyspace is None else "TABLE", name)
