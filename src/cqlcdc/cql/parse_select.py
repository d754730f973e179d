"""Grammar rules for SELECT: selectors, WHERE, GROUP BY, ORDER BY, PER PARTITION LIMIT, LIMIT,
ALLOW FILTERING and ScyllaDB's BYPASS CACHE and USING TIMEOUT."""

from __future__ import annotations

from cqlcdc.cql.ast import (
    ColumnRef,
    ElementSelection,
    FieldSelection,
    FunctionCall,
    Ordering,
    Select,
    Selector,
    Term,
)
from cqlcdc.cql.parse_clauses import ClausesMixin
from cqlcdc.cql.tokens import TokenType


class SelectMixin(ClausesMixin):
    """``select_statement``, ``selector``, ``ordering``."""

    def _parse_select(self) -> Select:
        self._expect_word("select")
        json = self._match_select_modifier("json")
        distinct = self._match_select_modifier("distinct")
        selectors: tuple[Selector, ...] = ()
        if not self._match(TokenType.STAR):
            items = [self._parse_selector()]
            while self._match(TokenType.COMMA):
                items.append(self._parse_selector())
            selectors = tuple(items)
        self._expect_word("from")
        table = self._parse_qualified_name()
        where = self._parse_where() if self._match_word("where") else ()
        group_by: tuple[str, ...] = ()
        if self._match_words("group", "by"):
            names = [self._parse_identifier()]
            while self._match(TokenType.COMMA):
                names.append(self._parse_identifier())
            group_by = tuple(names)
        order_by: tuple[Ordering, ...] = ()
        if self._match_words("order", "by"):
            orderings = [self._parse_ordering()]
            while self._match(TokenType.COMMA):
                orderings.append(self._parse_ordering())
            order_by = tuple(orderings)
        per_partition_limit: Term | None = None
        if self._match_words("per", "partition", "limit"):
            per_partition_limit = self._parse_term()
        limit: Term | None = None
        if self._match_word("limit"):
            limit = self._parse_term()
        allow_filtering = False
        if self._match_word("allow"):
            self._expect_word("filtering")
            allow_filtering = True
        bypass_cache = self._match_words("bypass", "cache")
        using = self._parse_using("select")
        return Select(
            table,
            selectors,
            where,
            order_by,
            limit,
            per_partition_limit,
            allow_filtering,
            distinct,
            json,
            group_by,
            bypass_cache,
            using,
        )

    def _match_select_modifier(self, word: str) -> bool:
        """``JSON`` / ``DISTINCT`` are keywords here unless they name a column (``SELECT json
        FROM t``, ``SELECT distinct, v FROM t``, ``SELECT json AS j FROM t``)."""
        if not self._is_word(word):
            return False
        following = self._peek(1)
        if following.type in (TokenType.COMMA, TokenType.LPAREN, TokenType.EOF) or (
            following.type is TokenType.WORD and following.value in ("from", "as")
        ):
            return False
        self._advance()
        return True

    def _parse_selector(self) -> Selector:
        expr: ColumnRef | FunctionCall | FieldSelection | ElementSelection
        if self._at_qualified_call() or (
            self._at(TokenType.LPAREN, 1)
            and self._curr.type in (TokenType.WORD, TokenType.QUOTED_NAME)
        ):
            expr = self._parse_selector_call()
        else:
            expr = self._parse_selectable(self._parse_identifier())
        alias = self._parse_identifier() if self._match_word("as") else None
        return Selector(expr, alias)

    def _parse_ordering(self) -> Ordering:
        column = self._parse_identifier()
        if self._match_word("desc"):
            return Ordering(column, descending=True)
        self._match_word("asc")
        return Ordering(column)
