"""The tokenizer: literal kinds, identifiers, comments, positions."""

from __future__ import annotations

import pytest

from cqlcdc.cql.tokens import Token, Tokenizer, TokenType, tokenize
from cqlcdc.errors import CqlSyntaxError


def kinds(text: str) -> list[tuple[TokenType, str]]:
    return [(t.type, t.value) for t in tokenize(text)[:-1]]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SeLeCt", (TokenType.WORD, "select")),
        ('"cdc$time"', (TokenType.QUOTED_NAME, "cdc$time")),
        ('"Say ""hi"""', (TokenType.QUOTED_NAME, 'Say "hi"')),
        ("'it''s'", (TokenType.STRING, "it's")),
        ("''", (TokenType.STRING, "")),
        ("$$a 'b' ; c$$", (TokenType.STRING, "a 'b' ; c")),
        ("42", (TokenType.INTEGER, "42")),
        ("1.5", (TokenType.FLOAT, "1.5")),
        ("2e10", (TokenType.FLOAT, "2e10")),
        ("1.5E-3", (TokenType.FLOAT, "1.5E-3")),
        ("0xCAFE", (TokenType.HEX, "0xcafe")),
        ("0x", (TokenType.HEX, "0x")),
        (
            "123E4567-E89B-12d3-a456-426614174000",
            (TokenType.UUID, "123e4567-e89b-12d3-a456-426614174000"),
        ),
        (
            "cc5baec0-2fec-11eb-af55-000000000001",
            (TokenType.UUID, "cc5baec0-2fec-11eb-af55-000000000001"),
        ),
        ("1h30m", (TokenType.DURATION, "1h30m")),
        ("12mo", (TokenType.DURATION, "12mo")),
        ("3us", (TokenType.DURATION, "3us")),
        ("1y2mo3w4d5h6m7s8ms9us10ns", (TokenType.DURATION, "1y2mo3w4d5h6m7s8ms9us10ns")),
        ("P1D", (TokenType.DURATION, "P1D")),
        ("PT2H", (TokenType.DURATION, "PT2H")),
        ("P1Y2M3DT4H5M6S", (TokenType.DURATION, "P1Y2M3DT4H5M6S")),
        ("P2W", (TokenType.DURATION, "P2W")),
        ("P0001-02-03T04:05:06", (TokenType.DURATION, "P0001-02-03T04:05:06")),
        ("?", (TokenType.QMARK, "?")),
        ("<=", (TokenType.LTE, "<=")),
        (">=", (TokenType.GTE, ">=")),
        ("!=", (TokenType.NEQ, "!=")),
    ],
)
def test_single_token(text: str, expected: tuple[TokenType, str]) -> None:
    assert kinds(text) == [expected]


def test_identifiers_that_look_like_literals() -> None:
    # lower-case ISO letters are not durations; P alone or PT alone is a name
    assert kinds("p1d pk PT P") == [
        (TokenType.WORD, "p1d"),
        (TokenType.WORD, "pk"),
        (TokenType.WORD, "pt"),
        (TokenType.WORD, "p"),
    ]
    assert kinds("deadbeef") == [(TokenType.WORD, "deadbeef")]


def test_minus_is_an_operator_token() -> None:
    assert kinds("c-1") == [
        (TokenType.WORD, "c"),
        (TokenType.MINUS, "-"),
        (TokenType.INTEGER, "1"),
    ]


def test_named_bind_marker_is_colon_then_name() -> None:
    assert kinds(":pk") == [(TokenType.COLON, ":"), (TokenType.WORD, "pk")]


def test_comments_are_dropped() -> None:
    text = "a -- one\nb // two\n/* three\n ; */ c"
    assert kinds(text) == [(TokenType.WORD, w) for w in "abc"]


def test_positions_are_one_based_and_track_lines() -> None:
    tokens = tokenize("SELECT *\n  FROM 'x\ny' t")
    assert [(t.text, t.line, t.column) for t in tokens] == [
        ("SELECT", 1, 1),
        ("*", 1, 8),
        ("FROM", 2, 3),
        ("'x\ny'", 2, 8),
        ("t", 3, 4),
        ("<EOF>", 3, 5),
    ]


def test_start_position_offsets_first_line_only() -> None:
    tokens = tokenize("a\nb", line=5, column=10)
    assert [(t.line, t.column) for t in tokens[:2]] == [(5, 10), (6, 1)]


def test_eof_token_is_appended() -> None:
    assert tokenize("") == [Token(TokenType.EOF, "<EOF>", "", 1, 1, 0, 0)]


@pytest.mark.parametrize(
    ("text", "column"),
    [("a @ b", 3), ("'open", 1), ('"open', 1), ("x /* open", 3), ("$$ open", 1), ('""', 1)],
)
def test_unrecognised_input(text: str, column: int) -> None:
    with pytest.raises(CqlSyntaxError) as info:
        tokenize(text)
    assert info.value.message.startswith(f"line 1:{column} token recognition error at:")
    assert (info.value.line, info.value.column) == (1, column)


def test_keyword_tables_are_consistent() -> None:
    assert not Tokenizer.RESERVED_KEYWORDS & Tokenizer.UNRESERVED_KEYWORDS
    assert {"key", "ttl", "type", "timestamp", "writetime", "values", "json"} <= (
        Tokenizer.UNRESERVED_KEYWORDS
    )
    assert Tokenizer.CONSTANT_WORDS <= Tokenizer.RESERVED_KEYWORDS
