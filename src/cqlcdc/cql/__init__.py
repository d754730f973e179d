"""CQL text in, AST out, and back: tokenizer, parser, renderer and script splitting.

>>> stmt = parse_statement("UPDATE ks.t SET v = v + [1] WHERE pk = 0;")
>>> render(stmt)
'UPDATE ks.t SET v = v + [1] WHERE pk = 0'
"""

from __future__ import annotations

from cqlcdc.cql.ast import Statement
from cqlcdc.cql.parser import Parser
from cqlcdc.cql.render import quote_identifier, render, render_term, render_type
from cqlcdc.cql.script import StatementText, parse_script, split_statements


def parse_statement(text: str) -> Statement:
    """Parse exactly one CQL statement (an optional trailing ``;`` is allowed).

    Args:
        text: the statement text.

    Returns:
        The statement's AST (``cqlcdc.cql.ast``).

    Raises:
        CqlSyntaxError: the text is not one valid statement; carries the 1-based line and
            column of the offending token.

    Example:
        >>> parse_statement("USE ks")
        UseKeyspace(name='ks')
    """
    return Parser.parse(text)


__all__ = [
    "StatementText",
    "parse_script",
    "parse_statement",
    "quote_identifier",
    "render",
    "render_term",
    "render_type",
    "split_statements",
]
