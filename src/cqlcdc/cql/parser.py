"""The CQL parser: statements dispatched through tables keyed by their first keyword(s).

One ``_parse_<rule>`` method per grammar rule, split by statement family across mixins:
``parse_terms`` (terms, types), ``parse_clauses`` (WHERE, USING, IF), ``parse_dml``,
``parse_select``, ``parse_table``, ``parse_index``, ``parse_schema`` and ``parse_roles``.

>>> Parser.parse("USE ks;")
UseKeyspace(name='ks')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from cqlcdc.cql.ast import Statement
from cqlcdc.cql.parse_dml import DmlMixin
from cqlcdc.cql.parse_index import IndexMixin
from cqlcdc.cql.parse_roles import RolesMixin
from cqlcdc.cql.parse_schema import SchemaMixin
from cqlcdc.cql.parse_select import SelectMixin
from cqlcdc.cql.parse_table import TableMixin
from cqlcdc.cql.tokens import Token, TokenType, tokenize


class Parser(DmlMixin, SelectMixin, IndexMixin, TableMixin, SchemaMixin, RolesMixin):
    """Parses the tokens of one statement (an optional trailing ``;``, then EOF)."""

    STATEMENT_PARSERS: ClassVar[dict[str, Callable[[Parser], Statement]]] = {
        "select": lambda self: self._parse_select(),
        "insert": lambda self: self._parse_insert(),
        "update": lambda self: self._parse_update(),
        "delete": lambda self: self._parse_delete(),
        "begin": lambda self: self._parse_batch(),
        "create": lambda self: self._parse_create(),
        "alter": lambda self: self._parse_alter(),
        "drop": lambda self: self._parse_drop(),
        "truncate": lambda self: self._parse_truncate(),
        "use": lambda self: self._parse_use(),
        "describe": lambda self: self._parse_describe(),
        "desc": lambda self: self._parse_describe(),
        "grant": lambda self: self._parse_grant(),
        "revoke": lambda self: self._parse_revoke(),
        "list": lambda self: self._parse_list(),
    }

    # The second keyword of CREATE / ALTER / DROP statements (the first two already consumed).
    CREATE_PARSERS: ClassVar[dict[str, Callable[[Parser], Statement]]] = {
        "keyspace": lambda self: self._parse_create_keyspace(),
        "table": lambda self: self._parse_create_table(),
        "columnfamily": lambda self: self._parse_create_table(),
        "type": lambda self: self._parse_create_type(),
        "index": lambda self: self._parse_create_index(),
        "custom": lambda self: self._parse_create_custom_index(),
        "materialized": lambda self: self._parse_create_materialized_view(),
        "role": lambda self: self._parse_create_role(),
        "user": lambda self: self._parse_create_user(),
    }

    ALTER_PARSERS: ClassVar[dict[str, Callable[[Parser], Statement]]] = {
        "keyspace": lambda self: self._parse_alter_keyspace(),
        "table": lambda self: self._parse_alter_table(),
        "columnfamily": lambda self: self._parse_alter_table(),
        "type": lambda self: self._parse_alter_type_statement(),
        "role": lambda self: self._parse_alter_role(),
        "user": lambda self: self._parse_alter_user(),
        "materialized": lambda self: self._parse_alter_materialized_view(),
    }

    DROP_PARSERS: ClassVar[dict[str, Callable[[Parser], Statement]]] = {
        "keyspace": lambda self: self._parse_drop_keyspace(),
        "table": lambda self: self._parse_drop_table(),
        "columnfamily": lambda self: self._parse_drop_table(),
        "type": lambda self: self._parse_drop_type(),
        "index": lambda self: self._parse_drop_index(),
        "materialized": lambda self: self._parse_drop_materialized_view(),
        "role": lambda self: self._parse_drop_role(),
        "user": lambda self: self._parse_drop_user(),
    }

    @classmethod
    def parse(cls, text: str, line: int = 1, column: int = 1) -> Statement:
        """Parse one statement; ``line``/``column`` locate ``text`` inside a larger script.

        Raises:
            CqlSyntaxError: the text is not exactly one statement.
        """
        return cls(tokenize(text, line, column)).parse_statement()

    def __init__(self, tokens: list[Token]) -> None:
        super().__init__(tokens)

    def parse_statement(self) -> Statement:
        statement = self._parse_statement()
        self._match(TokenType.SEMICOLON)
        if not self._at_end():
            raise self._mismatch("EOF")
        return statement

    def _parse_statement(self) -> Statement:
        token = self._curr
        parser = self.STATEMENT_PARSERS.get(token.value)
        if token.type is not TokenType.WORD or parser is None:
            raise self._no_viable(token)
        return parser(self)

    def _parse_create(self) -> Statement:
        return self._dispatch_second("create", self.CREATE_PARSERS)

    def _parse_alter(self) -> Statement:
        return self._dispatch_second("alter", self.ALTER_PARSERS)

    def _parse_drop(self) -> Statement:
        return self._dispatch_second("drop", self.DROP_PARSERS)

    def _dispatch_second(
        self, first: str, parsers: dict[str, Callable[[Parser], Statement]]
    ) -> Statement:
        self._expect_word(first)
        token = self._curr
        parser = parsers.get(token.value)
        if token.type is not TokenType.WORD or parser is None:
            raise self._no_viable(token)
        self._advance()
        return parser(self)
