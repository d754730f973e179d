"""Changefeed JSON built column by column: the compact JSON text of every value of an Arrow
column, and JSON objects and arrays joined from such texts, without a Python object per
value where the type allows (integers, booleans, strings that need no escaping).

Each function gives exactly the text that ``encode(to_json(type, value))`` gives for one
value (``cqlcdc.changefeed.records``, ``cqlcdc.changefeed.values``); the tests compare them.

>>> from cqlcdc.types import native_type
>>> json_texts(native_type("text"), pa.array(['a"b', "c", None])).to_pylist()
['"a\\\\"b"', '"c"', 'null']
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.changefeed.values import to_attribute_value, to_json
from cqlcdc.types import BooleanType, CqlType
from cqlcdc.types.numeric import BigintType, IntType, SmallintType, TinyintType

NULL = "null"
_INTEGERS = (TinyintType, SmallintType, IntType, BigintType)
_STRINGS = ("text", "ascii")
# characters json escapes with ensure_ascii=False: the quote, the backslash, controls
_NEEDS_ESCAPE = r'["\\\x00-\x1f]'
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def json_texts(cql_type: CqlType, array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The compact JSON text of every value of ``array`` (``null`` for a null), rendered
    as ``to_json`` renders a value of ``cql_type``."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if isinstance(cql_type, _INTEGERS) and pa.types.is_integer(array.type):
        return array.cast(pa.string()).fill_null(NULL)
    if isinstance(cql_type, BooleanType) and pa.types.is_boolean(array.type):
        return pc.if_else(array, "true", "false").fill_null(NULL)
    if cql_type.cql_name in _STRINGS and pa.types.is_string(array.type):
        quoted = pc.binary_join_element_wise('"', array, '"', "")
        escape = pc.match_substring_regex(array, _NEEDS_ESCAPE).fill_null(False)
        if pc.any(escape).as_py():
            encoded = [_ENCODER.encode(v) for v in array.filter(escape).to_pylist()]
            quoted = pc.replace_with_mask(quoted, escape, pa.array(encoded, pa.string()))
        return quoted.fill_null(NULL)
    if pa.types.is_timestamp(array.type):
        array = array.cast(pa.int64())  # the row path holds a timestamp as milliseconds
    return pa.array(
        [NULL if v is None else _ENCODER.encode(to_json(cql_type, v)) for v in array.to_pylist()],
        pa.string(),
    )


def attribute_texts(cql_type: CqlType, array: pa.Array | pa.ChunkedArray) -> pa.Array:
    """The compact JSON text of every value of ``array`` as a DynamoDB AttributeValue, as
    ``to_attribute_value`` renders a value of ``cql_type``; null where the value is null
    (DynamoDB images leave null cells out)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    valid = pc.is_valid(array)
    if isinstance(cql_type, _INTEGERS) and pa.types.is_integer(array.type):
        texts = pc.binary_join_element_wise('{"N":"', array.cast(pa.string()), '"}', "")
    elif isinstance(cql_type, BooleanType) and pa.types.is_boolean(array.type):
        texts = pc.if_else(array, '{"BOOL":true}', '{"BOOL":false}')
    elif cql_type.cql_name in _STRINGS and pa.types.is_string(array.type):
        texts = pc.binary_join_element_wise('{"S":', json_texts(cql_type, array), "}", "")
    else:
        if pa.types.is_timestamp(array.type):
            array = array.cast(pa.int64())  # the row path holds a timestamp as milliseconds
        texts = pa.array(
            [
                None if v is None else _ENCODER.encode(to_attribute_value(cql_type, v))
                for v in array.to_pylist()
            ],
            pa.string(),
        )
    return pc.if_else(valid, texts, pa.scalar(None, pa.string()))


def sparse_objects(names: Sequence[str], values: Sequence[pa.Array], count: int) -> pa.Array:
    """Per row, the JSON object of ``names`` (in this order) to the texts in ``values``,
    leaving out the names whose text is null."""
    if not names:
        return pa.array(["{}"] * count, pa.string())
    # each present member with a comma after it, then the last comma cut (every text ends
    # in a JSON value, never in a comma). Not null_handling="skip": pyarrow drops the rows
    # whose inputs are all null from its result
    members = [
        pc.binary_join_element_wise(_ENCODER.encode(name) + ":", texts, ",", "").fill_null("")
        for name, texts in zip(names, values, strict=True)
    ]
    inner = pc.utf8_rtrim(pc.binary_join_element_wise(*members, ""), ",")
    return pc.binary_join_element_wise("{", inner, "}", "")


def json_objects(names: Sequence[str], values: Sequence[pa.Array], count: int) -> pa.Array:
    """Per row, the JSON object of ``names`` (in this order) to the texts in ``values``."""
    if not names:
        return pa.array(["{}"] * count, pa.string())
    pieces: list[Any] = []
    for i, (name, texts) in enumerate(zip(names, values, strict=True)):
        pieces += [("{" if i == 0 else ",") + _ENCODER.encode(name) + ":", texts]
    pieces.append("}")
    return join(pieces, count)


def json_arrays(values: Sequence[pa.Array], count: int) -> pa.Array:
    """Per row, the JSON array of the texts in ``values``."""
    if not values:
        return pa.array(["[]"] * count, pa.string())
    pieces: list[Any] = ["["]
    for i, texts in enumerate(values):
        pieces += ([","] if i else []) + [texts]
    pieces.append("]")
    return join(pieces, count)


def join(pieces: Sequence[str | pa.Array], count: int) -> pa.Array:
    """Per row, the concatenation of ``pieces``: strings are the same in every row, arrays
    give one string per row."""
    merged: list[str | pa.Array] = []
    for piece in pieces:  # adjacent constants as one
        if isinstance(piece, str) and merged and isinstance(merged[-1], str):
            merged[-1] += piece
        else:
            merged.append(piece)
    if not any(isinstance(p, pa.Array) for p in merged):
        return pa.array(["".join(p for p in merged if isinstance(p, str))] * count, pa.string())
    args = [pa.scalar(p, pa.string()) if isinstance(p, str) else p for p in merged]
    return pc.binary_join_element_wise(*args, "")
