"""Identity fixture: every line is canonical CQL, so parse -> render gives the line back."""

from __future__ import annotations

from pathlib import Path

import pytest

from cqlcdc.cql import parse_statement, render

FIXTURE = Path(__file__).parent / "fixtures" / "identity.cql"
LINES = [line for line in FIXTURE.read_text().splitlines() if line.strip()]


def test_fixture_is_large_enough() -> None:
    assert len(LINES) >= 80
    assert len(set(LINES)) == len(LINES), "duplicate fixture lines"


@pytest.mark.parametrize("line", LINES)
def test_render_of_parse_is_identity(line: str) -> None:
    statement = parse_statement(line)
    assert render(statement) == line


@pytest.mark.parametrize("line", LINES)
def test_parse_of_render_is_identity(line: str) -> None:
    statement = parse_statement(line)
    assert parse_statement(render(statement)) == statement


@pytest.mark.parametrize("line", LINES)
def test_trailing_semicolon_and_case_do_not_matter(line: str) -> None:
    statement = parse_statement(line)
    assert parse_statement(line + " ;") == statement
    assert parse_statement(line + ";\n-- done\n") == statement
