"""Random input never crashes the parser: only CqlError subclasses escape, and whatever
parses renders to text that parses back to the same AST."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cqlcdc.cql import parse_script, parse_statement, render, split_statements
from cqlcdc.cql.tokens import Tokenizer
from cqlcdc.errors import CqlError

FIXTURE = Path(__file__).parent / "fixtures" / "identity.cql"
VALID = [line for line in FIXTURE.read_text().splitlines() if line.strip()]

PIECES = sorted(Tokenizer.KEYWORDS) + sorted(Tokenizer.PUNCTUATION) + [
    "'x'", "'it''s'", "''", "$$d;$$", '"Q"', '"cdc$time"', "1", "-2", "1.5", "2e3", "0xab",
    "1h30m", "P1D", "PT2H", "123e4567-e89b-12d3-a456-426614174000", "?", ":n", "pk", "ck",
    "ks", "t", "v", "m", "NaN", "-Infinity", "--", "/*", "*/", "//", "\n", "'", '"', "$$",
]  # fmt: skip

token_soup = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=40).map(
    " ".join
)


@st.composite
def mutated_statements(draw: st.DrawFn) -> str:
    """A valid fixture statement with a few words inserted, deleted or replaced."""
    words = draw(st.sampled_from(VALID)).split(" ")
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(words)))
        action = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.sampled_from(PIECES))
        if action == "insert":
            words.insert(index, piece)
        elif words and index < len(words):
            if action == "delete":
                del words[index]
            else:
                words[index] = piece
    return " ".join(words)


def check(text: str) -> None:
    try:
        statement = parse_statement(text)
    except CqlError:
        return
    assert parse_statement(render(statement)) == statement


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(token_soup)
def test_token_soup_raises_only_cql_errors(text: str) -> None:
    check(text)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_statements())
def test_mutated_statements_raise_only_cql_errors(text: str) -> None:
    check(text)


@settings(max_examples=200)
@given(st.text(max_size=80))
def test_random_text_raises_only_cql_errors(text: str) -> None:
    check(text)


@settings(max_examples=200)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([*PIECES, ";", "BEGIN BATCH", "APPLY BATCH"]), st.text(max_size=3)
        ),
        max_size=40,
    ).map(" ".join)
)
def test_scripts_split_and_parse_without_crashing(text: str) -> None:
    statements = split_statements(text)
    for statement in statements:
        assert statement.text
        assert statement.text[0] not in " \t\n\r\f\v"
    assert len(parse_script(text)) == len(statements)
