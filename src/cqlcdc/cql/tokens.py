"""The CQL tokenizer: one compiled regex, keyword tables at class level (like sqlglot's).

>>> [t.value for t in Tokenizer().tokenize("SELECT \\"cdc$time\\" FROM ks.t")][:-1]
['select', 'cdc$time', 'from', 'ks', '.', 't']
"""

from __future__ import annotations

import enum
import re
from typing import ClassVar, NamedTuple

from cqlcdc.errors import CqlSyntaxError


class TokenType(enum.Enum):
    WORD = "IDENT"  # unquoted identifier or keyword; value lower-cased
    QUOTED_NAME = "QUOTED_NAME"  # "Name"; value unescaped, case kept
    STRING = "STRING_LITERAL"  # '...' or $$...$$; value unescaped
    INTEGER = "INTEGER"
    FLOAT = "FLOAT"
    UUID = "UUID"
    HEX = "HEXNUMBER"
    DURATION = "DURATION"
    QMARK = "'?'"
    LPAREN = "'('"
    RPAREN = "')'"
    LBRACKET = "'['"
    RBRACKET = "']'"
    LBRACE = "'{'"
    RBRACE = "'}'"
    COMMA = "','"
    SEMICOLON = "';'"
    DOT = "'.'"
    COLON = "':'"
    STAR = "'*'"
    PLUS = "'+'"
    MINUS = "'-'"
    SLASH = "'/'"
    PERCENT = "'%'"
    EQ = "'='"
    NEQ = "'!='"
    LT = "'<'"
    LTE = "'<='"
    GT = "'>'"
    GTE = "'>='"
    EOF = "EOF"


class Token(NamedTuple):
    """One token: its type, its text as written, its normalised value, and where it starts.

    ``line`` and ``column`` are 1-based; ``start``/``end`` are offsets into the tokenized text.
    """

    type: TokenType
    text: str
    value: str
    line: int
    column: int
    start: int
    end: int


_IDENT_CHAR = r"(?![0-9A-Za-z_])"
_UNIT = r"(?:[mM][oO]|[mM][sS]|[uU][sS]|\u00b5[sS]|[nN][sS]|[yYwWdDhHmMsS])"
_ISO_DURATION = (
    r"P\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}"  # ISO 8601 alternative format
    r"|P\d+W"
    r"|P(?=\d|T\d)(?:\d+Y)?(?:\d+M)?(?:\d+D)?(?:T(?=\d)(?:\d+H)?(?:\d+M)?(?:\d+S)?)?"
)

# Order matters: a uuid beats an integer or an identifier, a duration beats an integer.
# Leading whitespace is consumed with each token; ``unknown`` and ``end`` make it always match.
_TOKEN_RE = re.compile(
    r"\s*(?:"
    + "|".join(
        [
            # fast path for the commonest token; words that may begin a uuid (followed by
            # '-') or an ISO duration (P1D, PT2H) fall through to the rules below
            r"(?P<word>(?!P\d|PT\d)[a-zA-Z][a-zA-Z0-9_]*+(?!-))",
            r"(?P<comment>(?:--|//)[^\n]*|/\*.*?\*/)",
            r"(?P<string>'(?:[^']|'')*')",
            r"(?P<dollar>\$\$.*?\$\$)",
            r"(?P<quoted>\"(?:[^\"]|\"\")+\")",
            r"(?P<uuid>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
            + _IDENT_CHAR
            + ")",
            r"(?P<hex>0[xX][0-9a-fA-F]*" + _IDENT_CHAR + ")",
            r"(?P<duration>(?:(?:\d+" + _UNIT + ")+|" + _ISO_DURATION + ")" + _IDENT_CHAR + ")",
            r"(?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)",
            r"(?P<integer>\d+)",
            r"(?P<word2>[a-zA-Z][a-zA-Z0-9_]*)",
            r"(?P<bad>'|\"|\$\$|/\*)",
            r"(?P<punct><=|>=|!=|[-+*/%=<>(){}\[\],;.:?])",
            r"(?P<unknown>.)",
            r"(?P<end>\Z)",
        ]
    )
    + ")",
    re.DOTALL | re.ASCII,
)


class Tokenizer:
    """Turns CQL text into tokens (whitespace and comments dropped, EOF token appended)."""

    PUNCTUATION: ClassVar[dict[str, TokenType]] = {
        "<=": TokenType.LTE,
        ">=": TokenType.GTE,
        "!=": TokenType.NEQ,
        "<": TokenType.LT,
        ">": TokenType.GT,
        "=": TokenType.EQ,
        "(": TokenType.LPAREN,
        ")": TokenType.RPAREN,
        "[": TokenType.LBRACKET,
        "]": TokenType.RBRACKET,
        "{": TokenType.LBRACE,
        "}": TokenType.RBRACE,
        ",": TokenType.COMMA,
        ";": TokenType.SEMICOLON,
        ".": TokenType.DOT,
        ":": TokenType.COLON,
        "?": TokenType.QMARK,
        "*": TokenType.STAR,
        "+": TokenType.PLUS,
        "-": TokenType.MINUS,
        "/": TokenType.SLASH,
        "%": TokenType.PERCENT,
    }

    # Cassandra's reserved keywords (plus the boolean literals): never unquoted identifiers.
    RESERVED_KEYWORDS: ClassVar[frozenset[str]] = frozenset(
        {
            "add", "allow", "alter", "and", "apply", "asc", "authorize", "batch", "begin", "by",
            "columnfamily", "create", "delete", "desc", "describe", "drop", "entries", "execute",
            "false", "from", "full", "grant", "if", "in", "index", "infinity", "insert", "into",
            "keyspace", "limit", "materialized", "modify", "nan", "norecursive", "not", "null",
            "of", "on", "or", "order", "primary", "rename", "replace", "revoke", "schema",
            "select", "set", "table", "to", "token", "true", "truncate", "unlogged", "update",
            "use", "using", "view", "where", "with",
        }
    )  # fmt: skip

    # Keywords that may still name a column, a table or a field (``key``, ``ttl``, ``type``...).
    UNRESERVED_KEYWORDS: ClassVar[frozenset[str]] = frozenset(
        {
            "aggregate", "all", "as", "ascii", "bigint", "blob", "boolean", "called", "cast",
            "changefeed", "cluster", "clustering", "columnfamilies", "compact", "contains",
            "count", "counter", "custom", "date", "decimal", "default", "distinct", "double",
            "duration", "exists", "filtering", "float", "frozen", "function", "functions", "group",
            "inet", "int", "json", "key", "keys", "keyspaces", "list", "login", "map", "partition",
            "per", "role", "roles", "schema", "set", "smallint", "static", "storage", "superuser",
            "tables", "text", "time", "timestamp", "timeuuid", "tinyint", "trigger", "ttl",
            "tuple", "type", "types", "unset", "user", "users", "uuid", "values", "varchar",
            "varint", "vector", "writetime",
        }
    ) - RESERVED_KEYWORDS  # fmt: skip

    KEYWORDS: ClassVar[frozenset[str]] = RESERVED_KEYWORDS | UNRESERVED_KEYWORDS

    # Words that are literals in a term position.
    CONSTANT_WORDS: ClassVar[frozenset[str]] = frozenset(
        {"true", "false", "null", "nan", "infinity"}
    )

    _SIMPLE: ClassVar[dict[str, TokenType]] = {
        "uuid": TokenType.UUID,
        "hex": TokenType.HEX,
        "duration": TokenType.DURATION,
        "float": TokenType.FLOAT,
        "integer": TokenType.INTEGER,
    }

    def tokenize(self, text: str, line: int = 1, column: int = 1) -> list[Token]:
        """Split ``text`` into tokens, the last one being EOF.

        Args:
            text: the CQL text.
            line: the line number of the first character (for text cut out of a script).
            column: the column of the first character.

        Raises:
            CqlSyntaxError: an unterminated literal or comment, or a character no token
                starts with.
        """
        tokens: list[Token] = []
        append = tokens.append
        match = _TOKEN_RE.match
        punctuation = self.PUNCTUATION
        simple = self._SIMPLE
        pos = 0
        line_start = 1 - column  # column of offset p is p - line_start + 1
        while True:
            m = match(text, pos)
            if m is None:  # not reached: the ``unknown`` and ``end`` rules match anywhere
                raise CqlSyntaxError("token recognition error", line, pos - line_start + 1)
            kind = m.lastgroup or "end"
            start = m.start(kind)
            if start != pos:  # whitespace before the token
                newlines = text.count("\n", pos, start)
                if newlines:
                    line += newlines
                    line_start = text.rfind("\n", pos, start) + 1
            if kind == "end":
                pos = start
                break
            end = m.end()
            raw = m.group(kind)
            col = start - line_start + 1
            if kind == "word" or kind == "word2":
                append(Token(TokenType.WORD, raw, raw.lower(), line, col, start, end))
            elif kind == "punct":
                append(Token(punctuation[raw], raw, raw, line, col, start, end))
            elif kind in simple:
                value = raw.lower() if kind in ("uuid", "hex") else raw
                append(Token(simple[kind], raw, value, line, col, start, end))
            elif kind == "string":
                value = raw[1:-1].replace("''", "'")
                append(Token(TokenType.STRING, raw, value, line, col, start, end))
            elif kind == "dollar":
                append(Token(TokenType.STRING, raw, raw[2:-2], line, col, start, end))
            elif kind == "quoted":
                value = raw[1:-1].replace('""', '"')
                append(Token(TokenType.QUOTED_NAME, raw, value, line, col, start, end))
            elif kind == "bad" or kind == "unknown":
                raise CqlSyntaxError(f"token recognition error at: '{raw}'", line, col)
            if kind != "punct" and "\n" in raw:
                line += raw.count("\n")
                line_start = text.rfind("\n", start, end) + 1
            pos = end
        append(Token(TokenType.EOF, "<EOF>", "", line, pos - line_start + 1, pos, pos))
        return tokens


def tokenize(text: str, line: int = 1, column: int = 1) -> list[Token]:
    """Tokenize ``text`` with the default tokenizer (see ``Tokenizer.tokenize``)."""
    return _TOKENIZER.tokenize(text, line, column)


_TOKENIZER = Tokenizer()
