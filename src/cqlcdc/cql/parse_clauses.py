"""Grammar rules shared by DML and SELECT: WHERE relations, USING, IF conditions."""

from __future__ import annotations

from typing import ClassVar

from cqlcdc.cql.ast import (
    BindMarker,
    Condition,
    Relation,
    RelationOperator,
    Term,
    TupleLiteral,
    Using,
)
from cqlcdc.cql.parse_terms import TermsMixin
from cqlcdc.cql.tokens import TokenType


class ClausesMixin(TermsMixin):
    """``where_clause``, ``relation``, ``using_clause``, ``if_clause``, ``condition``."""

    COMPARISON_OPERATORS: ClassVar[dict[TokenType, RelationOperator]] = {
        TokenType.EQ: "=",
        TokenType.LT: "<",
        TokenType.LTE: "<=",
        TokenType.GT: ">",
        TokenType.GTE: ">=",
        TokenType.NEQ: "!=",
    }

    # -- WHERE -------------------------------------------------------------------------------

    def _parse_where(self) -> tuple[Relation, ...]:
        """``WHERE relation AND relation ...`` (the WHERE keyword already consumed)."""
        relations = [self._parse_relation()]
        while self._match_word("and"):
            relations.append(self._parse_relation())
        return tuple(relations)

    def _parse_relation(self) -> Relation:
        if self._is_word("token") and self._at(TokenType.LPAREN, 1):
            self._advance()
            columns = self._parse_identifier_list()
            operator = self._parse_comparison_operator()
            return Relation(columns, operator, self._parse_term(), token=True)
        if self._at(TokenType.LPAREN):
            columns = self._parse_identifier_list()
            operator = self._parse_relation_operator(allow_contains=False)
            return Relation(columns, operator, self._parse_relation_value(operator))
        column = self._parse_identifier()
        key = None
        if self._match(TokenType.LBRACKET):
            key = self._parse_term()
            self._expect(TokenType.RBRACKET)
        operator = self._parse_relation_operator(allow_contains=key is None)
        return Relation((column,), operator, self._parse_relation_value(operator), key=key)

    def _parse_comparison_operator(self) -> RelationOperator:
        operator = self.COMPARISON_OPERATORS.get(self._curr.type)
        if operator is None:
            raise self._no_viable()
        self._advance()
        return operator

    def _parse_relation_operator(self, allow_contains: bool = True) -> RelationOperator:
        if self._match_word("in"):
            return "IN"
        if allow_contains and self._match_word("contains"):
            return "CONTAINS KEY" if self._match_word("key") else "CONTAINS"
        return self._parse_comparison_operator()

    def _parse_relation_value(self, operator: RelationOperator) -> Term:
        if operator == "IN":
            return self._parse_in_values()
        return self._parse_term()

    def _parse_in_values(self) -> TupleLiteral | BindMarker:
        """``(t1, t2, ...)`` (possibly empty) or a bind marker standing for the whole list."""
        if self._curr.type in (TokenType.QMARK, TokenType.COLON):
            return self._parse_bind_marker()
        self._expect(TokenType.LPAREN)
        return TupleLiteral(self._parse_terms(TokenType.RPAREN))

    # -- USING -------------------------------------------------------------------------------

    def _parse_using(self, timestamp_only: bool = False) -> Using:
        """``USING TIMESTAMP t [AND TTL s]`` in either order; nothing if no USING follows."""
        if not self._match_word("using"):
            return Using()
        timestamp: Term | None = None
        ttl: Term | None = None
        while True:
            token = self._curr
            if timestamp is None and self._match_word("timestamp"):
                timestamp = self._parse_term()
            elif not timestamp_only and ttl is None and self._match_word("ttl"):
                ttl = self._parse_term()
            else:
                raise self._mismatch("K_TIMESTAMP" if timestamp is None else "K_TTL", token)
            if not self._match_word("and"):
                return Using(timestamp, ttl)

    # -- IF ----------------------------------------------------------------------------------

    def _parse_update_conditions(self) -> tuple[bool, tuple[Condition, ...]]:
        """``IF EXISTS`` -> (True, ()); ``IF c = v AND ...`` -> (False, conditions)."""
        if not self._match_word("if"):
            return False, ()
        if self._match_word("exists"):
            return True, ()
        conditions = [self._parse_condition()]
        while self._match_word("and"):
            conditions.append(self._parse_condition())
        return False, tuple(conditions)

    def _parse_condition(self) -> Condition:
        column = self._parse_identifier()
        key: Term | None = None
        field: str | None = None
        if self._match(TokenType.LBRACKET):
            key = self._parse_term()
            self._expect(TokenType.RBRACKET)
        elif self._match(TokenType.DOT):
            field = self._parse_identifier()
        operator = self._parse_relation_operator()
        value = self._parse_relation_value(operator)
        return Condition(column, operator, value, key=key, field=field)
