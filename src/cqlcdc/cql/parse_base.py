"""The parser's cursor over tokens: matching, expecting, identifiers and ANTLR-style errors."""

from __future__ import annotations

from typing import ClassVar

from cqlcdc.cql.ast import QualifiedName
from cqlcdc.cql.tokens import Token, Tokenizer, TokenType
from cqlcdc.errors import CqlSyntaxError

_NAME_TYPES = (TokenType.WORD, TokenType.QUOTED_NAME)


class ParserBase:
    """Token cursor shared by every grammar mixin.

    ``tokens`` must end with an EOF token (``Tokenizer.tokenize`` guarantees it).
    """

    RESERVED: ClassVar[frozenset[str]] = Tokenizer.RESERVED_KEYWORDS
    CONSTANT_WORDS: ClassVar[frozenset[str]] = Tokenizer.CONSTANT_WORDS
    # Nesting deeper than this (collections, casts, types) is refused rather than recursed.
    MAX_DEPTH: ClassVar[int] = 64

    def __init__(self, tokens: list[Token]) -> None:
        self._tokens = tokens
        self._last = len(tokens) - 1
        self._pos = 0
        self._markers = 0
        # a name used twice is one variable (ScyllaDB's default dialect,
        # duplicate_bind_variable_names_refer_to_same_variable)
        self._named_markers: dict[str, int] = {}
        self._depth = 0

    # -- cursor ------------------------------------------------------------------------------

    @property
    def _curr(self) -> Token:
        return self._tokens[self._pos]

    def _peek(self, offset: int = 1) -> Token:
        index = self._pos + offset
        return self._tokens[index if index < self._last else self._last]

    def _advance(self) -> Token:
        token = self._tokens[self._pos]
        if self._pos < self._last:
            self._pos += 1
        return token

    def _at(self, kind: TokenType, offset: int = 0) -> bool:
        return self._peek(offset).type is kind

    def _is_word(self, *words: str, offset: int = 0) -> bool:
        token = self._peek(offset) if offset else self._tokens[self._pos]
        return token.type is TokenType.WORD and token.value in words

    def _match(self, kind: TokenType) -> Token | None:
        token = self._tokens[self._pos]
        if token.type is kind:
            if self._pos < self._last:
                self._pos += 1
            return token
        return None

    def _match_word(self, word: str) -> bool:
        if self._is_word(word):
            self._advance()
            return True
        return False

    def _match_words(self, *words: str) -> bool:
        """Consume ``words`` if they all come next, in order; otherwise consume nothing."""
        for offset, word in enumerate(words):
            if not self._is_word(word, offset=offset):
                return False
        for _ in words:
            self._advance()
        return True

    def _expect(self, kind: TokenType) -> Token:
        if self._curr.type is kind:
            return self._advance()
        raise self._mismatch(kind.value)

    def _expect_word(self, *words: str) -> Token:
        """Consume one of the keywords ``words`` (the first is named in the error)."""
        if self._is_word(*words):
            return self._advance()
        raise self._mismatch(f"K_{words[0].upper()}")

    def _expect_words(self, *words: str) -> None:
        for word in words:
            self._expect_word(word)

    def _at_end(self) -> bool:
        return self._curr.type is TokenType.EOF

    # -- errors ------------------------------------------------------------------------------

    def _error(self, message: str, token: Token | None = None) -> CqlSyntaxError:
        token = token or self._curr
        return CqlSyntaxError(message, token.line, token.column)

    def _mismatch(self, expecting: str, token: Token | None = None) -> CqlSyntaxError:
        token = token or self._curr
        return self._error(f"mismatched input '{token.text}' expecting {expecting}", token)

    def _no_viable(self, token: Token | None = None) -> CqlSyntaxError:
        token = token or self._curr
        return self._error(f"no viable alternative at input '{token.text}'", token)

    # -- names -------------------------------------------------------------------------------

    def _is_identifier(self, offset: int = 0) -> bool:
        """True if the token at ``offset`` can be a (column, table, field...) name."""
        token = self._peek(offset)
        if token.type is TokenType.QUOTED_NAME:
            return True
        return token.type is TokenType.WORD and token.value not in self.RESERVED

    def _parse_identifier(self) -> str:
        """An unquoted name (lower-cased) or a quoted one (case kept)."""
        token = self._curr
        if token.type is TokenType.QUOTED_NAME or (
            token.type is TokenType.WORD and token.value not in self.RESERVED
        ):
            self._advance()
            return token.value
        if token.type is TokenType.WORD:
            raise self._no_viable(token)
        raise self._mismatch("IDENT", token)

    def _parse_identifier_list(self) -> tuple[str, ...]:
        """``(a, b, ...)``: at least one name."""
        self._expect(TokenType.LPAREN)
        names = [self._parse_identifier()]
        while self._match(TokenType.COMMA):
            names.append(self._parse_identifier())
        self._expect(TokenType.RPAREN)
        return tuple(names)

    def _parse_qualified_name(self) -> QualifiedName:
        """``ks.name`` or ``name``."""
        first = self._parse_identifier()
        if self._match(TokenType.DOT):
            return QualifiedName(first, self._parse_identifier())
        return QualifiedName(None, first)

    def _parse_if_not_exists(self) -> bool:
        if self._match_word("if"):
            self._expect_words("not", "exists")
            return True
        return False

    def _parse_if_exists(self) -> bool:
        if self._match_word("if"):
            self._expect_word("exists")
            return True
        return False

    def _enter(self) -> None:
        """Count one level of nesting; refuse input nested beyond ``MAX_DEPTH``.

        No ``try``/``finally`` pairs it with ``_leave``: a syntax error ends the parse.
        """
        self._depth += 1
        if self._depth > self.MAX_DEPTH:
            raise self._error(f"input nested deeper than {self.MAX_DEPTH} levels")

    def _leave(self) -> None:
        self._depth -= 1
