"""``INSERT INTO t JSON '...'`` as the INSERT it stands for (update_statement.cc
``insert_prepared_json_statement``): each column the JSON names gets its value, and with
``DEFAULT NULL`` (the default) every other regular column gets null, so the write, and its
CDC log rows, are exactly those of the equivalent ``INSERT INTO t (...) VALUES (...)``.
"""

from __future__ import annotations

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.schema.model import TableSchema
from cqlcdc.types.base import TermContext
from cqlcdc.types.json_codec import (
    JsonObject,
    JsonParseError,
    MarshalError,
    dump_json,
    from_json,
    json_key_name,
    parse_json,
)

NULL = ast.Constant("null", "null")


def json_insert_values(
    schema: TableSchema, stmt: ast.Insert, ctx: TermContext | None
) -> ast.Insert:
    """The ``INSERT ... VALUES`` an ``INSERT ... JSON`` means on ``schema``.

    Every value becomes a ``fromJson('<its JSON>')`` term, read by the column's type when the
    write is built, after this function has checked that each one reads.

    Raises:
        InvalidRequest: the JSON is null, not an object, names an unknown column or a
            static column, holds a value its column's type cannot read, leaves out a key
            column, or the table has counters (ScyllaDB's messages where it has them).
    """
    text = _json_text(stmt.json, ctx)
    if text is None:
        raise InvalidRequest("Got null for INSERT JSON values")
    try:
        document = parse_json(text)
    except JsonParseError as err:
        raise InvalidRequest(f"Could not decode JSON string as a map: {err.message}") from None
    if document is None:
        raise InvalidRequest("Got null for INSERT JSON values")
    if not isinstance(document, JsonObject):
        raise InvalidRequest(
            f"Could not decode JSON string as a map: {dump_json(document)} is not an object"
        )
    given: dict[str, object] = {}
    for key, value in document.members:
        given.setdefault(json_key_name(key), value)  # the first of repeated names
    columns: list[str] = []
    values: list[ast.Term] = []
    for col in schema.columns:
        if col.name not in given:
            continue
        value = given.pop(col.name)
        try:
            from_json(col.type.frozen(), value)  # ScyllaDB reads every value first
        except MarshalError as err:
            raise InvalidRequest(f"marshaling error: {err.message}") from None
        columns.append(col.name)
        values.append(NULL if value is None else _from_json_term(value))
    if given:
        raise InvalidRequest(f"JSON values map contains unrecognized column: {next(iter(given))}")
    named = dict(zip(columns, values, strict=True))
    for col in (*schema.partition_key, *schema.clustering_key):
        if named.get(col.name, NULL) == NULL:
            raise InvalidRequest(f"Missing mandatory PRIMARY KEY part {col.name}")
    for col in schema.columns:
        if col.kind == "regular" and col.type.is_counter:
            raise InvalidRequest(f"Cannot set the value of counter column {col.name} in JSON")
    static = next((c.name for c in schema.columns if c.kind == "static" and c.name in named), None)
    if static is not None:
        # ScyllaDB writes only the regular columns of an INSERT JSON and drops the static
        # ones; a value that would be acknowledged and lost is refused instead
        raise InvalidRequest(
            f"INSERT ... JSON cannot set static column {static}: ScyllaDB ignores static "
            "columns in INSERT JSON; set it with INSERT ... VALUES or UPDATE"
        )
    if not stmt.json_default_unset:
        for col in schema.columns:
            if col.kind == "regular" and col.name not in named:
                columns.append(col.name)
                values.append(NULL)
    return ast.Insert(stmt.table, tuple(columns), tuple(values), stmt.using, stmt.if_not_exists)


def _json_text(term: ast.Term | None, ctx: TermContext | None) -> str | None:
    """The JSON of the statement: a string literal or the text bound to its marker."""
    if isinstance(term, ast.Constant) and term.kind == "string":
        return term.text
    if isinstance(term, ast.BindMarker):
        bound = getattr(ctx, "bound_value", None)
        if bound is None:
            raise InvalidRequest("Bind marker ? for [json] has no value: it must be bound")
        value = bound(term)
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(
                f"Invalid value {value!r} of Python type {type(value).__name__} for [json] "
                "of type text"
            )
        return value
    raise InvalidRequest("INSERT ... JSON takes a string literal or a bind marker")


def _from_json_term(value: object) -> ast.Term:
    return ast.FunctionCall("fromjson", (ast.Constant("string", dump_json(value)),))


__all__ = ["json_insert_values"]
