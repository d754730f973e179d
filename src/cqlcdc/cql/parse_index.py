"""Grammar rules for secondary indexes (ScyllaDB's ``CREATE INDEX`` with global, local and
collection targets, ``DROP INDEX``) and for materialized views, which are parsed to be
refused with ScyllaDB's errors (``CREATE/ALTER/DROP MATERIALIZED VIEW``)."""

from __future__ import annotations

from cqlcdc.cql.ast import (
    AlterMaterializedView,
    CreateIndex,
    CreateMaterializedView,
    DropIndex,
    DropMaterializedView,
    IndexTarget,
)
from cqlcdc.cql.parse_table import TableMixin
from cqlcdc.cql.tokens import TokenType

_TARGET_FUNCTIONS = ("keys", "values", "entries", "full")


class IndexMixin(TableMixin):
    def _parse_create_custom_index(self) -> CreateIndex:
        """``CREATE CUSTOM INDEX ... USING 'class'`` (CREATE CUSTOM consumed)."""
        self._expect_word("index")
        return self._parse_create_index(custom=True)

    def _parse_create_index(self, custom: bool = False) -> CreateIndex:
        """``CREATE INDEX [IF NOT EXISTS] [name] ON t (target, ...)`` (CREATE INDEX
        consumed); a target is ``c``, ``keys(c)``, ``values(c)``, ``entries(c)``,
        ``full(c)`` or a local index's ``(pk, ...)``."""
        if_not_exists = self._parse_if_not_exists()
        name = None
        if not self._is_word("on"):
            name = self._parse_identifier()
        self._expect_word("on")
        table = self._parse_qualified_name()
        self._expect(TokenType.LPAREN)
        targets = [self._parse_index_target()]
        while self._match(TokenType.COMMA):
            targets.append(self._parse_index_target())
        self._expect(TokenType.RPAREN)
        custom_class = None
        if self._match_word("using"):
            custom_class = self._expect(TokenType.STRING).value
            if self._match_word("with"):
                self._expect_word("options")
                self._expect(TokenType.EQ)
                self._parse_term()  # the custom index's options map
        elif custom:
            raise self._mismatch("K_USING")
        return CreateIndex(table, tuple(targets), name, if_not_exists, custom_class)

    def _parse_index_target(self) -> IndexTarget:
        if self._at(TokenType.LPAREN):
            return IndexTarget(columns=self._parse_identifier_list())
        if self._is_word(*_TARGET_FUNCTIONS) and self._at(TokenType.LPAREN, 1):
            kind = self._advance().value
            self._expect(TokenType.LPAREN)
            column = self._parse_identifier()
            self._expect(TokenType.RPAREN)
            return IndexTarget(column, kind)  # type: ignore[arg-type]
        return IndexTarget(self._parse_identifier())

    def _parse_drop_index(self) -> DropIndex:
        """``DROP INDEX [IF EXISTS] [ks.]name`` (DROP INDEX consumed)."""
        if_exists = self._parse_if_exists()
        return DropIndex(self._parse_qualified_name(), if_exists)

    # -- materialized views ------------------------------------------------------------------

    def _parse_create_materialized_view(self) -> CreateMaterializedView:
        """``CREATE MATERIALIZED VIEW [IF NOT EXISTS] v AS SELECT ... FROM base ...`` (CREATE
        MATERIALIZED consumed): the view's and the base table's names."""
        self._expect_word("view")
        if_not_exists = self._parse_if_not_exists()
        name = self._parse_qualified_name()
        self._expect_word("as")
        self._expect_word("select")
        while not self._is_word("from"):
            if self._at_end():
                raise self._mismatch("K_FROM")
            self._advance()
        self._advance()
        base = self._parse_qualified_name()
        while not self._at_end() and not self._at(TokenType.SEMICOLON):
            self._advance()  # WHERE ... PRIMARY KEY (...) WITH ...: not kept
        return CreateMaterializedView(name, base, if_not_exists)

    def _parse_alter_materialized_view(self) -> AlterMaterializedView:
        """``ALTER MATERIALIZED VIEW v WITH ...`` (ALTER MATERIALIZED consumed)."""
        self._expect_word("view")
        name = self._parse_qualified_name()
        self._expect_word("with")
        self._parse_options()
        return AlterMaterializedView(name)

    def _parse_drop_materialized_view(self) -> DropMaterializedView:
        """``DROP MATERIALIZED VIEW [IF EXISTS] v`` (DROP MATERIALIZED consumed)."""
        self._expect_word("view")
        if_exists = self._parse_if_exists()
        return DropMaterializedView(self._parse_qualified_name(), if_exists)
