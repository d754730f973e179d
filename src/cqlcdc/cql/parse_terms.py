"""Grammar rules for terms (constants, collection literals, function calls, casts, bind
markers) and for types as written in DDL (``map<int, text>``, ``frozen<ks.ut>``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from cqlcdc.cql.ast import (
    BindMarker,
    ColumnRef,
    Constant,
    ElementSelection,
    FieldSelection,
    FunctionCall,
    ListLiteral,
    MapLiteral,
    SetLiteral,
    Term,
    TupleLiteral,
    TypeCast,
    TypeRef,
    UdtLiteral,
)
from cqlcdc.cql.parse_base import ParserBase
from cqlcdc.cql.tokens import TokenType

_CONSTANT_WORDS: dict[str, Constant] = {
    "true": Constant("boolean", "true"),
    "false": Constant("boolean", "false"),
    "null": Constant("null", "null"),
    "nan": Constant("float", "NaN"),
    "infinity": Constant("float", "Infinity"),
}


class TermsMixin(ParserBase):
    """``term``, ``function_call``, ``collection_literal``, ``type_cast``, ``cql_type``."""

    NATIVE_TYPES: ClassVar[frozenset[str]] = frozenset(
        {
            "ascii", "bigint", "blob", "boolean", "counter", "date", "decimal", "double",
            "duration", "float", "inet", "int", "smallint", "text", "time", "timestamp",
            "timeuuid", "tinyint", "uuid", "varchar", "varint",
        }
    )  # fmt: skip

    # Parameterised types and how many type parameters each takes (None: one or more).
    PARAMETERISED_TYPES: ClassVar[dict[str, int | None]] = {
        "list": 1,
        "set": 1,
        "frozen": 1,
        "map": 2,
        "tuple": None,
    }

    TERM_PARSERS: ClassVar[dict[TokenType, Callable[[TermsMixin], Term]]] = {
        TokenType.STRING: lambda self: Constant("string", self._advance().value),
        TokenType.INTEGER: lambda self: Constant("integer", self._advance().text),
        TokenType.FLOAT: lambda self: Constant("float", self._advance().text),
        TokenType.UUID: lambda self: Constant("uuid", self._advance().value),
        TokenType.HEX: lambda self: Constant("hex", self._advance().value),
        TokenType.DURATION: lambda self: Constant("duration", self._advance().text),
        TokenType.MINUS: lambda self: self._parse_negative(),
        TokenType.WORD: lambda self: self._parse_word_term(),
        TokenType.QUOTED_NAME: lambda self: self._parse_function_call(),
        TokenType.QMARK: lambda self: self._parse_bind_marker(),
        TokenType.COLON: lambda self: self._parse_bind_marker(),
        TokenType.LBRACKET: lambda self: self._parse_list_literal(),
        TokenType.LBRACE: lambda self: self._parse_brace_literal(),
        TokenType.LPAREN: lambda self: self._parse_paren_term(),
    }

    # -- terms -------------------------------------------------------------------------------

    def _parse_term(self) -> Term:
        parser = self.TERM_PARSERS.get(self._curr.type)
        if parser is None:
            raise self._no_viable()
        self._enter()
        term = parser(self)
        self._leave()
        return term

    def _parse_terms(self, close: TokenType) -> tuple[Term, ...]:
        """Comma-separated terms up to (and consuming) ``close``; possibly none."""
        items: list[Term] = []
        if not self._match(close):
            items.append(self._parse_term())
            while self._match(TokenType.COMMA):
                items.append(self._parse_term())
            self._expect(close)
        return tuple(items)

    def _parse_negative(self) -> Constant:
        """``-`` then a number, a duration or Infinity (the sign is kept in the text)."""
        self._expect(TokenType.MINUS)
        token = self._curr
        if token.type is TokenType.INTEGER:
            constant = Constant("integer", f"-{token.text}")
        elif token.type is TokenType.FLOAT:
            constant = Constant("float", f"-{token.text}")
        elif token.type is TokenType.DURATION:
            constant = Constant("duration", f"-{token.text}")
        elif token.type is TokenType.WORD and token.value == "infinity":
            constant = Constant("float", "-Infinity")
        else:
            raise self._no_viable(token)
        self._advance()
        return constant

    def _parse_word_term(self) -> Term:
        token = self._curr
        constant = _CONSTANT_WORDS.get(token.value)
        if constant is not None:
            self._advance()
            return constant
        if (
            self._at(TokenType.LPAREN, 1)
            and (token.value not in self.RESERVED or token.value == "token")
        ) or self._at_qualified_call():
            return self._parse_function_call()
        raise self._no_viable(token)

    def _at_qualified_call(self) -> bool:
        """At ``keyspace.function(``, e.g. ``system.intasblob(v)``."""
        return (
            self._curr.type in (TokenType.WORD, TokenType.QUOTED_NAME)
            and self._at(TokenType.DOT, 1)
            and self._peek(2).type in (TokenType.WORD, TokenType.QUOTED_NAME)
            and self._at(TokenType.LPAREN, 3)
        )

    def _parse_function_name(self) -> str:
        """A function's name; ``system.name`` is the native function ``name``, another
        keyspace stays in the name (no such function exists: an unknown function)."""
        token = self._curr
        if self._at_qualified_call():
            self._advance()
            self._advance()
            name = self._parse_function_name()
            return name if token.value.lower() == "system" else f"{token.value}.{name}"
        if token.type is TokenType.QUOTED_NAME or (
            token.type is TokenType.WORD
            and (token.value not in self.RESERVED or token.value == "token")
        ):
            self._advance()
            return token.value
        raise self._no_viable(token)

    def _parse_function_call(self) -> FunctionCall:
        """``name(term, ...)``: now(), Interval('PT1H'), SCYLLA_TIMEUUID_LIST_INDEX(u)."""
        name = self._parse_function_name()
        self._expect(TokenType.LPAREN)
        return FunctionCall(name, self._parse_terms(TokenType.RPAREN))

    def _parse_bind_marker(self) -> BindMarker:
        name = None
        if not self._match(TokenType.QMARK):
            self._expect(TokenType.COLON)
            name = self._parse_identifier()
        if name is not None and name in self._named_markers:
            return BindMarker(name, self._named_markers[name])
        marker = BindMarker(name, self._markers)
        if name is not None:
            self._named_markers[name] = self._markers
        self._markers += 1
        return marker

    def _parse_list_literal(self) -> ListLiteral:
        self._expect(TokenType.LBRACKET)
        return ListLiteral(self._parse_terms(TokenType.RBRACKET))

    def _parse_brace_literal(self) -> MapLiteral | SetLiteral | UdtLiteral:
        """``{}`` (empty map), ``{k: v}``, ``{a, b}`` or, with identifier keys, ``{f: v}``."""
        self._expect(TokenType.LBRACE)
        if self._match(TokenType.RBRACE):
            return MapLiteral(())
        if self._at(TokenType.COLON, 1) and self._is_field_name():
            return self._parse_udt_literal()
        first = self._parse_term()
        if self._match(TokenType.COLON):
            entries = [(first, self._parse_term())]
            while self._match(TokenType.COMMA):
                key = self._parse_term()
                self._expect(TokenType.COLON)
                entries.append((key, self._parse_term()))
            self._expect(TokenType.RBRACE)
            return MapLiteral(tuple(entries))
        items = [first]
        while self._match(TokenType.COMMA):
            items.append(self._parse_term())
        self._expect(TokenType.RBRACE)
        return SetLiteral(tuple(items))

    def _is_field_name(self) -> bool:
        token = self._curr
        return self._is_identifier() and not (
            token.type is TokenType.WORD and token.value in self.CONSTANT_WORDS
        )

    def _parse_udt_literal(self) -> UdtLiteral:
        fields: list[tuple[str, Term]] = []
        while True:
            name = self._parse_identifier()
            self._expect(TokenType.COLON)
            fields.append((name, self._parse_term()))
            if not self._match(TokenType.COMMA):
                break
        self._expect(TokenType.RBRACE)
        return UdtLiteral(tuple(fields))

    def _parse_paren_term(self) -> TypeCast | TupleLiteral:
        """``(type) term`` or ``(a, b, ...)``."""
        first = self._peek(1)
        if (
            first.type is TokenType.QUOTED_NAME
            or (first.type is TokenType.WORD and first.value not in self.CONSTANT_WORDS)
        ) and self._peek(2).type in (TokenType.RPAREN, TokenType.LT, TokenType.DOT):
            self._advance()
            cast_type = self._parse_type()
            self._expect(TokenType.RPAREN)
            return TypeCast(cast_type, self._parse_term())
        self._expect(TokenType.LPAREN)
        items = [self._parse_term()]
        while self._match(TokenType.COMMA):
            items.append(self._parse_term())
        self._expect(TokenType.RPAREN)
        return TupleLiteral(tuple(items))

    def _parse_column_or_term(self) -> Term | ColumnRef | FieldSelection | ElementSelection:
        """A selector argument: ``*``, a column (or a field or an element of one), a nested
        function call, or a term."""
        if self._match(TokenType.STAR):
            return ColumnRef("*")
        if self._at_qualified_call() or (
            self._at(TokenType.LPAREN, 1)
            and self._curr.type in (TokenType.WORD, TokenType.QUOTED_NAME)
        ):
            return self._parse_selector_call()
        if self._is_field_name():
            return self._parse_selectable(self._parse_identifier())
        return self._parse_term()

    def _parse_selectable(self, name: str) -> ColumnRef | FieldSelection | ElementSelection:
        """What follows a column name in a selector: ``.f`` (``.f.g`` into nested UDTs),
        ``[k]``, or nothing."""
        if self._match(TokenType.DOT):  # u.f, b.x.a
            path = [self._parse_identifier()]
            while self._match(TokenType.DOT):
                path.append(self._parse_identifier())
            return FieldSelection(name, path[0], tuple(path[1:]))
        if self._match(TokenType.LBRACKET):  # m[k]
            key = self._parse_term()
            self._expect(TokenType.RBRACKET)
            return ElementSelection(name, key)
        return ColumnRef(name)

    def _parse_selector_call(self) -> FunctionCall:
        """``f(args)`` in a SELECT list: args may be columns (``writetime(v)``, ``count(*)``)."""
        self._enter()
        name = self._parse_function_name()
        self._expect(TokenType.LPAREN)
        args: list[Term | ColumnRef | FieldSelection | ElementSelection] = []
        if not self._match(TokenType.RPAREN):
            args.append(self._parse_column_or_term())
            while self._match(TokenType.COMMA):
                args.append(self._parse_column_or_term())
            self._expect(TokenType.RPAREN)
        self._leave()
        return FunctionCall(name, tuple(args))

    # -- types -------------------------------------------------------------------------------

    def _parse_type(self) -> TypeRef:
        self._enter()
        parsed = self._parse_type_inner()
        self._leave()
        return parsed

    def _parse_type_inner(self) -> TypeRef:
        token = self._curr
        if token.type is TokenType.WORD:
            name = token.value
            if name in self.NATIVE_TYPES:
                self._advance()
                return TypeRef(name)
            if name in self.PARAMETERISED_TYPES and self._at(TokenType.LT, 1):
                return self._parse_parameterised_type(name)
            if name == "vector" and self._at(TokenType.LT, 1):
                self._advance()
                self._expect(TokenType.LT)
                element = self._parse_type()
                self._expect(TokenType.COMMA)
                size = self._expect(TokenType.INTEGER)
                self._expect(TokenType.GT)
                return TypeRef("vector", (element,), size=int(size.text))
        if not self._is_identifier():
            raise self._no_viable(token)
        udt = self._parse_qualified_name()
        return TypeRef(udt.name, keyspace=udt.keyspace)

    def _parse_parameterised_type(self, name: str) -> TypeRef:
        arity = self.PARAMETERISED_TYPES[name]
        self._advance()
        self._expect(TokenType.LT)
        params = [self._parse_type()]
        while (arity is None or len(params) < arity) and self._match(TokenType.COMMA):
            params.append(self._parse_type())
        if arity is not None and len(params) < arity:
            raise self._mismatch(TokenType.COMMA.value)
        self._expect(TokenType.GT)
        return TypeRef(name, tuple(params))
