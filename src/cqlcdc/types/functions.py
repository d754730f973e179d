"""Function terms (``now()``, ``toTimestamp(...)``, ``intAsBlob(...)``) and casts in literals.

They need the concrete types by name (a conversion's source and result, a cast's target, the
JSON codec), so they live above them: ``base.CqlType.parse_literal`` reaches them through the
``TermEvaluation`` that ``cqlcdc.types`` installs on import (``TERMS``), and no type module
imports this one (an import-linter contract keeps ``cqlcdc.types`` free of circles).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from cqlcdc.cql import ast
from cqlcdc.errors import InvalidRequest
from cqlcdc.types import temporal
from cqlcdc.types.base import CqlType, TermContext
from cqlcdc.types.json_terms import json_function
from cqlcdc.types.resolve import NATIVE_TYPES, native_type, resolve_type
from cqlcdc.types.terms import FUNCTIONS, base_name, bind_marker_error, term_text

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
    name = base_name(name)
    if name.endswith("asblob") and name[: -len("asblob")] in NATIVE_TYPES:
        return Conversion(name, NATIVE_TYPES[name[: -len("asblob")]], NATIVE_TYPES["blob"])
    if name.startswith("blobas") and name[len("blobas") :] in NATIVE_TYPES:
        return Conversion(name, NATIVE_TYPES["blob"], NATIVE_TYPES[name[len("blobas") :]])
    return None


def function_return_type(call: ast.FunctionCall) -> str:
    """The CQL type name a function term returns (checked before it is evaluated)."""
    name = base_name(call.name)
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
    name = base_name(call.name)
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
    return _unary(base_name(name), arg_type, arg)


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


class FunctionTerms:
    """``base.TermEvaluation``: function calls and casts given to ``CqlType.parse_literal``."""

    def assignable(self, ctype: CqlType, call: ast.FunctionCall) -> bool:
        """Whether the call's result may be a value of ``ctype`` (its return type's name)."""
        if call.name.lower() == "fromjson":  # its receiver gives its type
            return True
        if call.name.lower() == "tojson":
            return ctype._accepts_type_name("text")
        convert = conversion(call.name)
        if convert is not None:
            return ctype._accepts_type_name(convert.result.cql_name)
        name = FUNCTIONS.get(call.name.lower())
        return name is None or ctype._accepts_type_name(name[0])

    def function(
        self, ctype: CqlType, call: ast.FunctionCall, column: str, ctx: TermContext | None
    ) -> Any:
        """The value of ``call`` as a value of ``ctype`` for ``column``."""
        if call.name.lower() in ("fromjson", "tojson"):
            return json_function(ctype, call, column, ctx)
        return_type = function_return_type(call)
        if not ctype._accepts_type_name(return_type):
            raise InvalidRequest(
                f"Type error: cannot assign result of function system.{call.name.lower()} "
                f"(type {return_type}) to {column} (type {ctype.cql_name})"
            )
        _, value = evaluate_function(call, ctx)
        return None if value is None else ctype.validate(value, column)

    def cast(self, ctype: CqlType, term: ast.TypeCast, column: str, ctx: TermContext | None) -> Any:
        """The value of ``(type) term`` as a value of ``ctype`` for ``column``."""
        cast_type = resolve_type(term.type, "", lambda _ks, _name: None)
        inner_name = f"({cast_type.cql_name}){term_text(term.term)}"
        if not cast_type.is_assignable(term.term):
            raise InvalidRequest(
                f"Cannot cast value {term_text(term.term)} to type {cast_type.cql_name}"
            )
        value = cast_type.parse_literal(term.term, inner_name, ctx)
        if cast_type.frozen() != ctype.frozen() and not ctype._accepts_type_name(
            cast_type.cql_name
        ):
            raise InvalidRequest(
                f"Cannot assign value {term_text(term)} to {column} of type {ctype.cql_name}"
            )
        return None if value is None else ctype.validate(value, column)


TERMS = FunctionTerms()

__all__ = [
    "TERMS",
    "TIME_FUNCTION_ARGUMENTS",
    "Conversion",
    "FunctionTerms",
    "conversion",
    "evaluate_function",
    "function_return_type",
    "time_function",
]
