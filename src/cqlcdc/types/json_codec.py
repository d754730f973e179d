"""CQL values as JSON and back, as ScyllaDB writes and reads them (``SELECT JSON``, ``toJson``,
``INSERT ... JSON``, ``fromJson``): ``types/json_utils.cc`` ``to_json_string`` and
``from_json_object``, with Cassandra's rules where ScyllaDB's own tests expect them.

>>> from cqlcdc.types.resolve import native_type
>>> to_json(native_type("timestamp"), 1388578545000)
'"2014-01-01 12:15:45.000Z"'
>>> from_json(native_type("int"), parse_json('"7"'))
7
"""

from __future__ import annotations

import decimal
import ipaddress
import json
import math
import re
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from cqlcdc.errors import InvalidRequest
from cqlcdc.types import duration_text, temporal
from cqlcdc.types.base import CqlType
from cqlcdc.types.collections import ListType, MapType, SetType, VectorType
from cqlcdc.types.dates import DateType, TimestampType, TimeType
from cqlcdc.types.native import (
    AsciiType,
    BlobType,
    BooleanType,
    DurationType,
    InetType,
    TextType,
    TimeuuidType,
    UuidType,
    uuid_version,
)
from cqlcdc.types.numeric import (
    CounterType,
    DecimalType,
    DoubleType,
    FloatType,
    VarintType,
    _IntegerType,
)
from cqlcdc.types.udt import TupleType, UserType
from cqlcdc.types.values import EMPTY


class MarshalError(ValueError):
    """A JSON value that is not a value of the type (ScyllaDB's ``marshal_exception``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JsonParseError(ValueError):
    """Text that is not JSON (ScyllaDB's ``rjson::error``: ``Parsing JSON failed: ...``)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JsonNumber(str):
    """A JSON number kept as written, so integers of any size and decimals stay exact."""

    __slots__ = ()

    @property
    def is_integer_literal(self) -> bool:
        return not any(c in self for c in ".eE")


@dataclass(frozen=True, slots=True)
class JsonObject:
    """A JSON object's members in document order; a repeated name keeps every member (the
    readers take the first, as RapidJSON's ``FindMember`` and ``emplace`` do)."""

    members: tuple[tuple[str, Any], ...]

    def first(self, name: str) -> tuple[bool, Any]:
        for key, value in self.members:
            if key == name:
                return True, value
        return False, None


# -- parsing --------------------------------------------------------------------------------

# Python's messages -> RapidJSON's (GetParseError_En), which ScyllaDB reports
_PARSE_MESSAGES = {
    "Expecting value": "Invalid value.",
    "Extra data": "The document root must not be followed by other values.",
    "Expecting property name enclosed in double quotes": "Missing a name for object member.",
    "Expecting ':' delimiter": "Missing a colon after a name of object member.",
    "Unterminated string starting at": "Missing a closing quotation mark in string.",
    "Invalid \\escape": "Invalid escape character in string.",
    "Invalid \\uXXXX escape": "Incorrect hex digit after \\u escape in string.",
    "Invalid control character at": "Invalid encoding in string.",
}


def parse_json(text: str) -> Any:
    """JSON text as Python objects: numbers as ``JsonNumber``, objects as ``JsonObject``,
    strings, booleans, lists and None. ``NaN`` and ``Infinity`` are not JSON (RapidJSON
    refuses them too).

    Raises:
        JsonParseError: ``Parsing JSON failed: <RapidJSON's reason> at <offset>``.
    """
    if not text.strip():
        raise JsonParseError(f"Parsing JSON failed: The document is empty. at {len(text)}")

    def reject_constant(name: str) -> Any:
        raise JsonParseError(f"Parsing JSON failed: Invalid value. at {text.find(name)}")

    try:
        return json.loads(
            text,
            parse_int=JsonNumber,
            parse_float=JsonNumber,
            parse_constant=reject_constant,
            object_pairs_hook=lambda pairs: JsonObject(tuple(pairs)),
        )
    except json.JSONDecodeError as err:
        reason = _PARSE_MESSAGES.get(err.msg)
        if err.msg == "Expecting ',' delimiter":
            reason = _missing_comma(text, err.pos)
        raise JsonParseError(
            f"Parsing JSON failed: {reason or err.msg + '.'} at {err.pos}"
        ) from None
    except RecursionError:
        raise JsonParseError("Max nested level reached") from None


def _missing_comma(text: str, pos: int) -> str:
    """RapidJSON names the container a missing comma is in."""
    stack: list[str] = []
    in_string = escaped = False
    for c in text[:pos]:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            stack.append(c)
        elif c in "]}" and stack:
            stack.pop()
    if stack and stack[-1] == "{":
        return "Missing a comma or '}' after an object member."
    return "Missing a comma or ']' after an array element."


def dump_json(value: Any) -> str:
    """Inverse of ``parse_json`` (numbers as written; RapidJSON's ``print`` spacing aside)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, JsonNumber):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, JsonObject):
        inner = ",".join(
            f"{json.dumps(k, ensure_ascii=False)}:{dump_json(v)}" for k, v in value.members
        )
        return "{" + inner + "}"
    return "[" + ",".join(dump_json(v) for v in value) + "]"


# -- CQL value -> JSON text -----------------------------------------------------------------

_CONTROL = re.compile(r'[\x00-\x1f"\\]')
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}


def quote_json_string(text: str) -> str:
    """json_utils.cc ``quote_json_string``: ``"`` and ``\\`` escaped, control characters as
    ``\\n``-style escapes or ``\\u00XX`` (upper-case hex), everything else as it is."""
    return '"' + _CONTROL.sub(lambda m: _ESCAPES.get(m[0], f"\\u{ord(m[0]):04X}"), text) + '"'


def json_name(name: str) -> str:
    """A column, alias or field name as a JSON object key: names with an upper-case letter
    are wrapped in double quotes, as CQL quotes case-sensitive names (as_json_function.hh,
    Cassandra's ``Selection.rowToJson``)."""
    if any(c.isupper() for c in name):
        name = f'"{name}"'
    return quote_json_string(name)


def format_float(value: float, single: bool) -> str:
    """{fmt}'s ``"{}"`` of a float or double (what ScyllaDB's ``to_sstring`` prints): the
    shortest digits that read back, fixed notation for decimal exponents in [-4, 16) (7 for
    float, since fmt 11.1.4: fmtlib/fmt 52eeeb52), no ``.0`` on integral values, and
    ``e+XX`` exponents otherwise."""
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    shortest = (
        np.format_float_scientific(np.float32(value), unique=True, trim="-")
        if single
        else repr(value)
    )
    sign, digit_tuple, exponent = decimal.Decimal(shortest).normalize().as_tuple()
    assert isinstance(exponent, int)
    digits = "".join(map(str, digit_tuple))
    point = exponent + len(digits) - 1  # the decimal exponent of the first digit
    if -4 <= point < (7 if single else 16):
        if point >= len(digits) - 1:
            text = digits + "0" * (point - len(digits) + 1)
        elif point >= 0:
            text = digits[: point + 1] + "." + digits[point + 1 :]
        else:
            text = "0." + "0" * (-point - 1) + digits
    else:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        text = f"{mantissa}e{'-' if point < 0 else '+'}{abs(point):02d}"
    return ("-" if sign else "") + text


def format_decimal(value: decimal.Decimal) -> str:
    """ScyllaDB's ``big_decimal::to_string``: plain digits, trailing fractional zeros dropped,
    a negative scale written out as zeros (utils/big_decimal.cc)."""
    sign, digit_tuple, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = int("".join(map(str, digit_tuple)) or "0")
    if unscaled == 0:
        return "0"
    text = str(unscaled)
    scale = -exponent
    if scale < 0:
        text += "0" * -scale
    elif scale > 0:
        if len(text) > scale:
            text = text[:-scale] + "." + text[-scale:]
        else:
            text = "0." + "0" * (scale - len(text)) + text
        text = text.rstrip("0").rstrip(".")
    return ("-" if sign else "") + text


def format_json_timestamp(ms: int) -> str:
    """types.cc ``time_point_to_string(tp, false)``: ``yyyy-mm-dd hh:mm:ss.sssZ``."""
    days, rest = divmod(ms, temporal.DAY_MS)
    year, month, day = temporal.civil_from_days(days)
    seconds, millis = divmod(rest, 1000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    year_text = f"{year:05d}" if year < 0 else f"{year:04d}"
    return f"{year_text}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{millis:03d}Z"


def format_json_date(days: int) -> str:
    """types.cc ``simple_date_to_string`` (the date library's ``year_month_day`` output)."""
    year, month, day = temporal.civil_from_days(days)
    year_text = f"-{-year:04d}" if year < 0 else f"{year:04d}"
    return f"{year_text}-{month:02d}-{day:02d}"


def to_json(ctype: CqlType, value: Any) -> str:
    """``value`` of ``ctype`` as ScyllaDB's ``to_json_string`` writes it (None: ``null``;
    the empty value too, as every driver reads it)."""
    if value is None or value is EMPTY:
        return "null"
    if isinstance(ctype, BooleanType):
        return "true" if value else "false"
    if isinstance(ctype, _IntegerType | VarintType):
        return str(int(value))
    if isinstance(ctype, DoubleType):  # float too
        if math.isnan(value) or math.isinf(value):
            return "null"  # JSON has neither; ScyllaDB writes null
        return format_float(value, isinstance(ctype, FloatType))
    if isinstance(ctype, DecimalType):
        return format_decimal(value)
    if isinstance(ctype, TextType):  # ascii too
        return quote_json_string(value)
    if isinstance(ctype, BlobType):
        return quote_json_string("0x" + bytes(value).hex())
    if isinstance(ctype, UuidType | InetType):  # timeuuid too
        return quote_json_string(str(value))
    if isinstance(ctype, TimestampType):
        return quote_json_string(format_json_timestamp(value))
    if isinstance(ctype, DateType):
        return quote_json_string(format_json_date(value))
    if isinstance(ctype, TimeType):
        return quote_json_string(temporal.format_time(value))
    if isinstance(ctype, DurationType):
        return quote_json_string(duration_text.format_duration(value))
    if isinstance(ctype, SetType):
        return "[" + ", ".join(to_json(ctype.elem, v) for v in ctype.ordered(value)) + "]"
    if isinstance(ctype, ListType | VectorType):
        return "[" + ", ".join(to_json(ctype.elem, v) for v in value) + "]"
    if isinstance(ctype, MapType):
        entries = []
        for key in sorted(value, key=ctype.key.sort_key):
            key_text = to_json(ctype.key, key)
            if not key_text.startswith('"'):  # JSON keys are strings
                key_text = quote_json_string(key_text)
            entries.append(f"{key_text}: {to_json(ctype.value, value[key])}")
        return "{" + ", ".join(entries) + "}"
    if isinstance(ctype, TupleType):
        return "[" + ", ".join(to_json(t, v) for t, v in zip(ctype.types, value)) + "]"
    if isinstance(ctype, UserType):
        fields = zip(ctype.field_names, ctype.field_types, value.values_tuple)
        return "{" + ", ".join(f"{json_name(n)}: {to_json(t, v)}" for n, t, v in fields) + "}"
    raise InvalidRequest(f"Cannot create JSON string for type {ctype.cql_name}")


# -- JSON -> CQL value ----------------------------------------------------------------------


_INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")
_UUID_TEXT = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


def _shown(value: Any) -> str:
    return dump_json(value)


def _string(value: Any, type_name: str) -> str:
    """json_utils.cc ``validated_to_string_view``."""
    if not isinstance(value, str) or isinstance(value, JsonNumber):
        raise MarshalError(
            f"{type_name} must be represented as string in JSON, instead got '{_shown(value)}'"
        )
    return value


def _integer(value: Any, ctype: CqlType, bits: int) -> int:
    """json_utils.cc ``to_int<T>``: integers in range, and whole numbers written as floats
    (``1e6``, ``12.0``), but no fraction."""
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if not isinstance(value, JsonNumber):
        raise MarshalError(f"Incorrect JSON value for int64 type: {_shown(value)}")
    if value.is_integer_literal:
        number = int(value)
        if not low <= number <= high:
            raise MarshalError(f"Value {number} out of range")
        return number
    as_double = float(value)
    if not math.isfinite(as_double):
        raise MarshalError(f"Value {format_float(as_double, False)} out of range")
    fraction = as_double - math.trunc(as_double)
    if fraction != 0.0:
        raise MarshalError(
            f"Incorrect JSON floating-point value for int64 type: {value} (it should not "
            f"contain fractional part {format_float(fraction, False)})"
        )
    if not low <= as_double <= high:
        raise MarshalError(f"Value {format_float(as_double, False)} out of range")
    return int(as_double)


def _from_literal(ctype: CqlType, kind: str, text: str) -> Any:
    """A value read from text as the type's ``from_string`` does (its literal parser)."""
    from cqlcdc.cql import ast

    try:
        return ctype.parse_literal(ast.Constant(kind, text), "value")  # type: ignore[arg-type]
    except InvalidRequest as err:
        raise MarshalError(err.message) from None


def from_json(ctype: CqlType, value: Any) -> Any:
    """A parsed JSON value (``parse_json``) as a value of ``ctype``, as ScyllaDB's
    ``from_json_object`` reads it; JSON null is CQL null.

    Strings stand for numbers, booleans (``"true"``) and every type written as text;
    map keys are strings (those of collection, tuple and user-type keys hold JSON).

    Raises:
        MarshalError: the value does not fit the type (ScyllaDB's wording).
    """
    if value is None:
        return None
    if isinstance(ctype, CounterType):
        if not isinstance(value, JsonNumber):
            raise MarshalError("Counters must be represented as JSON integer")
        return _integer(value, ctype, 64)
    if isinstance(ctype, _IntegerType):
        if isinstance(value, str) and not isinstance(value, JsonNumber):
            if not _INTEGER_TEXT.fullmatch(value):  # boost::lexical_cast<int64_t>
                raise MarshalError(f"Invalid number format '{value}'")
            return _from_literal(ctype, "integer", value)
        return _integer(value, ctype, ctype.size * 8)
    if isinstance(ctype, VarintType):
        text = value if isinstance(value, str) else _shown(value)
        if not _INTEGER_TEXT.fullmatch(text):
            raise MarshalError(f"unable to make int from '{text}'")
        return int(text)
    if isinstance(ctype, DecimalType):
        if not isinstance(value, str):
            raise MarshalError(f"{_shown(value)} must be represented as numeric or string in JSON")
        return _from_literal(ctype, "float", value)
    if isinstance(ctype, DoubleType):  # float too
        if isinstance(value, str):  # a JsonNumber or a string
            return _from_literal(ctype, "float", value)
        raise MarshalError("JSON value must be represented as double or string")
    if isinstance(ctype, BooleanType):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and not isinstance(value, JsonNumber):
            word = " ".join(value.split()).lower()
            if word in ("true", "false"):
                return word == "true"
        raise MarshalError(f"Invalid JSON object {_shown(value)}")
    if isinstance(ctype, AsciiType):
        text = _string(value, "ascii_type")
        if not text.isascii():
            raise MarshalError(f"Invalid ASCII character in string literal: '{text}'")
        return text
    if isinstance(ctype, TextType):
        text = _string(value, "string_type")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise MarshalError("Validation failed - non-UTF8 character in a UTF8 string") from None
        return text
    if isinstance(ctype, BlobType):
        text = _string(value, "bytes_type")
        if not text.startswith("0x"):
            raise MarshalError("Blob JSON strings must start with 0x")
        return _from_literal(ctype, "hex", text)
    if isinstance(ctype, TimestampType):
        if isinstance(value, JsonNumber):
            return _integer(value, ctype, 64)
        if not isinstance(value, str):
            raise MarshalError("timestamp_type must be represented as string or integer")
        return _from_literal(ctype, "string", value)
    if isinstance(ctype, DateType):
        return _from_literal(ctype, "string", _string(value, "simple_date_type"))
    if isinstance(ctype, TimeType):
        return _from_literal(ctype, "string", _string(value, "time_type"))
    if isinstance(ctype, UuidType):  # timeuuid too
        name = "timeuuid_type" if isinstance(ctype, TimeuuidType) else "uuid_type"
        return _uuid(_string(value, name), isinstance(ctype, TimeuuidType))
    if isinstance(ctype, InetType):
        text = _string(value, "inet_addr_type")
        try:
            return ipaddress.ip_address(text)
        except ValueError:
            raise MarshalError(f"Failed to parse inet_addr from '{text}'") from None
    if isinstance(ctype, DurationType):
        text = _string(value, "duration_type")
        try:
            return duration_text.parse_duration(text)
        except InvalidRequest as err:
            raise MarshalError(err.message) from None
    return _from_json_composite(ctype, value)


def _uuid(text: str, time_based: bool) -> uuid.UUID:
    if not _UUID_TEXT.fullmatch(text):
        raise MarshalError(f"Invalid UUID format ({text})")
    value = uuid.UUID(text)
    if time_based and uuid_version(value) != 1:
        raise MarshalError(f"Unsupported UUID version ({uuid_version(value)})")
    return value


def _array(value: Any, type_name: str) -> list[Any]:
    if not isinstance(value, list):
        raise MarshalError(f"{type_name} must be represented as JSON Array")
    return value


def _element(ctype: CqlType, value: Any, what: str) -> Any:
    if value is None:
        raise MarshalError(f"Invalid null {what}")  # Cassandra's wording; CQL has no null elements
    return from_json(ctype, value)


def _from_json_composite(ctype: CqlType, value: Any) -> Any:
    if isinstance(ctype, ListType):
        items = _array(value, "list_type")
        return tuple(_element(ctype.elem, v, "element in list") for v in items)
    if isinstance(ctype, SetType):
        items = _array(value, "set_type")
        return frozenset(_element(ctype.elem, v, "element in set") for v in items)
    if isinstance(ctype, VectorType):
        items = _array(value, "vector_type")
        if len(items) > ctype.size:
            raise MarshalError(f"Too many values ({len(items)}) for vector with size {ctype.size}")
        if len(items) < ctype.size:
            raise MarshalError(f"Too few values ({len(items)}) for vector with size {ctype.size}")
        return tuple(_element(ctype.elem, v, "element in vector") for v in items)
    if isinstance(ctype, TupleType):
        items = _array(value, "tuple_type")
        if len(items) > len(ctype.types):
            raise MarshalError(
                f"Too many values ({len(items)}) for tuple with size {len(ctype.types)}"
            )
        parsed = [from_json(t, v) for t, v in zip(ctype.types, items)]
        return tuple(parsed) + (None,) * (len(ctype.types) - len(parsed))
    if isinstance(ctype, MapType):
        return _map(ctype, value)
    if isinstance(ctype, UserType):
        return _user_type(ctype, value)
    raise MarshalError(f"Cannot read type {ctype.cql_name} from JSON")


def _map(ctype: MapType, value: Any) -> Any:
    if not isinstance(value, JsonObject):
        raise MarshalError("map_type must be represented as JSON Object")
    composite = isinstance(ctype.key, ListType | SetType | MapType | TupleType | UserType)
    entries: dict[Any, Any] = {}
    for name, item in value.members:
        key_json: Any = name
        if composite:  # the key's own JSON, in a string
            try:
                key_json = parse_json(name)
            except JsonParseError as err:
                raise MarshalError(f"Failed parsing map_key {name}: {err.message}") from None
        key = _element(ctype.key, key_json, "key in map")
        parsed = _element(ctype.value, item, "value in map")
        entries.setdefault(key, parsed)  # the first of repeated keys, as std::map::emplace
    return ctype.make(entries)


def _user_type(ctype: UserType, value: Any) -> Any:
    if not isinstance(value, JsonObject):
        raise MarshalError("user_type must be represented as JSON Object")
    fields: dict[str, Any] = {}
    for name, item in value.members:
        field = json_key_name(name)
        if field not in ctype.field_names:  # ScyllaDB matches the name as written
            field = name
        if field not in ctype.field_names:
            raise MarshalError(f"Extraneous field definition for user type {ctype.name}: {name}")
        fields.setdefault(field, item)
    types = zip(ctype.field_names, ctype.field_types, strict=True)
    return ctype.make({f: from_json(t, fields.get(f)) for f, t in types})


def json_key_name(key: str) -> str:
    """A JSON object key as the column or field it names: ``"\\"Name\\""`` is case-sensitive,
    any other key is folded to lower case (update_statement.cc ``handle_case_sensitivity``)."""
    if len(key) > 1 and key.startswith('"') and key.endswith('"'):
        return key[1:-1]
    return key.lower()


__all__ = [
    "JsonNumber",
    "JsonObject",
    "JsonParseError",
    "MarshalError",
    "dump_json",
    "format_decimal",
    "format_float",
    "from_json",
    "json_key_name",
    "json_name",
    "parse_json",
    "quote_json_string",
    "to_json",
]
