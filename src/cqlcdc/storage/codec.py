"""Byte encodings of mutations (ingest payloads) and partition fragments (base table rows).

A versioned, self-describing binary layout, written and read by the functions here and
nowhere else: no class is found by name, so renaming or moving one never makes a data
directory unreadable, and a stored byte string can make the decoder build only the storage
values this layout names (a malformed one raises ``CorruptIngestFile``). Each record starts
with a format tag (``CQP1`` a partition fragment, ``CQW1`` an ingest payload); a change to
the layout is a new tag, and ``store.commit.FORMAT`` in the manifest names the layout a data
directory holds. Pickles (``CQM1``, format 1) are refused with a message that says so. The
golden fixtures in ``tests/unit/datadir`` pin the bytes.

The layout (big-endian; ``u32`` counts; ``str`` a u16 length and UTF-8; ``value`` a tagged
CQL value, below):

- *partition*: value pk (a tuple), value deletion (int or null), *row* static, u32 rows,
  then per row value ck (a tuple) and *row*; u32 range tombstones, each value start prefix,
  u8 start inclusive, value end prefix, u8 end inclusive, i64 timestamp.
- *row*: u8 has marker (then i64 timestamp, i32 TTL, i64 expiry second), value deletion,
  u32 columns, each str name, u8 kind and its data: ``c`` a cell (i64 timestamp, i32 TTL,
  i64 expiry second, value; null is a tombstone), ``k`` a counter (i64 timestamp, value),
  ``C`` a collection (value tombstone, u32 elements, each value key and a cell).
- *payload*: u8 kind: ``W`` a write (partition, u32 list operations, each str kind, value
  ck, str column, value timestamp, index, value, values, TTL, expiry; then value now_us,
  value seed), ``L`` a conditional write (a ``W`` body, then u32 statements, each str kind,
  value ck, u32 checks, each str column, str operator, value, type, value element, u8 has
  element, value field; then u8 static only; then value result columns), ``S`` an initial
  scan (str feed, value step, tx id, created ms), ``X`` a TTL sweep (value second), ``K`` a
  clock tick (value ms).
- *value*: one tag byte and its body: ``N`` null, ``E`` the empty value (``types.values.EMPTY``:
  no bytes, of a non-string type), ``F``/``T`` booleans, ``i`` an i64, ``I`` a
  longer integer (u32 length, signed bytes), ``f`` a double, ``s`` text (u32 length,
  UTF-8), ``b`` bytes (u32 length), ``D`` a decimal (as ``s``, its exact text), ``u`` a
  UUID (16 bytes), ``4``/``6`` an inet address (4/16 bytes), ``d`` a duration (3 i64), ``t``
  a tuple, ``z`` a set (elements ordered by their bytes, so equal sets encode alike), ``m`` a
  map (keys and values, in the map's order), ``U`` a UDT value (field names and values); the
  last four with a u32 count first.
- *type* (a condition's compared type): ``N`` none, ``n`` a native type (str name), ``l``/
  ``s`` a list/set (u8 frozen, type), ``m`` a map (u8 frozen, two types), ``t`` a tuple
  (u32 count, types), ``v`` a vector (u32 size, type), ``u`` a UDT (u8 frozen, str
  keyspace, str name, u32 fields, each str name and type).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from ipaddress import IPv4Address, IPv6Address
from typing import Any
from uuid import UUID

from cqlcdc.errors import CorruptIngestFile
from cqlcdc.storage.cells import Cell, CollectionCells, CounterCell, RowMarker
from cqlcdc.storage.conditions import Conditional, ConditionCheck, StatementCondition
from cqlcdc.storage.keys import Bound
from cqlcdc.storage.mutations import ListOp
from cqlcdc.storage.partition import ColumnData, Partition, RangeTombstone, Row
from cqlcdc.types.base import CqlType
from cqlcdc.types.collections import ListType, MapType, SetType, VectorType
from cqlcdc.types.resolve import NATIVE_TYPES
from cqlcdc.types.udt import TupleType, UserType
from cqlcdc.types.values import EMPTY, Duration, EmptyValue, MapValue, UdtValue

PARTITION_TAG = b"CQP1"
PAYLOAD_TAG = b"CQW1"
PICKLE_TAG = b"CQM1"  # format 1 (pickles): refused


@dataclass(frozen=True, slots=True)
class WritePayload:
    """What an ingest record carries: the mutation and the session-fixed inputs of the write.

    ``now_us`` is the session clock at the write (TTL expiry, list keys); ``seed`` fixes
    every random bit the pipeline needs (``cdc$time``).
    """

    partition: Partition
    list_ops: tuple[ListOp, ...]
    now_us: int
    seed: int


@dataclass(frozen=True, slots=True)
class ConditionalWrite:
    """A lightweight transaction's record: the write, applied only if ``conditional``
    holds against the partition as the earlier records left it (``storage.conditions``)."""

    write: WritePayload
    conditional: Conditional


@dataclass(frozen=True, slots=True)
class ScanRequest:
    """An initial-scan record: export this partition to changefeed ``feed`` (once).

    ``step``/``tx_id`` are the virtual timestamp of the feed's snapshot; ``created_ms`` the
    time the feed was added.
    """

    feed: str
    step: int
    tx_id: int
    created_ms: int


@dataclass(frozen=True, slots=True)
class SweepRequest:
    """A TTL sweep record: report what expired in this partition at second ``at_s``."""

    at_s: int


@dataclass(frozen=True, slots=True)
class TickRequest:
    """A clock tick for an idle table: lets feeds emit barriers when no writes come.

    Its record has an empty partition key; ``now_ms`` is the session clock.
    """

    now_ms: int


Payload = WritePayload | ConditionalWrite | ScanRequest | SweepRequest | TickRequest

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_U16 = struct.Struct(">H")
_F64 = struct.Struct(">d")
_CELL = struct.Struct(">qiq")  # timestamp, TTL, expiry second
_DURATION = struct.Struct(">qqq")
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1

# ----------------------------------------------------------------------------------------
# encoding


def _text(out: bytearray, text: str) -> None:
    raw = text.encode()
    out += _U16.pack(len(raw))
    out += raw


def _int(out: bytearray, v: int) -> None:
    if _I64_MIN <= v <= _I64_MAX:
        out += b"i"
        out += _I64.pack(v)
    else:
        raw = v.to_bytes((v.bit_length() + 8) // 8, "big", signed=True)
        out += b"I"
        out += _U32.pack(len(raw))
        out += raw


def _sized(tag: bytes, raw: bytes, out: bytearray) -> None:
    out += tag
    out += _U32.pack(len(raw))
    out += raw


def _items(tag: bytes, items: Any, out: bytearray) -> None:
    out += tag
    out += _U32.pack(len(items))
    for item in items:
        _value(out, item)


def _set(out: bytearray, items: frozenset[Any]) -> None:
    parts = []
    for item in items:
        one = bytearray()
        _value(one, item)
        parts.append(bytes(one))
    out += b"z"
    out += _U32.pack(len(parts))
    for part in sorted(parts):
        out += part


def _map(out: bytearray, value: MapValue) -> None:
    out += b"m"
    out += _U32.pack(len(value))
    for k, v in value.items():
        _value(out, k)
        _value(out, v)


def _udt(out: bytearray, value: UdtValue) -> None:
    out += b"U"
    out += _U32.pack(len(value))
    for name, v in zip(value.field_names, value.values_tuple, strict=True):
        _text(out, name)
        _value(out, v)


def _none(out: bytearray, _: None) -> None:
    out += b"N"


def _bool(out: bytearray, v: bool) -> None:
    out += b"T" if v else b"F"


def _float(out: bytearray, v: float) -> None:
    out += b"f"
    out += _F64.pack(v)


def _duration(out: bytearray, v: Duration) -> None:
    out += b"d"
    out += _DURATION.pack(v.months, v.days, v.nanoseconds)


def _fixed(tag: bytes) -> Callable[[bytearray, Any], None]:
    def write(out: bytearray, v: Any) -> None:
        out += tag
        out += v.packed if isinstance(v, IPv4Address | IPv6Address) else v.bytes

    return write


_ENCODERS: dict[type, Callable[[bytearray, Any], None]] = {
    type(None): _none,
    EmptyValue: lambda out, _: out.extend(b"E"),
    bool: _bool,
    int: _int,
    float: _float,
    str: lambda out, v: _sized(b"s", v.encode(), out),
    bytes: lambda out, v: _sized(b"b", v, out),
    Decimal: lambda out, v: _sized(b"D", str(v).encode(), out),
    UUID: _fixed(b"u"),
    IPv4Address: _fixed(b"4"),
    IPv6Address: _fixed(b"6"),
    Duration: _duration,
    tuple: lambda out, v: _items(b"t", v, out),
    frozenset: _set,
    MapValue: _map,
    UdtValue: _udt,
}


def _value(out: bytearray, v: Any) -> None:
    encode = _ENCODERS.get(type(v))
    if encode is None:
        raise TypeError(f"a {type(v).__name__} is not a CQL value the storage format holds")
    encode(out, v)


def _cell(out: bytearray, cell: Cell) -> None:
    out += _CELL.pack(cell.timestamp, cell.ttl_s, cell.expiry_s)
    _value(out, cell.value)


def _column(out: bytearray, data: ColumnData) -> None:
    if isinstance(data, Cell):
        out += b"c"
        _cell(out, data)
    elif isinstance(data, CounterCell):
        out += b"k"
        out += _I64.pack(data.timestamp)
        _value(out, data.value)
    else:
        out += b"C"
        _value(out, data.tombstone)
        out += _U32.pack(len(data.elements))
        for key, cell in data.elements.items():
            _value(out, key)
            _cell(out, cell)


def _row(out: bytearray, row: Row) -> None:
    marker = row.marker
    if marker is None:
        out += b"\x00"
    else:
        out += b"\x01"
        out += _CELL.pack(marker.timestamp, marker.ttl_s, marker.expiry_s)
    _value(out, row.deletion)
    out += _U32.pack(len(row.cells))
    for name, data in row.cells.items():
        _text(out, name)
        _column(out, data)


def _partition(out: bytearray, part: Partition) -> None:
    _value(out, tuple(part.pk))
    _value(out, part.deletion)
    _row(out, part.static)
    out += _U32.pack(len(part.rows))
    for ck, row in part.rows.items():
        _value(out, ck)
        _row(out, row)
    out += _U32.pack(len(part.range_tombstones))
    for rt in part.range_tombstones:
        _value(out, rt.start.prefix)
        out += b"\x01" if rt.start.inclusive else b"\x00"
        _value(out, rt.end.prefix)
        out += b"\x01" if rt.end.inclusive else b"\x00"
        out += _I64.pack(rt.timestamp)


def _type(out: bytearray, t: CqlType | None) -> None:
    if t is None:
        out += b"N"
    elif isinstance(t, ListType | SetType):
        out += b"l" if isinstance(t, ListType) else b"s"
        out += b"\x01" if t.is_frozen else b"\x00"
        _type(out, t.elem)
    elif isinstance(t, MapType):
        out += b"m"
        out += b"\x01" if t.is_frozen else b"\x00"
        _type(out, t.key)
        _type(out, t.value)
    elif isinstance(t, TupleType):
        out += b"t"
        out += _U32.pack(len(t.types))
        for inner in t.types:
            _type(out, inner)
    elif isinstance(t, VectorType):
        out += b"v"
        out += _U32.pack(t.size)
        _type(out, t.elem)
    elif isinstance(t, UserType):
        out += b"u"
        out += b"\x01" if t.is_frozen else b"\x00"
        _text(out, t.keyspace)
        _text(out, t.name)
        out += _U32.pack(len(t.field_names))
        for name, inner in zip(t.field_names, t.field_types, strict=True):
            _text(out, name)
            _type(out, inner)
    else:
        if NATIVE_TYPES.get(t.cql_name) != t:
            raise TypeError(f"type {t.cql_name} has no storage encoding")
        out += b"n"
        _text(out, t.cql_name)


def _write(out: bytearray, write: WritePayload) -> None:
    _partition(out, write.partition)
    out += _U32.pack(len(write.list_ops))
    for op in write.list_ops:
        _text(out, op.kind)
        _value(out, op.ck)
        _text(out, op.column)
        for v in (op.timestamp, op.index, op.value, op.values, op.ttl_s, op.expiry_s):
            _value(out, v)
    _value(out, write.now_us)
    _value(out, write.seed)


def _conditional(out: bytearray, cond: Conditional) -> None:
    out += _U32.pack(len(cond.statements))
    for stmt in cond.statements:
        _text(out, stmt.kind)
        _value(out, stmt.ck)
        out += _U32.pack(len(stmt.checks))
        for check in stmt.checks:
            _text(out, check.column)
            _text(out, check.operator)
            _value(out, check.value)
            _type(out, check.ctype)
            _value(out, check.element)
            out += b"\x01" if check.has_element else b"\x00"
            _value(out, check.field)
        out += b"\x01" if stmt.static_only else b"\x00"
    _value(out, cond.result_columns)


def encode_payload(payload: Payload) -> bytes:
    out = bytearray(PAYLOAD_TAG)
    if isinstance(payload, WritePayload):
        out += b"W"
        _write(out, payload)
    elif isinstance(payload, ConditionalWrite):
        out += b"L"
        _write(out, payload.write)
        _conditional(out, payload.conditional)
    elif isinstance(payload, ScanRequest):
        out += b"S"
        _text(out, payload.feed)
        for v in (payload.step, payload.tx_id, payload.created_ms):
            _value(out, v)
    elif isinstance(payload, SweepRequest):
        out += b"X"
        _value(out, payload.at_s)
    else:
        out += b"K"
        _value(out, payload.now_ms)
    return bytes(out)


def encode_fragment(part: Partition) -> bytes:
    out = bytearray(PARTITION_TAG)
    _partition(out, part)
    return bytes(out)


# ----------------------------------------------------------------------------------------
# decoding: a _Reader walks one record; every malformed record ends in CorruptIngestFile


class _Malformed(Exception):
    pass


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        start = self.pos
        end = start + n
        if n < 0 or end > len(self.data):
            raise _Malformed(f"a field runs past the end (byte {start})")
        self.pos = end
        return self.data[start:end]

    def byte(self) -> int:
        pos = self.pos
        self.pos = pos + 1
        return self.data[pos]  # IndexError past the end: malformed

    def flag(self) -> bool:
        b = self.byte()
        if b > 1:
            raise _Malformed(f"byte {self.pos - 1} is {b}, not a flag")
        return b == 1

    def count(self) -> int:
        pos = self.pos
        (n,) = _U32.unpack_from(self.data, pos)  # struct.error past the end: malformed
        self.pos = pos = pos + 4
        if n > len(self.data) - pos:  # every item takes at least a byte
            raise _Malformed(f"a count of {n} at byte {pos - 4} exceeds the record")
        return int(n)

    def text(self) -> str:
        (n,) = _U16.unpack_from(self.data, self.pos)
        self.pos += 2
        return self.take(n).decode()

    def int64(self) -> int:
        pos = self.pos
        (v,) = _I64.unpack_from(self.data, pos)
        self.pos = pos + 8
        return int(v)

    def cell_head(self) -> tuple[int, int, int]:
        pos = self.pos
        head: tuple[int, int, int] = _CELL.unpack_from(self.data, pos)
        self.pos = pos + 20
        return head

    def value(self) -> Any:
        data = self.data
        pos = self.pos
        tag = data[pos]
        # the common tags inline (a call less per value)
        if tag == 0x69:  # i
            (v,) = _I64.unpack_from(data, pos + 1)
            self.pos = pos + 9
            return v
        if tag == 0x4E:  # N
            self.pos = pos + 1
            return None
        if tag == 0x74:  # t: keys are tuples
            (n,) = _U32.unpack_from(data, pos + 1)
            self.pos = pos + 5
            if n > len(data) - pos - 5:
                raise _Malformed(f"a count of {n} at byte {pos + 1} exceeds the record")
            return tuple([self.value() for _ in range(n)])
        if tag == 0x73:  # s
            (n,) = _U32.unpack_from(data, pos + 1)
            start = pos + 5
            end = start + n
            if end > len(data):
                raise _Malformed(f"a field runs past the end (byte {start})")
            self.pos = end
            return data[start:end].decode()
        self.pos = pos + 1
        read = _READERS.get(tag)
        if read is None:
            raise _Malformed(f"byte {pos} is not a value tag ({tag:#04x})")
        return read(self)

    def typed(self, kind: type | tuple[type, ...], what: str) -> Any:
        v = self.value()
        if not isinstance(v, kind):
            raise _Malformed(f"{what} is a {type(v).__name__}")
        return v

    def optional_int(self, what: str) -> int | None:
        v = self.value()
        if v is not None and type(v) is not int:
            raise _Malformed(f"{what} is a {type(v).__name__}")
        return v


def _read_sized(r: _Reader) -> bytes:
    (n,) = _U32.unpack(r.take(4))
    return r.take(n)


def _read_big_int(r: _Reader) -> int:
    return int.from_bytes(_read_sized(r), "big", signed=True)


def _read_decimal(r: _Reader) -> Decimal:
    return Decimal(_read_sized(r).decode("ascii"))


def _read_duration(r: _Reader) -> Duration:
    months, days, nanos = _DURATION.unpack(r.take(24))
    return Duration(months, days, nanos)


def _read_tuple(r: _Reader) -> tuple[Any, ...]:
    return tuple([r.value() for _ in range(r.count())])


def _read_set(r: _Reader) -> frozenset[Any]:
    return frozenset([r.value() for _ in range(r.count())])


def _read_map(r: _Reader) -> MapValue:
    return MapValue([(r.value(), r.value()) for _ in range(r.count())])


def _read_udt(r: _Reader) -> UdtValue:
    names: list[str] = []
    values: list[Any] = []
    for _ in range(r.count()):
        names.append(r.text())
        values.append(r.value())
    return UdtValue(names, values)


_READERS: dict[int, Callable[[_Reader], Any]] = {
    ord("N"): lambda r: None,
    ord("E"): lambda r: EMPTY,
    ord("F"): lambda r: False,
    ord("T"): lambda r: True,
    ord("i"): _Reader.int64,
    ord("I"): _read_big_int,
    ord("f"): lambda r: _F64.unpack(r.take(8))[0],
    ord("s"): lambda r: _read_sized(r).decode(),
    ord("b"): _read_sized,
    ord("D"): _read_decimal,
    ord("u"): lambda r: UUID(bytes=r.take(16)),
    ord("4"): lambda r: IPv4Address(r.take(4)),
    ord("6"): lambda r: IPv6Address(r.take(16)),
    ord("d"): _read_duration,
    ord("t"): _read_tuple,
    ord("z"): _read_set,
    ord("m"): _read_map,
    ord("U"): _read_udt,
}


def _read_cell(r: _Reader) -> Cell:
    ts, ttl, expiry = r.cell_head()
    value = r.value()
    return Cell(ts, value, ttl, expiry)


def _read_column(r: _Reader) -> ColumnData:
    kind = r.byte()
    if kind == 0x63:  # c
        return _read_cell(r)
    if kind == 0x6B:  # k
        ts = r.int64()
        return CounterCell(ts, r.typed(int, "a counter's value"))
    if kind == 0x43:  # C
        tombstone = r.optional_int("a collection tombstone")
        elements: dict[Any, Cell] = {}
        for _ in range(r.count()):
            key = r.value()
            elements[key] = _read_cell(r)
        return CollectionCells(tombstone, elements)
    raise _Malformed(f"byte {r.pos - 1} is not a column kind ({kind:#04x})")


def _read_row(r: _Reader) -> Row:
    # the hot loop of every state read: the marker and atomic cells read inline
    data = r.data
    pos = r.pos
    flag = data[pos]
    if flag == 1:
        marker: RowMarker | None = RowMarker(*_CELL.unpack_from(data, pos + 1))
        r.pos = pos + 21
    elif flag == 0:
        marker = None
        r.pos = pos + 1
    else:
        raise _Malformed(f"byte {pos} is {flag}, not a flag")
    deletion = r.optional_int("a row tombstone")
    cells: dict[str, ColumnData] = {}
    size = len(data)
    for _ in range(r.count()):
        pos = r.pos
        (n,) = _U16.unpack_from(data, pos)
        end = pos + 2 + n
        if end >= size:
            raise _Malformed(f"a column name runs past the end (byte {pos})")
        name = data[pos + 2 : end].decode()
        if data[end] == 0x63:  # c: an atomic cell
            ts, ttl, expiry = _CELL.unpack_from(data, end + 1)
            r.pos = end + 21
            cells[name] = Cell(ts, r.value(), ttl, expiry)
        else:
            r.pos = end
            cells[name] = _read_column(r)
    return Row(marker, deletion, cells)


def _read_bound(r: _Reader) -> Bound:
    prefix = r.typed(tuple, "a range tombstone bound")
    return Bound(prefix, r.flag())


def _read_partition(r: _Reader) -> Partition:
    pk = r.typed(tuple, "a partition key")
    deletion = r.optional_int("a partition tombstone")
    static = _read_row(r)
    rows: dict[tuple[Any, ...], Row] = {}
    for _ in range(r.count()):
        ck = r.value()
        if type(ck) is not tuple:
            raise _Malformed(f"a clustering key is a {type(ck).__name__}")
        rows[ck] = _read_row(r)
    tombstones = []
    for _ in range(r.count()):
        start = _read_bound(r)
        end = _read_bound(r)
        tombstones.append(RangeTombstone(start, end, r.int64()))
    return Partition(pk, deletion, static, rows, tombstones)


def _read_type(r: _Reader) -> CqlType | None:
    tag = r.byte()
    if tag == 0x4E:  # N
        return None
    if tag == 0x6E:  # n
        name = r.text()
        native = NATIVE_TYPES.get(name)
        if native is None:
            raise _Malformed(f"{name!r} is not a native type")
        return native
    if tag in (0x6C, 0x73):  # l, s
        frozen = r.flag()
        elem = _required_type(r)
        return ListType(elem, frozen) if tag == 0x6C else SetType(elem, frozen)
    if tag == 0x6D:  # m
        frozen = r.flag()
        key = _required_type(r)
        return MapType(key, _required_type(r), frozen)
    if tag == 0x74:  # t
        return TupleType(tuple(_required_type(r) for _ in range(r.count())))
    if tag == 0x76:  # v
        (size,) = _U32.unpack(r.take(4))
        return VectorType(_required_type(r), size)
    if tag == 0x75:  # u
        frozen = r.flag()
        keyspace = r.text()
        name = r.text()
        names: list[str] = []
        types: list[CqlType] = []
        for _ in range(r.count()):
            names.append(r.text())
            types.append(_required_type(r))
        return UserType(keyspace, name, names, types, frozen)
    raise _Malformed(f"byte {r.pos - 1} is not a type tag ({tag:#04x})")


def _required_type(r: _Reader) -> CqlType:
    t = _read_type(r)
    if t is None:
        raise _Malformed(f"a type is missing before byte {r.pos}")
    return t


def _read_write(r: _Reader) -> WritePayload:
    partition = _read_partition(r)
    ops = []
    for _ in range(r.count()):
        kind = r.text()
        if kind not in ("set_index", "delete_index", "discard", "add", "sub"):
            raise _Malformed(f"{kind!r} is not a list operation")
        ck = r.value()
        if ck is not None and not isinstance(ck, tuple):
            raise _Malformed(f"a list operation's clustering key is a {type(ck).__name__}")
        column = r.text()
        ts = r.typed(int, "a list operation's timestamp")
        index = r.typed(int, "a list index")
        value = r.value()
        values = r.typed(tuple, "a list operation's values")
        ttl = r.typed(int, "a TTL")
        expiry = r.typed(int, "an expiry")
        ops.append(ListOp(kind, ck, column, ts, index, value, values, ttl, expiry))  # type: ignore[arg-type]
    now_us = r.typed(int, "the write's clock")
    seed = r.typed(int, "the write's seed")
    return WritePayload(partition, tuple(ops), now_us, seed)


def _read_conditional(r: _Reader) -> Conditional:
    statements = []
    for _ in range(r.count()):
        kind = r.text()
        if kind not in ("exists", "not_exists", "columns", "none"):
            raise _Malformed(f"{kind!r} is not a condition kind")
        ck = r.value()
        if ck is not None and not isinstance(ck, tuple):
            raise _Malformed(f"a condition's clustering key is a {type(ck).__name__}")
        checks = []
        for _ in range(r.count()):
            column = r.text()
            operator = r.text()
            value = r.value()
            ctype = _read_type(r)
            element = r.value()
            has_element = r.flag()
            field = r.value()
            if field is not None and not isinstance(field, str):
                raise _Malformed(f"a condition's field is a {type(field).__name__}")
            checks.append(
                ConditionCheck(column, operator, value, ctype, element, has_element, field)
            )
        statements.append(StatementCondition(kind, ck, tuple(checks), r.flag()))  # type: ignore[arg-type]
    columns = r.typed(tuple, "the result columns")
    if not all(isinstance(c, str) for c in columns):
        raise _Malformed("a result column is not a name")
    return Conditional(tuple(statements), columns)


def _read_payload(r: _Reader) -> Payload:
    kind = r.byte()
    if kind == 0x57:  # W
        return _read_write(r)
    if kind == 0x4C:  # L
        write = _read_write(r)
        return ConditionalWrite(write, _read_conditional(r))
    if kind == 0x53:  # S
        feed = r.text()
        step = r.typed(int, "a scan's step")
        tx_id = r.typed(int, "a scan's tx id")
        return ScanRequest(feed, step, tx_id, r.typed(int, "a scan's creation time"))
    if kind == 0x58:  # X
        return SweepRequest(r.typed(int, "a sweep's second"))
    if kind == 0x4B:  # K
        return TickRequest(r.typed(int, "a tick's clock"))
    raise _Malformed(f"{kind:#04x} is not a payload kind")


def _decode(data: bytes, tag: bytes, what: str, read: Callable[[_Reader], Any]) -> Any:
    if data.startswith(PICKLE_TAG):
        raise CorruptIngestFile(
            f"{what} is in format 1 (a pickle, written by an older cqlcdc), which this "
            f"version does not read"
        )
    if not data.startswith(tag):
        raise CorruptIngestFile(f"{what} has an unknown format tag {bytes(data[:4])!r}")
    r = _Reader(data, len(tag))
    try:
        obj = read(r)
    except CorruptIngestFile:
        raise
    except Exception as err:  # any malformed record: truncated, a wrong tag, bad UTF-8...
        raise CorruptIngestFile(f"{what} cannot be decoded: {type(err).__name__}: {err}") from err
    if r.pos != len(data):
        raise CorruptIngestFile(f"{what} cannot be decoded: {len(data) - r.pos} bytes left over")
    return obj


def decode_payload(data: bytes) -> Payload:
    payload: Payload = _decode(bytes(data), PAYLOAD_TAG, "an ingest payload", _read_payload)
    return payload


def decode_fragment(data: bytes) -> Partition:
    """A base row's residual partition (``cqlcdc.storage.base_rows``)."""
    part: Partition = _decode(bytes(data), PARTITION_TAG, "a base fragment", _read_partition)
    return part
