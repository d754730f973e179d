"""Grammar rules for data modification: INSERT, UPDATE (every SET form), DELETE, BATCH."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, Literal

from cqlcdc.cql.ast import (
    AddTo,
    Assignment,
    Batch,
    Delete,
    DeleteTarget,
    Insert,
    ModificationStatement,
    Prepend,
    RemoveFrom,
    SetColumn,
    SetElement,
    SetField,
    Term,
    Update,
)
from cqlcdc.cql.parse_clauses import ClausesMixin
from cqlcdc.cql.tokens import TokenType


class DmlMixin(ClausesMixin):
    """``insert_statement``, ``update_statement``, ``delete_statement``, ``batch_statement``."""

    BATCH_STATEMENT_PARSERS: ClassVar[dict[str, Callable[[DmlMixin], ModificationStatement]]] = {
        "insert": lambda self: self._parse_insert(),
        "update": lambda self: self._parse_update(),
        "delete": lambda self: self._parse_delete(),
    }

    BATCH_KINDS: ClassVar[dict[str, Literal["UNLOGGED", "COUNTER"]]] = {
        "unlogged": "UNLOGGED",
        "counter": "COUNTER",
    }

    # -- INSERT ------------------------------------------------------------------------------

    def _parse_insert(self) -> Insert:
        """``INSERT INTO t (c, ...) VALUES (v, ...) [IF NOT EXISTS] [USING ...]`` or
        ``INSERT INTO t JSON 'j' [DEFAULT NULL | DEFAULT UNSET] [IF NOT EXISTS] [USING ...]``."""
        self._expect_words("insert", "into")
        table = self._parse_qualified_name()
        if self._match_word("json"):
            json = self._parse_json_value()
            default_unset = False
            if self._match_word("default"):
                # DEFAULT NULL (the default) nulls the columns the JSON leaves out
                default_unset = self._expect_word("unset", "null").value == "unset"
            if_not_exists = self._parse_if_not_exists()
            using = self._parse_using()
            return Insert(
                table, (), (), using, if_not_exists, json=json, json_default_unset=default_unset
            )
        columns = self._parse_identifier_list()
        self._expect_word("values")
        self._expect(TokenType.LPAREN)
        values = [self._parse_term()]
        while self._match(TokenType.COMMA):
            values.append(self._parse_term())
        self._expect(TokenType.RPAREN)
        if_not_exists = self._parse_if_not_exists()
        using = self._parse_using()
        return Insert(table, columns, tuple(values), using, if_not_exists)

    def _parse_json_value(self) -> Term:
        """``jsonValue``: a string literal or a bind marker (ScyllaDB's grammar takes no other
        term)."""
        if self._curr.type is TokenType.STRING:
            return self._parse_term()
        if self._curr.type in (TokenType.QMARK, TokenType.COLON):
            return self._parse_bind_marker()
        raise self._no_viable()

    # -- UPDATE ------------------------------------------------------------------------------

    def _parse_update(self) -> Update:
        """``UPDATE t [USING ...] SET a, ... WHERE r AND ... [IF EXISTS | IF c AND ...]``."""
        self._expect_word("update")
        table = self._parse_qualified_name()
        using = self._parse_using()
        self._expect_word("set")
        assignments = [self._parse_assignment()]
        while self._match(TokenType.COMMA):
            assignments.append(self._parse_assignment())
        self._expect_word("where")
        where = self._parse_where()
        if_exists, conditions = self._parse_update_conditions()
        return Update(table, tuple(assignments), where, using, if_exists, conditions)

    def _parse_assignment(self) -> Assignment:
        column = self._parse_identifier()
        if self._match(TokenType.LBRACKET):
            key = self._parse_term()
            self._expect(TokenType.RBRACKET)
            self._expect(TokenType.EQ)
            return SetElement(column, key, self._parse_term())
        if self._match(TokenType.DOT):
            field = self._parse_identifier()
            self._expect(TokenType.EQ)
            return SetField(column, field, self._parse_term())
        self._expect(TokenType.EQ)
        if self._is_field_name() and self._peek(1).type in (TokenType.PLUS, TokenType.MINUS):
            # x = x + v / x = x - v
            self._expect_same_column(column, "X = X <op> <value>")
            operator = self._advance()
            value = self._parse_term()
            if operator.type is TokenType.PLUS:
                return AddTo(column, value)
            return RemoveFrom(column, value)
        value = self._parse_term()
        if self._match(TokenType.PLUS):
            # l = [...] + l
            self._expect_same_column(column, "X = <value> + X")
            return Prepend(column, value)
        return SetColumn(column, value)

    def _expect_same_column(self, column: str, form: str) -> None:
        token = self._curr
        if self._parse_identifier() != column:
            raise self._error(f"Only expressions of the form {form} are supported.", token)

    # -- DELETE ------------------------------------------------------------------------------

    def _parse_delete(self) -> Delete:
        """``DELETE [x, m[k], u.f] FROM t [USING TIMESTAMP t AND TIMEOUT d] WHERE ... [IF ...]``."""
        self._expect_word("delete")
        targets: list[DeleteTarget] = []
        if not self._is_word("from"):
            targets.append(self._parse_delete_target())
            while self._match(TokenType.COMMA):
                targets.append(self._parse_delete_target())
        self._expect_word("from")
        table = self._parse_qualified_name()
        using = self._parse_using("delete")
        self._expect_word("where")
        where = self._parse_where()
        if_exists, conditions = self._parse_update_conditions()
        return Delete(table, tuple(targets), where, using, if_exists, conditions)

    def _parse_delete_target(self) -> DeleteTarget:
        column = self._parse_identifier()
        if self._match(TokenType.LBRACKET):
            key: Term = self._parse_term()
            self._expect(TokenType.RBRACKET)
            return DeleteTarget(column, key=key)
        if self._match(TokenType.DOT):
            return DeleteTarget(column, field=self._parse_identifier())
        return DeleteTarget(column)

    # -- BATCH -------------------------------------------------------------------------------

    def _parse_batch(self) -> Batch:
        """``BEGIN [UNLOGGED | COUNTER] BATCH [USING TIMESTAMP t] s; s; ... APPLY BATCH``."""
        self._expect_word("begin")
        kind: Literal["LOGGED", "UNLOGGED", "COUNTER"] = "LOGGED"
        batch_kind = self.BATCH_KINDS.get(self._curr.value)
        if self._curr.type is TokenType.WORD and batch_kind is not None:
            self._advance()
            kind = batch_kind
        self._expect_word("batch")
        using = self._parse_using()
        # the spec's examples write a stray ``;`` right after ``BEGIN UNLOGGED BATCH``
        while self._match(TokenType.SEMICOLON):
            pass
        statements: list[ModificationStatement] = []
        while not self._is_word("apply"):
            parser = self.BATCH_STATEMENT_PARSERS.get(self._curr.value)
            if self._curr.type is not TokenType.WORD or parser is None:
                raise self._mismatch("K_APPLY")
            statements.append(parser(self))
            while self._match(TokenType.SEMICOLON):
                pass
        self._expect_words("apply", "batch")
        return Batch(kind, tuple(statements), using)
