"""``fromJson(...)`` and ``toJson(...)`` as terms of INSERT values, UPDATE assignments and
WHERE clauses (functions.cc ``make_from_json_function`` / ``make_to_json_function``).

>>> from cqlcdc.cql import ast
>>> from cqlcdc.types.resolve import native_type
>>> call = ast.FunctionCall("fromjson", (ast.Constant("string", '"12"'),))
>>> json_function(native_type("int"), call, "v", None)
12
"""

from __future__ import annotations

from typing import Any

from cqlcdc.cql import ast
from cqlcdc.errors import FunctionFailure, InvalidRequest
from cqlcdc.types import terms
from cqlcdc.types.base import CqlType, TermContext
from cqlcdc.types.json_codec import JsonParseError, MarshalError, from_json, parse_json, to_json
from cqlcdc.types.resolve import resolve_type

JSON_FUNCTIONS = frozenset({"fromjson", "tojson"})


def json_function(
    ctype: CqlType, call: ast.FunctionCall, column: str, ctx: TermContext | None
) -> Any:
    """The value of ``fromJson(text)`` or ``toJson((type) value)`` for a receiver of ``ctype``.

    Raises:
        InvalidRequest: a call ScyllaDB refuses to prepare (argument count or type).
        FunctionFailure: ``fromJson`` of text that is not JSON, or not a value of ``ctype``.
    """
    name = call.name.lower()
    if name == "tojson":
        return _to_json_term(ctype, call, column, ctx)
    if len(call.args) != 1:
        raise InvalidRequest("fromJson() accepts 1 argument only")
    text = json_text_argument(call.args[0], "fromjson", ctx)
    if text is None:
        return None
    return decode_function_argument(ctype, text)


def json_text_argument(
    arg: ast.Term | ast.ColumnArg, function: str, ctx: TermContext | None
) -> str | None:
    """The text a JSON function's argument holds: a string constant, a bound value, or null.

    Raises:
        InvalidRequest: anything else, worded as ScyllaDB's type check.
    """
    if isinstance(arg, ast.Constant) and arg.kind == "string":
        return arg.text
    if isinstance(arg, ast.Constant) and arg.kind == "null":
        return None
    if isinstance(arg, ast.BindMarker):
        bound = getattr(ctx, "bound_value", None)
        if bound is None:
            raise terms.bind_marker_error(arg, f"arg0(system.{function})")
        value = bound(arg)
        if value is not None and not isinstance(value, str):
            raise InvalidRequest(
                f"Invalid value {value!r} of Python type {type(value).__name__} for "
                f"arg0(system.{function}) of type text"
            )
        return value
    raise InvalidRequest(
        f"Type error: {terms.term_text(arg)} cannot be passed as argument 0 of function "
        f"system.{function} of type text"
    )


def decode_function_argument(ctype: CqlType, text: str) -> Any:
    """``fromJson`` of ``text`` for ``ctype`` (null for JSON ``null``).

    Raises:
        FunctionFailure: as ScyllaDB words it (``Failed parsing fromJson parameter: ...``
            for text that is not JSON; ``Failed execution of function system.fromjson:
            marshal_exception (marshaling error: ...)`` for a value that does not fit).
    """
    arg_types = (ctype.cql_name,)
    try:
        return from_json(ctype.frozen(), parse_json(text))
    except JsonParseError as err:
        raise FunctionFailure(
            f"Failed parsing fromJson parameter: {err.message}", "system", "fromjson", arg_types
        ) from None
    except MarshalError as err:
        raise FunctionFailure(
            "Failed execution of function system.fromjson: marshal_exception "
            f"(marshaling error: {err.message})",
            "system",
            "fromjson",
            arg_types,
        ) from None


def _to_json_term(
    ctype: CqlType, call: ast.FunctionCall, column: str, ctx: TermContext | None
) -> Any:
    if len(call.args) != 1:
        raise InvalidRequest("toJson() accepts 1 argument only")
    arg = call.args[0]
    if not isinstance(arg, ast.TypeCast):  # a cast is the only term whose type is known here
        raise InvalidRequest("toJson() is only valid when its argument type is known")
    arg_type = resolve_type(arg.type, "", lambda _ks, _name: None)
    value = arg_type.parse_literal(
        arg.term, f"({arg_type.cql_name}){terms.term_text(arg.term)}", ctx
    )
    if not ctype._accepts_type_name("text"):
        raise InvalidRequest(
            f"Type error: cannot assign result of function system.tojson (type text) to "
            f"{column} (type {ctype.cql_name})"
        )
    return ctype.validate(to_json(arg_type, value), column)


__all__ = ["JSON_FUNCTIONS", "decode_function_argument", "json_function", "json_text_argument"]
