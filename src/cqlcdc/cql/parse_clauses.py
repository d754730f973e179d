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
            return Relation(columns, operator, self._parse_relation_value(operator), multi=True)
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
        if allow_contains and self._match_word("like"):
            return "LIKE"
        if self._match_words("is", "not"):
            return "IS NOT"  # only ``IS NOT NULL``: its value is the null constant
        if self._match_words("not", "in"):
            return "NOT IN"
        if allow_contains and self._match_word("contains"):
            return "CONTAINS KEY" if self._match_word("key") else "CONTAINS"
        return self._parse_comparison_operator()

    def _parse_relation_value(self, operator: RelationOperator) -> Term:
        if operator in ("IN", "NOT IN"):
            return self._parse_in_values()
        return self._parse_term()

    def _parse_in_values(self) -> TupleLiteral | BindMarker:
        """``(t1, t2, ...)`` (possibly empty) or a bind marker standing for the whole list."""
        if self._curr.type in (TokenType.QMARK, TokenType.COLON):
            return self._parse_bind_marker()
        self._expect(TokenType.LPAREN)
        return TupleLiteral(self._parse_terms(TokenType.RPAREN))

    # -- USING -------------------------------------------------------------------------------

    # which USING objectives each statement takes (ScyllaDB's Cql.g: usingClause,
    # usingTimestampTimeoutClause, usingTimeoutClause)
    USING_OBJECTIVES: ClassVar[dict[str, tuple[str, ...]]] = {
        "write": ("timestamp", "ttl", "timeout"),
        "delete": ("timestamp", "timeout"),
        "select": ("timeout",),
    }

    def _parse_using(self, kind: str = "write") -> Using:
        """``USING TIMESTAMP t AND TTL s AND TIMEOUT d`` in any order, each at most once, as
        far as the statement ``kind`` takes them; nothing if no USING follows."""
        if not self._match_word("using"):
            return Using()
        allowed = self.USING_OBJECTIVES[kind]
        values: dict[str, Term] = {}
        while True:
            token = self._curr
            word = token.value if token.type is TokenType.WORD else ""
            if word not in allowed or word in values:
                expected = next((w for w in allowed if w not in values), allowed[-1])
                raise self._mismatch(f"K_{expected.upper()}", token)
            self._advance()
            values[word] = self._parse_term()
            if not self._match_word("and"):
                return Using(values.get("timestamp"), values.get("ttl"), values.get("timeout"))

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
