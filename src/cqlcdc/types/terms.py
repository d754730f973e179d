"""What every type needs to read a statement term: ScyllaDB's error wording and the function table.

Function terms are evaluated in ``functions``, above the concrete types they need by name.

Terms are printed the way ScyllaDB's expression printer shows them in error messages
(``cql3/expr/expression.cc``), e.g. ``Invalid list literal for v: value 'a' is not of type int``.

>>> term_text(ast.MapLiteral(((ast.Constant("integer", "1"), ast.Constant("string", "a")),)))
"{1:'a'}"
"""

from __future__ import annotations

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest

CONSTANT_KIND_NAMES = {
    "string": "STRING",
    "integer": "INTEGER",
    "float": "FLOAT",
    "boolean": "BOOLEAN",
    "uuid": "UUID",
    "hex": "HEX",
    "duration": "DURATION",
    "null": "NULL",
}


def term_text(term: ast.Term | ast.ColumnArg) -> str:
    """The term as ScyllaDB prints it inside error messages."""
    if isinstance(term, ast.ColumnRef):
        return term.name
    if isinstance(term, ast.FieldSelection):
        return ".".join((term.column, *term.path))
    if isinstance(term, ast.ElementSelection):
        return f"{term.column}[{term_text(term.key)}]"
    if isinstance(term, ast.Constant):
        return f"'{term.text}'" if term.kind == "string" else term.text
    if isinstance(term, ast.BindMarker):
        return "?"
    if isinstance(term, ast.ListLiteral):
        return "[" + ", ".join(term_text(t) for t in term.items) + "]"
    if isinstance(term, ast.SetLiteral):
        return "{" + ", ".join(term_text(t) for t in term.items) + "}"
    if isinstance(term, ast.MapLiteral):
        return "{" + ", ".join(f"{term_text(k)}:{term_text(v)}" for k, v in term.entries) + "}"
    if isinstance(term, ast.UdtLiteral):
        return "{" + ", ".join(f"{k}:{term_text(v)}" for k, v in term.fields) + "}"
    if isinstance(term, ast.TupleLiteral):
        return "(" + ", ".join(term_text(t) for t in term.items) + ")"
    if isinstance(term, ast.FunctionCall):
        return f"{term.name}(" + ", ".join(term_text(t) for t in term.args) + ")"
    return f"({type_ref_text(term.type)}) {term_text(term.term)}"


def type_ref_text(ref: ast.TypeRef) -> str:
    """A TypeRef as written (``map<int, text>``, ``ks.ut``, ``vector<float, 3>``)."""
    if ref.size is not None:
        return f"{ref.name}<{type_ref_text(ref.params[0])}, {ref.size}>"
    if ref.params:
        return f"{ref.name}<" + ", ".join(type_ref_text(p) for p in ref.params) + ">"
    return f"{ref.keyspace}.{ref.name}" if ref.keyspace else ref.name


def invalid_constant(term: ast.Constant, column: str, type_name: str) -> InvalidRequest:
    """``Invalid STRING constant (foo) for "v" of type int``."""
    kind = CONSTANT_KIND_NAMES[term.kind]
    return InvalidRequest(
        f'Invalid {kind} constant ({term.text}) for "{column}" of type {type_name}'
    )


def literal_mismatch(term: ast.Term, column: str, type_name: str) -> InvalidRequest:
    """The error for a literal whose shape cannot be the receiver's type, worded as ScyllaDB."""
    if isinstance(term, ast.Constant):
        return invalid_constant(term, column, type_name)
    if isinstance(term, ast.ListLiteral):
        what = "list literal"
    elif isinstance(term, ast.SetLiteral) or (
        isinstance(term, ast.MapLiteral) and not term.entries
    ):
        what = "set literal"  # ScyllaDB parses {} as an empty set
    elif isinstance(term, ast.MapLiteral):
        what = "map literal"
    elif isinstance(term, ast.UdtLiteral):
        what = "user type literal"
    elif isinstance(term, ast.TupleLiteral):
        what = "tuple type literal"
    else:
        what = "literal"
    return InvalidRequest(f"Invalid {what} for {column} of type {type_name}")


def bind_marker_error(term: ast.BindMarker, column: str) -> InvalidRequest:
    """A bind marker has no value until execution; its value goes through ``validate``."""
    marker = f":{term.name}" if term.name else "?"
    return InvalidRequest(
        f"Bind marker {marker} for {column} has no value: it must be bound at execution"
    )


# name -> (return type, argument count)
FUNCTIONS: dict[str, tuple[str, int]] = {
    "now": ("timeuuid", 0),
    "currenttimeuuid": ("timeuuid", 0),
    "uuid": ("uuid", 0),
    "currenttimestamp": ("timestamp", 0),
    "currentdate": ("date", 0),
    "currenttime": ("time", 0),
    "totimestamp": ("timestamp", 1),
    "todate": ("date", 1),
    "tounixtimestamp": ("bigint", 1),
    "mintimeuuid": ("timeuuid", 1),
    "maxtimeuuid": ("timeuuid", 1),
    "dateof": ("timestamp", 1),  # of a timeuuid (deprecated in ScyllaDB, still there)
    "unixtimestampof": ("bigint", 1),
}


def base_name(name: str) -> str:
    """A function's name without the ``system.`` keyspace it may be written with."""
    return name.lower().removeprefix("system.")


__all__ = [
    "CONSTANT_KIND_NAMES",
    "FUNCTIONS",
    "base_name",
    "bind_marker_error",
    "invalid_constant",
    "literal_mismatch",
    "term_text",
    "type_ref_text",
]
