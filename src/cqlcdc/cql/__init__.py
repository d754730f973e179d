"""CQL text in, AST out, and back: tokenizer, parser, renderer and script splitting.

>>> stmt = parse_statement("UPDATE ks.t SET v = v + [1] WHERE pk = 0;")
>>> render(stmt)
'UPDATE ks.t SET v = v + [1] WHERE pk = 0'
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from cqlcdc.cql.ast import (
    Batch,
    BindMarker,
    Delete,
    Insert,
    QualifiedName,
    Select,
    Statement,
    Term,
    Update,
)
from cqlcdc.cql.parser import Parser
from cqlcdc.cql.render import quote_identifier, render, render_term, render_type
from cqlcdc.cql.script import StatementText, parse_script, split_statements
from cqlcdc.cql.tokens import tokenize


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


def parse_term(text: str) -> Term:
    """Parse one CQL value literal (``42``, ``'a'``, ``{1: 'x'}``, ``0xcafe``, ...).

    Raises:
        CqlSyntaxError: the text is not exactly one term.
    """
    parser = Parser(tokenize(text))
    term = parser._parse_term()
    if not parser._at_end():
        raise parser._mismatch("EOF")
    return term


def bind_markers(node: object) -> list[BindMarker]:
    """Every bind marker of a statement (or any AST node), in source order."""
    found: list[BindMarker] = []

    def walk(x: object) -> None:
        if isinstance(x, BindMarker):
            found.append(x)
        elif isinstance(x, tuple):
            for item in x:
                walk(item)
        elif dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name))

    walk(node)
    return sorted(found, key=lambda m: m.index)


def with_keyspace(stmt: Statement, keyspace: str | None) -> Statement:
    """The statement with the tables its writes and reads name without a keyspace put in
    ``keyspace``: a prepared statement keeps the keyspace it was prepared in, as in
    Cassandra and ScyllaDB, whatever ``USE`` runs before it is executed.

    Example:
        >>> render(with_keyspace(parse_statement("SELECT * FROM t"), "ks"))
        'SELECT * FROM ks.t'
    """
    if keyspace is None:
        return stmt
    if isinstance(stmt, Batch):
        children = tuple(_in_keyspace(s, keyspace) for s in stmt.statements)
        return dataclasses.replace(stmt, statements=children)
    if isinstance(stmt, Insert | Update | Delete | Select):
        return _in_keyspace(stmt, keyspace)
    return stmt


_Named = TypeVar("_Named", bound=Insert | Update | Delete | Select)


def _in_keyspace(stmt: _Named, keyspace: str) -> _Named:
    if stmt.table.keyspace is not None:
        return stmt
    return dataclasses.replace(stmt, table=QualifiedName(keyspace, stmt.table.name))


__all__ = [
    "StatementText",
    "bind_markers",
    "parse_script",
    "parse_statement",
    "parse_term",
    "quote_identifier",
    "render",
    "render_term",
    "render_type",
    "split_statements",
    "with_keyspace",
]
