"""CQL types as the protocol's ``[option]``: the type ids of native_protocol_v4.spec 4.2.5.2.

Both ways: ``type_option`` writes a type into result and bind metadata; ``decode_type_option``
and ``parse_marshal_class`` read one back (an option does not say whether a collection or
UDT is frozen: nested ones come back frozen, as CQL requires, the outermost not).

>>> from cqlcdc.types import native_type
>>> type_option(native_type("int")).hex()
'0009'
>>> decode_type_option(bytes.fromhex("0020000d")).cql_name
'list<text>'
"""

from __future__ import annotations

import io
import re

from cassandra import protocol as p

from cqlcdc.errors import ProtocolError
from cqlcdc.server.notations import BodyReader, decode_body
from cqlcdc.types import (
    ListType,
    MapType,
    NativeType,
    SetType,
    TupleType,
    UserType,
    VectorType,
    native_type,
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


# -- the reverse: [option] and marshal class names -> CqlType ----------------------------

CUSTOM = 0x0000
MAX_NESTING = 32  # deeper options are hostile, not schemas
_BY_ID: dict[int, CqlType] = {code: native_type(name) for name, code in NATIVE_IDS.items()}
_BY_CLASS: dict[str, CqlType] = {cls: native_type(name) for name, cls in MARSHAL_CLASSES.items()}
_BY_CLASS["CounterColumnType"] = native_type("counter")
_CLASS_TOKEN = re.compile(r"\s*([^(),\s]+|[(),])\s*")


def decode_type_option(data: bytes) -> CqlType:
    """The type an encoded ``[option]`` describes.

    Raises:
        ProtocolError: an unknown type id or class name, a malformed or truncated option.
    """
    return decode_body(data, "type option", read_type_option)


def read_type_option(reader: BodyReader, depth: int = 0) -> CqlType:
    """Read one ``[option]`` (and the options nested in it) from ``reader``."""
    if depth > MAX_NESTING:
        raise ProtocolError(f"Type option nested deeper than {MAX_NESTING}")
    code = reader.read_short()
    native = _BY_ID.get(code)
    if native is not None:
        return native

    def inner() -> CqlType:
        return read_type_option(reader, depth + 1).frozen()

    if code in (LIST, SET):
        elem = inner()
        return ListType(elem) if code == LIST else SetType(elem)
    if code == MAP:
        return MapType(inner(), inner())
    if code == TUPLE:
        return TupleType(tuple(inner() for _ in range(reader.read_short())))
    if code == UDT:
        keyspace, name = reader.read_string(), reader.read_string()
        fields = [(reader.read_string(), inner()) for _ in range(reader.read_short())]
        return UserType(keyspace, name, [f for f, _ in fields], [t for _, t in fields])
    if code == CUSTOM:
        return parse_marshal_class(reader.read_string())
    raise ProtocolError(f"Unknown type option id {code:#06x}")


def parse_marshal_class(name: str) -> CqlType:
    """The type a Java marshal class name describes (custom options, vectors), e.g.
    ``org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType, 3)``.

    Raises:
        ProtocolError: a class this server has no type for, or a malformed name.
    """
    tokens: list[str] = _CLASS_TOKEN.findall(name)
    tree, end = _class_tree(tokens, 0, 0)
    if end != len(tokens):
        raise ProtocolError(f"Malformed type class name {name!r}")
    return _class_type(tree, name, 0)


_Tree = tuple[str, list["_Tree"]]


def _class_tree(tokens: list[str], i: int, depth: int) -> tuple[_Tree, int]:
    """``Name(arg, ...)`` as (name, args), from tokens[i]; returns the index after it."""
    if depth > MAX_NESTING or i >= len(tokens) or tokens[i] in "(),":
        raise ProtocolError("Malformed type class name")
    head, i = tokens[i], i + 1
    args: list[_Tree] = []
    if i < len(tokens) and tokens[i] == "(":
        i += 1
        while True:
            arg, i = _class_tree(tokens, i, depth + 1)
            args.append(arg)
            if i < len(tokens) and tokens[i] == ",":
                i += 1
                continue
            if i < len(tokens) and tokens[i] == ")":
                return (head, args), i + 1
            raise ProtocolError("Malformed type class name")
    return (head, args), i


def _class_type(tree: _Tree, name: str, depth: int) -> CqlType:
    head, args = tree
    short = head.removeprefix(_MARSHAL)

    def arg(i: int) -> CqlType:
        return _class_type(args[i], name, depth + 1).frozen()

    def count(n: int) -> None:
        if len(args) != n:
            raise ProtocolError(f"{short} takes {n} parameters in {name!r}")

    if not args and short in _BY_CLASS:
        return _BY_CLASS[short]
    if short in ("FrozenType", "ReversedType"):
        count(1)
        inner = _class_type(args[0], name, depth + 1)
        return inner.frozen() if short == "FrozenType" else inner
    if short in ("ListType", "SetType"):
        count(1)
        return ListType(arg(0)) if short == "ListType" else SetType(arg(0))
    if short == "MapType":
        count(2)
        return MapType(arg(0), arg(1))
    if short == "TupleType" and args:
        return TupleType(tuple(arg(i) for i in range(len(args))))
    if short == "VectorType":
        count(2)
        size = args[1][0]
        if not size.isdigit() or args[1][1] or int(size) < 1:
            raise ProtocolError(f"Invalid vector dimension {size!r} in {name!r}")
        return VectorType(arg(0), int(size))
    if short == "UserType" and len(args) >= 2:
        return _user_type(args, name, depth)
    raise ProtocolError(f"Unknown type class {head!r}")


def _user_type(args: list[_Tree], name: str, depth: int) -> CqlType:
    """``UserType(keyspace, hex name, hex field:type, ...)``."""
    try:
        keyspace, type_name = args[0][0], bytes.fromhex(args[1][0]).decode()
        names, types = [], []
        for field_name, field_args in args[2:]:
            hex_name, _, type_head = field_name.partition(":")
            names.append(bytes.fromhex(hex_name).decode())
            field_type = _class_type((type_head, field_args), name, depth + 1)
            types.append(field_type.frozen())
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError(f"Malformed user type class name {name!r}") from None
    return UserType(keyspace, type_name, names, types)
