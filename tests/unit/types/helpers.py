"""Test helpers: a tiny CQL *literal* parser (text -> ast.Term) and a fixed TermContext.

The real statement parser lives in ``cqlcdc.cql``; these tests must not depend on it, so
this reads just the literal forms ``to_literal`` writes (and a few more for the tables).
"""

from __future__ import annotations

import re
import uuid

from cqlcdc.cql import ast

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<qident>"(?:[^"]|"")*")
  | (?P<hex>0[xX][0-9a-fA-F]*)
  | (?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})
  | (?P<duration>-?(?:\d+(?:mo|ms|us|µs|ns|y|w|d|h|m|s))+(?![\w.])
      | -?P[0-9YMDTHWS:-]*(?![\w.]))
  | (?P<float>-?\d+\.\d*(?:[eE][+-]?\d+)?|-?\d+[eE][+-]?\d+|-?Infinity|NaN)
  | (?P<integer>-?\d+)
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[\[\]{}(),:])
    """,
    re.VERBOSE | re.IGNORECASE,
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"cannot tokenize {text[pos:]!r}")
        kind = match.lastgroup
        assert kind is not None
        if kind != "ws":
            out.append((kind, match.group()))
        pos = match.end()
    return out


class _Reader:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self, offset: int = 0) -> tuple[str, str]:
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else ("eof", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if value is not None and token[1] != value:
            raise ValueError(f"expected {value!r}, got {token!r}")
        self.pos += 1
        return token

    def term(self) -> ast.Term:
        kind, text = self.peek()
        if kind == "punct":
            if text == "[":
                return ast.ListLiteral(self._items("[", "]"))
            if text == "(":
                items = self._items("(", ")")
                return items[0] if len(items) == 1 else ast.TupleLiteral(items)
            if text == "{":
                return self._braces()
            raise ValueError(f"unexpected {text!r}")
        self.take()
        if kind == "string":
            return ast.Constant("string", text[1:-1].replace("''", "'"))
        if kind == "hex":
            return ast.Constant("hex", text.lower())
        if kind == "uuid":
            return ast.Constant("uuid", text.lower())
        if kind in ("duration", "float", "integer"):
            return ast.Constant(kind, text)  # type: ignore[arg-type]
        lowered = text.lower()
        if lowered in ("true", "false"):
            return ast.Constant("boolean", lowered)
        if lowered == "null":
            return ast.Constant("null", "null")
        if self.peek()[1] == "(":
            self.pos -= 1
            name = self.take()[1].lower()
            return ast.FunctionCall(name, self._items("(", ")"))
        raise ValueError(f"unexpected word {text!r}")

    def _items(self, open_: str, close: str) -> tuple[ast.Term, ...]:
        self.take(open_)
        items: list[ast.Term] = []
        while self.peek()[1] != close:
            items.append(self.term())
            if self.peek()[1] == ",":
                self.take()
        self.take(close)
        return tuple(items)

    def _braces(self) -> ast.Term:
        self.take("{")
        if self.peek()[1] == "}":
            self.take()
            return ast.MapLiteral(())
        keyword = self.peek()[1].lower() in ("true", "false", "null", "nan", "infinity")
        if self.peek()[0] in ("word", "qident") and self.peek(1)[1] == ":" and not keyword:
            return self._udt()
        first = self.term()
        if self.peek()[1] == ":":
            entries: list[tuple[ast.Term, ast.Term]] = []
            key = first
            while True:
                self.take(":")
                entries.append((key, self.term()))
                if self.peek()[1] == "}":
                    break
                self.take(",")
                key = self.term()
            self.take("}")
            return ast.MapLiteral(tuple(entries))
        items = [first]
        while self.peek()[1] == ",":
            self.take()
            items.append(self.term())
        self.take("}")
        return ast.SetLiteral(tuple(items))

    def _udt(self) -> ast.Term:
        fields: list[tuple[str, ast.Term]] = []
        while True:
            kind, text = self.take()
            name = text[1:-1].replace('""', '"') if kind == "qident" else text.lower()
            self.take(":")
            fields.append((name, self.term()))
            if self.peek()[1] == "}":
                break
            self.take(",")
        self.take("}")
        return ast.UdtLiteral(tuple(fields))


def literal_term(text: str) -> ast.Term:
    """Parse one CQL literal into the AST node the real parser would give."""
    reader = _Reader(text)
    term = reader.term()
    if reader.peek()[0] != "eof":
        raise ValueError(f"trailing input in {text!r}")
    return term


class FixedContext:
    """A TermContext with a fixed clock and deterministic ids."""

    def __init__(self, now_us: int = 1_606_390_225_588_123) -> None:
        self._now_us = now_us
        self.counter = 0

    @property
    def now_us(self) -> int:
        return self._now_us

    def new_timeuuid(self) -> uuid.UUID:
        from cqlcdc.types.temporal import UUID_EPOCH_OFFSET

        self.counter += 1
        ticks = self._now_us * 10 + UUID_EPOCH_OFFSET
        time_low = ticks & 0xFFFFFFFF
        time_mid = (ticks >> 32) & 0xFFFF
        time_hi = ((ticks >> 48) & 0x0FFF) | 0x1000
        msb = (time_low << 32) | (time_mid << 16) | time_hi
        return uuid.UUID(int=(msb << 64) | (0x8000000000000000 + self.counter))

    def new_uuid(self) -> uuid.UUID:
        self.counter += 1
        return uuid.UUID(int=(0x4000 << 64) | (0x8000000000000000 + self.counter))
