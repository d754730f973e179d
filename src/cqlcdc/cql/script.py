"""Split a CQL script into statements the way ``cqlsh -f`` does, and parse each one.

>>> [s.text for s in split_statements("USE ks; -- note\\nSELECT * FROM t;")]
['USE ks;', 'SELECT * FROM t;']
"""

from __future__ import annotations

import re
from typing import NamedTuple

from cqlcdc.cql.ast import Statement
from cqlcdc.cql.parser import Parser
from cqlcdc.errors import CqlSyntaxError

# Lenient on purpose: an unterminated string or comment runs to the end of the text, and
# the parser reports it; splitting itself never fails.
_SCRIPT_RE = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<comment>(?:--|//)[^\n]*|/\*(?:.*?\*/|.*\Z))"
    r"|(?P<literal>'(?:[^']|'')*(?:'|\Z)|\$\$(?:.*?\$\$|.*\Z)|\"(?:[^\"]|\"\")*(?:\"|\Z))"
    r"|(?P<word>[A-Za-z][A-Za-z0-9_]*)"
    r"|(?P<semicolon>;)"
    r"|(?P<other>[0-9]+|.)",
    re.DOTALL | re.ASCII,
)

_BATCH_KINDS = ("unlogged", "counter", "logged")


class StatementText(NamedTuple):
    """One statement of a script: its text (trailing ``;`` kept) and where it starts (1-based)."""

    text: str
    line: int
    column: int


def split_statements(text: str) -> list[StatementText]:
    """Split a script on ``;`` outside strings and comments; comments between statements and
    empty statements are dropped. ``BEGIN [UNLOGGED | COUNTER] BATCH ... APPLY BATCH`` is one
    statement even though its inner statements end with ``;``.

    Args:
        text: the script.

    Returns:
        The statements in order, each with the line and column of its first character.

    Example:
        >>> split_statements("BEGIN BATCH INSERT INTO t (k) VALUES (1); APPLY BATCH;")[0].text
        'BEGIN BATCH INSERT INTO t (k) VALUES (1); APPLY BATCH;'
    """
    statements: list[StatementText] = []
    start = -1  # offset of the current statement's first character, -1 between statements
    start_line = start_column = 0
    words: list[str] = []  # the current statement's first words (up to 3), lower-cased
    last_words: tuple[str, str] = ("", "")  # the last two words, to spot APPLY BATCH
    line = 1
    line_start = 0
    last_end = 0
    for m in _SCRIPT_RE.finditer(text):
        kind = m.lastgroup
        pos, end = m.start(), m.end()
        raw = m.group()
        if kind == "comment" and raw[:2] == "/*" and (len(raw) < 4 or raw[-2:] != "*/"):
            kind = "other"  # unterminated: keep it, so that parsing reports it
        if kind == "ws" or kind == "comment":
            pass
        elif kind == "semicolon":
            if start < 0:
                pass  # an empty statement
            elif _is_batch(words) and last_words != ("apply", "batch"):
                pass  # a ';' inside BEGIN BATCH ... APPLY BATCH
            else:
                statements.append(StatementText(text[start:end], start_line, start_column))
                start = -1
        else:
            if start < 0:
                start, start_line, start_column = pos, line, pos - line_start + 1
                words = []
                last_words = ("", "")
            last_end = end
            if kind == "word":
                word = raw.lower()
                if len(words) < 3:
                    words.append(word)
                last_words = (last_words[1], word)
            else:
                last_words = (last_words[1], "")
        if kind != "word" and kind != "semicolon":
            newlines = text.count("\n", pos, end)
            if newlines:
                line += newlines
                line_start = text.rfind("\n", pos, end) + 1
    if start >= 0:
        statements.append(StatementText(text[start:last_end], start_line, start_column))
    return statements


def _is_batch(words: list[str]) -> bool:
    if not words or words[0] != "begin":
        return False
    if len(words) > 1 and words[1] == "batch":
        return True
    return len(words) > 2 and words[1] in _BATCH_KINDS and words[2] == "batch"


def parse_script(text: str) -> list[tuple[StatementText, Statement | CqlSyntaxError]]:
    """Split ``text`` and parse each statement; a statement that does not parse is paired
    with its error (positions are relative to the whole script) instead of raising.

    Example:
        >>> [type(r).__name__ for _, r in parse_script("USE ks; SELEC 1;")]
        ['UseKeyspace', 'CqlSyntaxError']
    """
    results: list[tuple[StatementText, Statement | CqlSyntaxError]] = []
    for statement in split_statements(text):
        try:
            parsed: Statement | CqlSyntaxError = Parser.parse(
                statement.text, statement.line, statement.column
            )
        except CqlSyntaxError as error:
            parsed = error
        results.append((statement, parsed))
    return results
