"""CQL values as changefeed JSON values and as DynamoDB AttributeValues (docs/changefeeds.md).

YDB's ``ToJson`` fixes the types YDB has (integers as numbers, Decimal as a string, String as
base64, Uuid as its canonical text, Timestamp as ``...T...000000Z``); the CQL types YDB lacks
follow the same spirit: lossless, and plain JSON a consumer reads without a schema.

>>> from cqlcdc.types import native_type
>>> to_json(native_type("timestamp"), 1670803200000)
'2022-12-12T00:00:00.000000Z'
>>> to_attribute_value(native_type("int"), 7)
{'N': '7'}
"""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
from collections.abc import Callable
from typing import Any

from cqlcdc.types import (
    BlobType,
    BooleanType,
    CqlType,
    DateType,
    DecimalType,
    DoubleType,
    DurationType,
    FloatType,
    ListType,
    MapType,
    SetType,
    TimestampType,
    TimeType,
    TupleType,
    UserType,
    VarintType,
    VectorType,
)
from cqlcdc.types.numeric import BigintType, IntType, SmallintType, TinyintType
from cqlcdc.types.temporal import DAY_MS, civil_from_days, format_time
from cqlcdc.types.values import EMPTY

_INTEGER_TYPES = (TinyintType, SmallintType, IntType, BigintType)  # counter is a bigint
_NUMBER_TYPES = (*_INTEGER_TYPES, VarintType, DecimalType, DoubleType)  # float is a double
# YDB's writer (WriteNanAsString) spells the non-finite doubles this way
_NON_FINITE = {"nan": "nan", "inf": "inf", "-inf": "-inf"}


def _year(year: int) -> str:
    # ISO 8601 expanded years outside 0000-9999 (CQL dates span +-5.8 million years)
    return f"{year:04d}" if 0 <= year <= 9999 else f"{year:+05d}"


def iso_date(days: int) -> str:
    """A CQL date as YDB prints a Date: midnight UTC with microseconds."""
    year, month, day = civil_from_days(days)
    return f"{_year(year)}-{month:02d}-{day:02d}T00:00:00.000000Z"


def iso_timestamp(ms: int) -> str:
    """A CQL timestamp (ms) as YDB prints a Timestamp: ``2022-12-12T00:00:00.000000Z``."""
    days, ms_of_day = divmod(ms, DAY_MS)
    year, month, day = civil_from_days(days)
    seconds, millis = divmod(ms_of_day, 1000)
    minutes, sec = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    return (
        f"{_year(year)}-{month:02d}-{day:02d}T{hours:02d}:{minute:02d}:{sec:02d}."
        f"{millis * 1000:06d}Z"
    )


def _float32(value: float) -> float:
    """The shortest decimal that reads back to the same binary32 (what cqlsh shows)."""
    packed = struct.pack(">f", value)
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        try:
            if struct.pack(">f", candidate) == packed:
                return candidate
        except OverflowError:
            continue
    return value


def _float(cql_type: CqlType, value: float) -> float | str:
    if math.isnan(value):
        return _NON_FINITE["nan"]
    if math.isinf(value):
        return _NON_FINITE["inf" if value > 0 else "-inf"]
    return _float32(value) if isinstance(cql_type, FloatType) else float(value)


def _sorted_set(cql_type: SetType, value: frozenset[Any]) -> list[Any]:
    return sorted(value, key=cql_type.elem.sort_key)


def json_key(cql_type: CqlType, value: Any) -> str:
    """A map key as a JSON object key: strings as themselves, anything else as compact JSON
    text of its rendering (``1`` -> ``"1"``, a tuple ``(1, 2)`` -> ``"[1,2]"``)."""
    rendered = to_json(cql_type, value)
    if isinstance(rendered, str):
        return rendered
    return json.dumps(rendered, separators=(",", ":"), ensure_ascii=False)


def to_json(cql_type: CqlType, value: Any) -> Any:
    """A CQL value as a JSON value (``None`` is ``null``, and so is the empty value, as
    every driver reads it); see docs/changefeeds.md."""
    if value is None or value is EMPTY:
        return None
    return _converter(cql_type)(value)


@functools.lru_cache(maxsize=1024)
def _converter(cql_type: CqlType) -> Callable[[Any], Any]:
    """How ``to_json`` renders a non-null value of ``cql_type`` (decided once per type: a
    feed renders every column of every record)."""
    if isinstance(cql_type, BooleanType):
        return bool
    if isinstance(cql_type, _INTEGER_TYPES):
        return int
    if isinstance(cql_type, VarintType | DecimalType):
        return str  # arbitrary precision: a string, as YDB does for Decimal/DyNumber
    if isinstance(cql_type, DoubleType):
        return functools.partial(_float, cql_type)
    if isinstance(cql_type, BlobType):
        return lambda value: base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(cql_type, DateType):
        return iso_date
    if isinstance(cql_type, TimestampType):
        return iso_timestamp
    if isinstance(cql_type, TimeType):
        return format_time
    if isinstance(cql_type, DurationType):
        return cql_type.to_literal
    if isinstance(cql_type, ListType | VectorType):
        elem = cql_type.elem
        return lambda value: [to_json(elem, v) for v in value]
    if isinstance(cql_type, SetType):
        set_type = cql_type
        return lambda value: [to_json(set_type.elem, v) for v in _sorted_set(set_type, value)]
    if isinstance(cql_type, MapType):
        map_type = cql_type
        return lambda value: {
            json_key(map_type.key, k): to_json(map_type.value, v) for k, v in value.items()
        }
    if isinstance(cql_type, TupleType):
        types = cql_type.types
        return lambda value: [to_json(t, v) for t, v in zip(types, value)]
    if isinstance(cql_type, UserType):
        fields = tuple(zip(cql_type.field_names, cql_type.field_types))
        return lambda value: {name: to_json(t, value.get(name)) for name, t in fields}
    # text, ascii, uuid, timeuuid, inet: their canonical text
    return str


# -- DynamoDB AttributeValue -------------------------------------------------------------------


def _scalar_tag(cql_type: CqlType) -> str | None:
    """``S``, ``N`` or ``B`` for types that are DynamoDB scalars (and so may form a set)."""
    if isinstance(cql_type, BooleanType):
        return None
    if isinstance(cql_type, _NUMBER_TYPES):
        return "N"
    if isinstance(cql_type, BlobType):
        return "B"
    if isinstance(cql_type, ListType | SetType | MapType | VectorType | TupleType | UserType):
        return None
    return "S"


def _scalar(cql_type: CqlType, value: Any) -> dict[str, Any]:
    tag = _scalar_tag(cql_type)
    rendered = to_json(cql_type, value)
    if tag == "N":
        if isinstance(rendered, str) and rendered in _NON_FINITE:
            return {"S": rendered}  # DynamoDB numbers have no NaN or infinities
        return {"N": rendered if isinstance(rendered, str) else repr(rendered)}
    if tag == "B":
        return {"B": rendered}
    return {"S": rendered}


def to_attribute_value(cql_type: CqlType, value: Any) -> dict[str, Any]:
    """A CQL value as a DynamoDB AttributeValue (``None`` -> ``{"NULL": true}``).

    Sets of string-like, number or blob elements are ``SS``/``NS``/``BS``; DynamoDB has no
    empty sets and no sets of other elements, so those are ``L``. Maps and UDTs are ``M``
    (keys as in ``json_key``), lists, tuples and vectors ``L``.
    """
    if value is None or value is EMPTY:  # the empty value as drivers read it
        return {"NULL": True}
    if isinstance(cql_type, BooleanType):
        return {"BOOL": bool(value)}
    if isinstance(cql_type, SetType):
        items = _sorted_set(cql_type, value)
        tag = _scalar_tag(cql_type.elem)
        if tag is None or not items:
            return {"L": [to_attribute_value(cql_type.elem, v) for v in items]}
        scalars = [_scalar(cql_type.elem, v) for v in items]
        if any(tag not in s for s in scalars):  # NaN in a set<double>: not a number set
            return {"L": scalars}
        return {tag + "S": [s[tag] for s in scalars]}
    if isinstance(cql_type, ListType | VectorType):
        return {"L": [to_attribute_value(cql_type.elem, v) for v in value]}
    if isinstance(cql_type, TupleType):
        return {"L": [to_attribute_value(t, v) for t, v in zip(cql_type.types, value)]}
    if isinstance(cql_type, MapType):
        return {
            "M": {
                json_key(cql_type.key, k): to_attribute_value(cql_type.value, v)
                for k, v in value.items()
            }
        }
    if isinstance(cql_type, UserType):
        return {
            "M": {
                name: to_attribute_value(t, value.get(name))
                for name, t in zip(cql_type.field_names, cql_type.field_types)
            }
        }
    return _scalar(cql_type, value)


__all__ = ["iso_date", "iso_timestamp", "json_key", "to_attribute_value", "to_json"]
