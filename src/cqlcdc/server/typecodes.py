"""CQL types as the protocol's ``[option]``: the type ids of native_protocol_v4.spec 4.2.5.2.

>>> from cqlcdc.types import native_type
>>> type_option(native_type("int")).hex()
'0009'
"""

from __future__ import annotations

import io

from cassandra import protocol as p

from cqlcdc.types import (
    ListType,
    MapType,
    NativeType,
    SetType,
    TupleType,
    UserType,
    VectorType,
)
from cqlcdc.types.base import CqlType

NATIVE_IDS: dict[str, int] = {
    "ascii": 0x0001,
    "bigint": 0x0002,
    "blob": 0x0003,
    "boolean": 0x0004,
    "counter": 0x0005,
    "decimal": 0x0006,
    "double": 0x0007,
    "float": 0x0008,
    "int": 0x0009,
    "timestamp": 0x000B,
    "uuid": 0x000C,
    "text": 0x000D,
    "varint": 0x000E,
    "timeuuid": 0x000F,
    "inet": 0x0010,
    "date": 0x0011,
    "time": 0x0012,
    "smallint": 0x0013,
    "tinyint": 0x0014,
    "duration": 0x0015,
}
LIST, MAP, SET, UDT, TUPLE = 0x0020, 0x0021, 0x0022, 0x0030, 0x0031
# the Java class names a custom type option carries (vectors have no id of their own)
MARSHAL_CLASSES: dict[str, str] = {
    "ascii": "AsciiType",
    "bigint": "LongType",
    "blob": "BytesType",
    "boolean": "BooleanType",
    "counter": "CounterColumnType",
    "decimal": "DecimalType",
    "double": "DoubleType",
    "float": "FloatType",
    "int": "Int32Type",
    "timestamp": "TimestampType",
    "uuid": "UUIDType",
    "text": "UTF8Type",
    "varint": "IntegerType",
    "timeuuid": "TimeUUIDType",
    "inet": "InetAddressType",
    "date": "SimpleDateType",
    "time": "TimeType",
    "smallint": "ShortType",
    "tinyint": "ByteType",
    "duration": "DurationType",
}
_MARSHAL = "org.apache.cassandra.db.marshal."


def type_option(ctype: CqlType) -> bytes:
    """The ``[option]`` describing ``ctype`` in result and bind metadata."""
    buf = io.BytesIO()
    _write(buf, ctype)
    return buf.getvalue()


def _write(f: io.BytesIO, ctype: CqlType) -> None:
    if isinstance(ctype, NativeType):
        p.write_short(f, NATIVE_IDS[ctype.cql_name])
    elif isinstance(ctype, ListType | SetType):
        p.write_short(f, LIST if isinstance(ctype, ListType) else SET)
        _write(f, ctype.elem)
    elif isinstance(ctype, MapType):
        p.write_short(f, MAP)
        _write(f, ctype.key)
        _write(f, ctype.value)
    elif isinstance(ctype, TupleType):
        p.write_short(f, TUPLE)
        p.write_short(f, len(ctype.types))
        for t in ctype.types:
            _write(f, t)
    elif isinstance(ctype, UserType):
        p.write_short(f, UDT)
        p.write_string(f, ctype.keyspace)
        p.write_string(f, ctype.name)
        p.write_short(f, len(ctype.field_names))
        for name, t in zip(ctype.field_names, ctype.field_types, strict=True):
            p.write_string(f, name)
            _write(f, t)
    elif isinstance(ctype, VectorType):
        p.write_short(f, 0x0000)
        p.write_string(f, marshal_class(ctype))
    else:
        raise TypeError(f"no protocol type option for {ctype.cql_name}")


def marshal_class(ctype: CqlType) -> str:
    """The Java marshal class name of a type (how custom options and vectors are named)."""
    if isinstance(ctype, NativeType):
        return _MARSHAL + MARSHAL_CLASSES[ctype.cql_name]
    if isinstance(ctype, VectorType):
        return f"{_MARSHAL}VectorType({marshal_class(ctype.elem)}, {ctype.size})"
    if isinstance(ctype, ListType | SetType):
        kind = "ListType" if isinstance(ctype, ListType) else "SetType"
        inner = f"{_MARSHAL}{kind}({marshal_class(ctype.elem)})"
    elif isinstance(ctype, MapType):
        inner = f"{_MARSHAL}MapType({marshal_class(ctype.key)},{marshal_class(ctype.value)})"
    elif isinstance(ctype, TupleType):
        inner = f"{_MARSHAL}TupleType({','.join(marshal_class(t) for t in ctype.types)})"
    elif isinstance(ctype, UserType):
        fields = ",".join(
            f"{n.encode().hex()}:{marshal_class(t)}"
            for n, t in zip(ctype.field_names, ctype.field_types, strict=True)
        )
        inner = f"{_MARSHAL}UserType({ctype.keyspace},{ctype.name.encode().hex()},{fields})"
    else:
        raise TypeError(f"no marshal class for {ctype.cql_name}")
    frozen = getattr(ctype, "is_frozen", True)
    return f"{_MARSHAL}FrozenType({inner})" if frozen else inner
