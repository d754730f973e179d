"""What every type needs to read a statement term: ScyllaDB's error wording and function terms.

Terms are printed the way ScyllaDB's expression printer shows them in error messages
(``cql3/expr/expression.cc``), e.g. ``Invalid list literal for v: value 'a' is not of type int``.

>>> term_text(ast.MapLiteral(((ast.Constant("integer", "1"), ast.Constant("string", "a")),)))
"{1:'a'}"
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import temporal

if TYPE_CHECKING:
    from cqlcdc.types.base import CqlType, TermContext

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


def _base_name(name: str) -> str:
    """A function's name without the ``system.`` keyspace it may be written with."""
    return name.lower().removeprefix("system.")


# the byte sizes of the fixed-width types' values (ScyllaDB's ``validate``)
_WIDTHS = {
    "boolean": (1,),
    "tinyint": (1,),
    "smallint": (2,),
    "int": (4,),
    "date": (4,),
    "float": (4,),
    "bigint": (8,),
    "counter": (8,),
    "double": (8,),
    "timestamp": (8,),
    "time": (8,),
    "uuid": (16,),
    "timeuuid": (16,),
    "inet": (4, 16),
}


@dataclass(frozen=True, slots=True)
class Conversion:
    """``<type>AsBlob`` or ``blobAs<type>`` (cql3/functions/bytes_conversion_fcts.hh): the
    value's bytes under another type, checked where they become a typed value."""

    name: str
    source: CqlType
    result: CqlType

    def apply(self, value: Any) -> Any:
        if value is None:
            return None
        if self.result.cql_name == "blob":
            return self.source.serialize(value)
        data = bytes(value)
        widths = _WIDTHS.get(self.result.cql_name)
        try:
            # no bytes are the type's empty value (blobAsInt(0x), ScyllaDB's test_empty_int)
            if widths is not None and data and len(data) not in widths:
                raise ValueError(f"{len(data)} bytes")
            result = self.result.deserialize(data)
            if result is None:
                raise ValueError("no value")
            return result
        except Exception:
            raise InvalidRequest(
                f"In call to function system.{self.name}, value 0x{data.hex()} is not a valid "
                f"binary representation for type {self.result.cql_name}"
            ) from None


def conversion(name: str) -> Conversion | None:
    """The conversion function called ``name`` (any case, ``system.`` or not), if it is one."""
    from cqlcdc.types.resolve import NATIVE_TYPES

    name = _base_name(name)
    if name.endswith("asblob") and name[: -len("asblob")] in NATIVE_TYPES:
        return Conversion(name, NATIVE_TYPES[name[: -len("asblob")]], NATIVE_TYPES["blob"])
    if name.startswith("blobas") and name[len("blobas") :] in NATIVE_TYPES:
        return Conversion(name, NATIVE_TYPES["blob"], NATIVE_TYPES[name[len("blobas") :]])
    return None


def function_return_type(call: ast.FunctionCall) -> str:
    """The CQL type name a function term returns (checked before it is evaluated)."""
    name = _base_name(call.name)
    convert = conversion(name)
    if convert is not None:
        return convert.result.cql_name
    if name not in FUNCTIONS:
        raise InvalidRequest(f"Unknown function {call.name} called")
    return FUNCTIONS[name][0]


def evaluate_function(call: ast.FunctionCall, ctx: TermContext | None) -> tuple[str, Any]:
    """Evaluate a function term; returns (CQL type name, Python value).

    Raises:
        InvalidRequest: unknown function, wrong arguments, or no ``ctx`` for the clock.
    """
    name = _base_name(call.name)
    return_type = function_return_type(call)
    convert = conversion(name)
    arity = 1 if convert is not None else FUNCTIONS[name][1]
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
    if convert is not None:
        if isinstance(call.args[0], ast.ColumnArg):
            raise InvalidRequest(
                f"Type error: {term_text(call.args[0])} cannot be passed as argument 0 of function "
                f"system.{name} of type {convert.source.cql_name}"
            )
        value = convert.source.parse_literal(call.args[0], f"system.{name}", ctx)
        return return_type, convert.apply(value)
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
    name: str, term: ast.Term | ast.ColumnArg, ctx: TermContext | None
) -> tuple[str, Any]:
    """The typed value of a function argument, picking the overload as ScyllaDB would."""
    if isinstance(term, ast.FunctionCall):
        return evaluate_function(term, ctx)
    if isinstance(term, ast.Constant):
        if term.kind == "null":
            return "null", None
        if term.kind == "uuid" and name in (
            "totimestamp",
            "todate",
            "tounixtimestamp",
            "dateof",
            "unixtimestampof",
        ):
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


# the argument types each one-argument time function takes (ScyllaDB's overloads)
TIME_FUNCTION_ARGUMENTS: dict[str, tuple[str, ...]] = {
    "totimestamp": ("timeuuid", "date", "timestamp"),
    "todate": ("timeuuid", "date", "timestamp"),
    "tounixtimestamp": ("timeuuid", "date", "timestamp"),
    "dateof": ("timeuuid",),
    "unixtimestampof": ("timeuuid",),
    "mintimeuuid": ("timestamp",),
    "maxtimeuuid": ("timestamp",),
}


def time_function(name: str, arg_type: str, arg: Any) -> Any:
    """A one-argument time function (``TIME_FUNCTION_ARGUMENTS``) of a typed value."""
    return _unary(_base_name(name), arg_type, arg)


def _unary(name: str, arg_type: str, arg: Any) -> Any:
    if arg is None:
        return None
    if name in ("dateof", "unixtimestampof"):
        if arg_type != "timeuuid":
            raise InvalidRequest(
                f"Type error: argument of type {arg_type} cannot be passed as argument 0 "
                f"of function system.{name} of type timeuuid"
            )
        return temporal.timeuuid_ms(arg)
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
    "TIME_FUNCTION_ARGUMENTS",
    "Conversion",
    "bind_marker_error",
    "conversion",
    "evaluate_function",
    "function_return_type",
    "invalid_constant",
    "literal_mismatch",
    "term_text",
    "time_function",
    "type_ref_text",
]
