"""What every type needs to read a statement term: ScyllaDB's error wording and function terms.

Terms are printed the way ScyllaDB's expression printer shows them in error messages
(``cql3/expr/expression.cc``), e.g. ``Invalid list literal for v: value 'a' is not of type int``.

>>> term_text(ast.MapLiteral(((ast.Constant("integer", "1"), ast.Constant("string", "a")),)))
"{1:'a'}"
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import temporal

if TYPE_CHECKING:
    from cqlcdc.types.base import TermContext

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


def term_text(term: ast.Term | ast.ColumnRef) -> str:
    """The term as ScyllaDB prints it inside error messages."""
    if isinstance(term, ast.ColumnRef):
        return term.name
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
}


def function_return_type(call: ast.FunctionCall) -> str:
    """The CQL type name a function term returns (checked before it is evaluated)."""
    name = call.name.lower()
    if name not in FUNCTIONS:
        raise InvalidRequest(f"Unknown function {call.name} called")
    return FUNCTIONS[name][0]


def evaluate_function(call: ast.FunctionCall, ctx: TermContext | None) -> tuple[str, Any]:
    """Evaluate a function term; returns (CQL type name, Python value).

    Raises:
        InvalidRequest: unknown function, wrong arguments, or no ``ctx`` for the clock.
    """
    name = call.name.lower()
    return_type = function_return_type(call)
    arity = FUNCTIONS[name][1]
    if len(call.args) != arity:
        raise InvalidRequest(
            f"Invalid number of arguments in call to function system.{name}: "
            f"{arity} required but {len(call.args)} provided"
        )
    if arity == 0:
        if ctx is None:
            raise InvalidRequest(
                f"Function system.{name}() needs the session clock; no context was given"
            )
        return return_type, _nullary(name, ctx)
    arg_type, arg = _argument(name, call.args[0], ctx)
    return return_type, _unary(name, arg_type, arg)


def _nullary(name: str, ctx: TermContext) -> Any:
    if name in ("now", "currenttimeuuid"):
        return ctx.new_timeuuid()
    if name == "uuid":
        return ctx.new_uuid()
    if name == "currenttimestamp":
        return ctx.now_us // 1000
    if name == "currentdate":
        return ctx.now_us // (temporal.DAY_MS * 1000)
    return (ctx.now_us % (temporal.DAY_MS * 1000)) * 1000  # currenttime


def _argument(
    name: str, term: ast.Term | ast.ColumnRef, ctx: TermContext | None
) -> tuple[str, Any]:
    """The typed value of a function argument, picking the overload as ScyllaDB would."""
    if isinstance(term, ast.FunctionCall):
        return evaluate_function(term, ctx)
    if isinstance(term, ast.Constant):
        if term.kind == "null":
            return "null", None
        if term.kind == "uuid" and name in ("totimestamp", "todate", "tounixtimestamp"):
            value = uuid.UUID(term.text)
            if value.version != 1:
                raise InvalidRequest(f"Unsupported UUID version ({value.version})")
            return "timeuuid", value
        if term.kind in ("string", "integer"):
            if name == "totimestamp":
                return "date", temporal.parse_date(term.text)
            now_ms = ctx.now_us // 1000 if ctx is not None else None
            return "timestamp", temporal.parse_timestamp(term.text, now_ms)
    if isinstance(term, ast.BindMarker):
        if name in ("mintimeuuid", "maxtimeuuid") and hasattr(ctx, "bound_value"):
            # minTimeuuid(?) / maxTimeuuid(?): the window bounds of ScyllaDB's CDC readers
            from cqlcdc.types.resolve import native_type

            timestamp = native_type("timestamp")
            return "timestamp", timestamp.parse_literal(term, f"system.{name}", ctx)
        raise bind_marker_error(term, f"system.{name}")
    raise InvalidRequest(
        f"Type error: {term_text(term)} cannot be passed as argument 0 of function system.{name}"
    )


def _unary(name: str, arg_type: str, arg: Any) -> Any:
    if arg is None:
        return None
    if name in ("mintimeuuid", "maxtimeuuid"):
        if arg_type != "timestamp":
            raise InvalidRequest(
                f"Type error: argument of type {arg_type} cannot be passed as argument 0 "
                f"of function system.{name} of type timestamp"
            )
        return temporal.min_timeuuid(arg) if name == "mintimeuuid" else temporal.max_timeuuid(arg)
    ms: int
    if arg_type == "timeuuid":
        ms = temporal.timeuuid_ms(arg)
    elif arg_type == "date":
        ms = arg * temporal.DAY_MS
    elif arg_type == "timestamp":
        ms = arg
    else:
        raise InvalidRequest(
            f"Type error: argument of type {arg_type} cannot be passed to function system.{name}"
        )
    if name == "todate":
        return ms // temporal.DAY_MS
    return ms  # totimestamp, tounixtimestamp


__all__ = [
    "CONSTANT_KIND_NAMES",
    "FUNCTIONS",
    "bind_marker_error",
    "evaluate_function",
    "function_return_type",
    "invalid_constant",
    "literal_mismatch",
    "term_text",
    "type_ref_text",
]
