"""CQL names and types -> the physical names and Arrow types of every output's files.

A CQL name a user quotes may be any text: ``"SomeColumn"`` beside ``somecolumn``, ``"a b"``,
``"_bucket"``, ``"é"``. Delta Lake compares field names case-insensitively, and every output
keeps internal columns of its own (a log's ``_bucket``, ``_pk``, ``_seq``; a base table's
``bucket``, ``pk``, ``marker`` beside its ``k$...`` and ``v$...``), so a CQL name cannot be
a file's column name as it is. Tables of physical layout 2 (every table made since) name
each column and struct field by :func:`physical_name`, an injective encoding whose every
result is lowercase ASCII: names that are lowercase letters, digits, ``_`` and ``$`` (every
unquoted CQL name) stay as they are; any other character becomes ``%`` and the lowercase
hex of its UTF-8 bytes, as does a leading ``_`` (a log's internal columns start with one).
Two different CQL names therefore never meet, whatever their case, and :func:`cql_name`
reads a physical name back. Tables of layout 1 (made before; :data:`LEGACY`) keep their
names as they are; DDL admission refuses any change that such a table cannot hold.

Physical types are Delta types: ``time`` (``time64``) and ``timestamp`` are stored as their
integers (nanoseconds of the day, milliseconds since the epoch; Delta has no ``time`` and its
microsecond timestamps cannot hold the whole CQL range), UDT fields by physical name.

>>> physical_name("somecolumn"), physical_name("SomeColumn"), physical_name("_bucket")
('somecolumn', '%53ome%43olumn', '%5fbucket')
>>> cql_name("%53ome%43olumn")
'SomeColumn'
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.types.arrow import exact_type

if TYPE_CHECKING:
    from cqlcdc.schema.model import TableSchema
    from cqlcdc.types.base import CqlType

LEGACY = 1  # names as the user wrote them, log values in their plain Arrow types
CURRENT = 2  # physical_name and Delta types (this module)

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_$")
_ESCAPED = re.compile(r"%([0-9a-f]{2})")

# internal columns of a log output besides the log table's own columns; their leading
# underscore keeps them apart from every physical name of a CQL column
LOG_INTERNAL = (
    pa.field("_bucket", pa.int32(), nullable=False),
    pa.field("_pk", pa.binary(), nullable=False),
    pa.field("_seq", pa.int64(), nullable=False),
    pa.field("_expiry_s", pa.int64(), nullable=False),
)
# stored beside a log's rows, last: the 100 ns timestamp of each row's cdc$time, a number
# whose row-group statistics let a time window skip most of a log (the timeuuid text sorts
# by its low time bits first, so its own statistics cannot)
TICKS = "_ticks"


def physical_name(name: str) -> str:
    """The name a column or struct field named ``name`` in CQL has in files (see above)."""
    if name and name[0] != "_" and all(ch in _PLAIN for ch in name):
        return name
    if not name:
        return "%"  # no other name is a lone "%": every escape has two hex digits
    out = []
    for i, ch in enumerate(name):
        if ch in _PLAIN and (i or ch != "_"):
            out.append(ch)
        else:
            out.append("".join(f"%{b:02x}" for b in ch.encode("utf-8")))
    return "".join(out)


def cql_name(physical: str) -> str:
    """The CQL name :func:`physical_name` encoded as ``physical``."""
    if "%" not in physical:
        return physical
    if physical == "%":
        return ""
    data = bytearray()
    pos = 0
    for match in _ESCAPED.finditer(physical):
        data += physical[pos : match.start()].encode("ascii")
        data.append(int(match.group(1), 16))
        pos = match.end()
    data += physical[pos:].encode("ascii")
    return data.decode("utf-8")


def column_name(schema: TableSchema, name: str) -> str:
    """``name``'s physical name in ``schema``'s outputs (as is in a legacy table)."""
    return name if schema.physical_layout == LEGACY else physical_name(name)


def value_type(cql_type: CqlType, layout: int = CURRENT) -> pa.DataType:
    """The Delta-compatible Arrow type a value of ``cql_type`` has in a log output: its
    Arrow type with ``time`` and ``timestamp`` as integers and struct fields (UDT fields)
    by physical name, recursively. A legacy table keeps the plain Arrow type."""
    if layout == LEGACY:
        return cql_type.arrow_type()
    return _deltable(cql_type.arrow_type())


def _deltable(data_type: pa.DataType) -> pa.DataType:
    if pa.types.is_time64(data_type) or pa.types.is_timestamp(data_type):
        return pa.int64()
    if pa.types.is_map(data_type):
        return pa.map_(_deltable(data_type.key_type), _deltable(data_type.item_type))
    if pa.types.is_list(data_type):
        return pa.list_(_deltable(data_type.value_type))
    if pa.types.is_struct(data_type):
        return pa.struct(
            [pa.field(physical_name(f.name), _deltable(f.type), f.nullable) for f in data_type]
        )
    return data_type


def conform(array: pa.Array | pa.ChunkedArray, target: pa.DataType) -> pa.Array:
    """``array`` as ``target``, a type of the same shape whose struct fields may have other
    names (matched by position, as :func:`value_type` renames them) and whose leaves are
    casts of ``array``'s (``time64`` <-> ``int64``)."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type == target:
        return array
    source = array.type
    if pa.types.is_struct(target) and pa.types.is_struct(source):
        children = [conform(array.field(i), target.field(i).type) for i in range(target.num_fields)]
        return pa.StructArray.from_arrays(
            children, fields=list(target), mask=array.is_null() if array.null_count else None
        )
    if pa.types.is_map(target) and pa.types.is_map(source):
        keys = conform(array.keys, target.key_type)
        items = conform(array.items, target.item_type)
        offsets = _offsets(array)
        return pa.MapArray.from_arrays(offsets, keys, items, type=target)
    if pa.types.is_list(target) and (pa.types.is_list(source) or pa.types.is_large_list(source)):
        values = conform(array.flatten(), target.value_type)
        return pa.ListArray.from_arrays(_offsets(array), values, type=target)
    if _is_temporal(source) and pa.types.is_integer(target):
        return _temporal_integers(array).cast(target)
    return array.cast(target)


def python_values(cql_type: CqlType, array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The CQL values of a column stored as :func:`value_type` (or a legacy table's plain
    Arrow type), exactly: temporal values through their integers, struct fields by
    position."""
    if cql_type.arrow_as_is and array.type == cql_type.arrow_type():
        return list(array.to_pylist())
    logical = conform(array, exact_type(cql_type.arrow_type()))
    convert = cql_type.from_arrow
    return [None if v is None else convert(v) for v in logical.to_pylist()]


def _offsets(array: pa.Array) -> pa.Array:
    """The offsets of a list or map array with its nulls as null offsets (as
    ``ListArray.from_arrays`` takes them), starting at the array's own offset."""
    offsets = array.offsets
    if array.null_count:
        mask = pa.concat_arrays([array.is_null(), pa.array([False])])
        offsets = pc.if_else(mask, pa.nulls(len(offsets), offsets.type), offsets)
    return offsets


def _is_temporal(t: pa.DataType) -> bool:
    return bool(pa.types.is_time64(t) or pa.types.is_timestamp(t) or pa.types.is_date32(t))


def _temporal_integers(array: pa.Array) -> pa.Array:
    if pa.types.is_date32(array.type):
        return array.cast(pa.int32())
    if pa.types.is_timestamp(array.type) and array.type.unit != "ms":
        array = array.cast(pa.timestamp("ms", array.type.tz))
    return array.cast(pa.int64())


def case_collisions(schema: pa.Schema | pa.DataType, where: str = "") -> list[tuple[str, str]]:
    """Pairs of field names of ``schema`` (recursively) that Delta holds to be one name."""
    fields = list(schema)
    seen: dict[str, str] = {}
    out: list[tuple[str, str]] = []
    for f in fields:
        key = f.name.lower()
        if key in seen:
            out.append((f"{where}{seen[key]}", f"{where}{f.name}"))
        else:
            seen[key] = f.name
        t = f.type
        while pa.types.is_list(t) or pa.types.is_map(t):
            t = t.value_type if pa.types.is_list(t) else t.item_type
        if pa.types.is_struct(t):
            out.extend(case_collisions(t, f"{where}{f.name}."))
    return out


__all__ = [
    "CURRENT",
    "LEGACY",
    "LOG_INTERNAL",
    "TICKS",
    "case_collisions",
    "column_name",
    "conform",
    "cql_name",
    "physical_name",
    "python_values",
    "value_type",
]
