"""Base state as typed rows: the layout of a base table's data files (data-directory format 3).

Every write (a mutation, one ``Partition``) becomes base rows of one layout per table:

- ``bucket``, ``pk`` (the serialized partition key), ``token``, ``seq``: as every output has.
- One *typed row* per clustering row the write touches (each ``<name>`` below is the
  column's physical name, ``schema.physical``): the clustering key as columns
  ``k$<name>``, the row marker (``marker``: write time, TTL, expiry second), the row tombstone
  (``deletion``: its timestamp) and one column ``v$<name>$<type>`` per regular column: for an
  atomic column a struct of the value, write time, TTL and expiry second (null where the
  write did not touch the column; a null ``value`` is a cell tombstone), for a non-frozen
  collection or UDT its collection tombstone and its element cells (``cells``: per element
  its key, value, write time, TTL and expiry second; a list's keys are its timeuuids, a
  UDT's the field's index, a set's values are true).
- One *static row* (``static`` true, every ``k$`` null) where the write touches the static
  row or deletes the partition (``partition_deletion``), with the static columns' cells.
- Beside them, at most one *residual row* (``fragment``, a ``CQP1`` partition of
  ``storage.codec``, every typed column null) holding what has no typed column: range
  tombstones, counters, cells of columns the table no longer has, and what holds the
  empty value (``types.values.EMPTY``: a cell of it, or a row whose clustering key has it),
  which no typed column can tell from an ordinary value.

Values of native types are stored in their Arrow type (``CqlType.arrow_type``), values of
frozen collections, tuples and UDTs as their native encoding (a binary column), so a
column's Arrow type never changes under ``ALTER TYPE``. The type is part of a value
column's name because a column dropped and added again may come back with another type; the
old column's cells stay under the old name, which no current column reads (they are hidden,
as ScyllaDB hides a dropped column's data).

The typed part is what the column-wise state reads (``storage.bulk_state``: merges, images,
compaction without a Python object per cell); :func:`partitions` turns base rows back into
``Partition`` objects for the paths that need them. The last-write-wins merge is
commutative, so splitting a write into rows changes nothing it merges to.

>>> from cqlcdc.storage.base_rows import value_column_name
>>> value_column_name("v", "int")
'v$v$int'
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.schema.model import Column, TableSchema
from cqlcdc.schema.physical import column_name
from cqlcdc.storage.cells import Cell, CollectionCells, RowMarker
from cqlcdc.storage.codec import decode_fragment, encode_fragment
from cqlcdc.storage.partition import Partition, Row
from cqlcdc.storage.token import deserialize_partition_key
from cqlcdc.types.arrow import NullColumns, exact_type, none_array, to_pylist
from cqlcdc.types.base import CqlType
from cqlcdc.types.collections import ListType, MapType, SetType
from cqlcdc.types.native import NativeType
from cqlcdc.types.udt import UserType
from cqlcdc.types.values import EMPTY

BUCKET, PK, TOKEN, SEQ = "bucket", "pk", "token", "seq"
FRAGMENT = "fragment"  # the residual row's partition (``CQP1``); null in a typed row
MARKER = "marker"
DELETION = "deletion"
STATIC = "static"
PARTITION_DELETION = "partition_deletion"
KEY_PREFIX = "k$"
VALUE_PREFIX = "v$"

MARKER_TYPE = pa.struct(
    [
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("ttl", pa.int32(), nullable=False),
        pa.field("expiry", pa.int64(), nullable=False),
    ]
)

FIXED_FIELDS = (
    pa.field(BUCKET, pa.int32(), nullable=False),
    pa.field(PK, pa.binary(), nullable=False),
    pa.field(TOKEN, pa.int64(), nullable=False),
    pa.field(SEQ, pa.int64(), nullable=False),
    pa.field(FRAGMENT, pa.binary()),
    pa.field(MARKER, MARKER_TYPE),
    pa.field(DELETION, pa.int64()),
    pa.field(STATIC, pa.bool_(), nullable=False),
    pa.field(PARTITION_DELETION, pa.int64()),
)


def cell_type(value_type: pa.DataType) -> pa.StructType:
    """The struct of one cell whose value has Arrow type ``value_type``."""
    return pa.struct(
        [
            pa.field("value", value_type),
            pa.field("ts", pa.int64(), nullable=False),
            pa.field("ttl", pa.int32(), nullable=False),
            pa.field("expiry", pa.int64(), nullable=False),
        ]
    )


def is_typed(col: Column) -> bool:
    """Whether a column's cells go into a typed column: every regular and static column but
    counters (they merge by addition: compaction cannot drop what a newer cell beats)."""
    return col.kind in ("regular", "static") and not col.type.is_counter


def element_types(t: CqlType) -> tuple[CqlType | None, CqlType | None]:
    """The key and value types of a non-frozen collection's or UDT's element cells (None: a
    list's timeuuid key, kept as its 16 bytes; a UDT field's value, kept encoded; a set's
    value, a flag)."""
    if isinstance(t, MapType):
        return t.key, t.value
    if isinstance(t, SetType):
        return t.elem, None
    if isinstance(t, ListType):
        return None, t.elem
    return None, None


def _element_types(t: CqlType) -> tuple[pa.DataType, pa.DataType, pa.DataType, pa.DataType]:
    """(key build, key storage, value build, value storage) Arrow types of ``t``'s elements."""
    key, value = element_types(t)
    if isinstance(t, UserType):
        return pa.int32(), pa.int32(), pa.binary(), pa.binary()
    if isinstance(t, SetType):
        assert key is not None
        return build_type(key), storage_type(key), pa.bool_(), pa.bool_()
    assert value is not None
    if key is None:  # a list: timeuuid keys
        return pa.binary(), pa.binary(), build_type(value), storage_type(value)
    return build_type(key), storage_type(key), build_type(value), storage_type(value)


def collection_type(key: pa.DataType, value: pa.DataType) -> pa.StructType:
    """The struct of a non-frozen collection's or UDT's state in one write or row."""
    element = pa.struct(
        [
            pa.field("key", key, nullable=False),
            pa.field("value", value),
            pa.field("ts", pa.int64(), nullable=False),
            pa.field("ttl", pa.int32(), nullable=False),
            pa.field("expiry", pa.int64(), nullable=False),
        ]
    )
    return pa.struct([pa.field("tombstone", pa.int64()), pa.field("cells", pa.list_(element))])


def _natively_typed(t: CqlType) -> bool:
    return isinstance(t, NativeType)


def type_tag(t: CqlType) -> str:
    """The part of a value column's name that names its type: the type's name for a native
    type, else ``n`` and a digest of the type's text (its values are stored encoded)."""
    if _natively_typed(t):
        return t.cql_name
    return "n" + hashlib.sha1(t.cql_name.encode()).hexdigest()[:10]


def value_column_name(name: str, tag: str) -> str:
    return f"{VALUE_PREFIX}{name}${tag}"


def key_column_name(name: str) -> str:
    return f"{KEY_PREFIX}{name}"


def storage_type(t: CqlType) -> pa.DataType:
    """The Arrow type a value of ``t`` is stored in: its Arrow type with temporal types as
    their integers (``time64`` has no Delta type), or the native encoding."""
    return exact_type(t.arrow_type()) if _natively_typed(t) else pa.binary()


def build_type(t: CqlType) -> pa.DataType:
    """The Arrow type :func:`to_storage` values are built in (then cast to storage)."""
    return t.arrow_type() if _natively_typed(t) else pa.binary()


def to_storage(t: CqlType) -> Callable[[Any], Any]:
    """Python value -> what ``pa.array(..., build_type(t))`` takes."""
    if not _natively_typed(t):
        return t.serialize
    if t.arrow_as_is:
        return lambda v: v
    return t.to_arrow


def from_storage(t: CqlType) -> Callable[[Any], Any]:
    """Inverse of :func:`to_storage` (over ``types.arrow.to_pylist`` output)."""
    if not _natively_typed(t):
        return t.deserialize
    return t.from_arrow


@dataclass(frozen=True, slots=True)
class Layout:
    """The base-row layout of one table schema: its key and value columns."""

    keys: tuple[tuple[Column, str], ...]  # clustering column, its column name
    values: tuple[tuple[Column, str], ...]  # atomic regular or static column, its column
    collections: tuple[tuple[Column, str], ...]  # non-frozen collection or UDT, its column
    arrow: pa.Schema

    @property
    def by_name(self) -> dict[str, str]:
        return {c.name: f for c, f in self.values}


@lru_cache(maxsize=256)
def layout(schema: TableSchema) -> Layout:
    keys = tuple((c, key_column_name(column_name(schema, c.name))) for c in schema.clustering_key)
    typed = [
        (c, value_column_name(column_name(schema, c.name), type_tag(c.type)))
        for c in schema.columns
        if is_typed(c)
    ]
    values = tuple((c, f) for c, f in typed if not c.type.multicell)
    collections = tuple((c, f) for c, f in typed if c.type.multicell)
    fields = [
        *FIXED_FIELDS,
        *(pa.field(f, storage_type(c.type)) for c, f in keys),
        *(pa.field(f, cell_type(storage_type(c.type))) for c, f in values),
        *(pa.field(f, collection_type(*_element_types(c.type)[1::2])) for c, f in collections),
    ]
    return Layout(keys, values, collections, pa.schema(fields))


def base_schema(schema: TableSchema) -> pa.Schema:
    """The Arrow schema of ``schema``'s base rows."""
    return layout(schema).arrow


def _key_to(t: CqlType) -> Callable[[Any], Any]:
    if isinstance(t, UserType):
        return int
    key, _ = element_types(t)
    return (lambda k: k.bytes) if key is None else to_storage(key)


def _key_from(t: CqlType) -> Callable[[Any], Any]:
    if isinstance(t, UserType):
        return int
    key, _ = element_types(t)
    return (lambda b: uuid.UUID(bytes=b)) if key is None else from_storage(key)


def _value_to(t: CqlType) -> Callable[[Any], Any]:
    _, value = element_types(t)
    if isinstance(t, UserType):
        types = t.field_types
        return lambda iv: types[iv[0]].serialize(iv[1])
    if isinstance(t, SetType):
        return bool
    assert value is not None
    return to_storage(value)


def _value_from(t: CqlType) -> Callable[[Any, Any], Any]:
    """(key, stored value) -> the element cell's value."""
    _, value = element_types(t)
    if isinstance(t, UserType):
        types = t.field_types
        return lambda k, v: types[k].deserialize(v)
    if isinstance(t, SetType):
        return lambda k, v: v
    assert value is not None
    convert = from_storage(value)
    return lambda k, v: convert(v)


class BaseRowsBuilder:
    """Base rows of row-path writes, one :meth:`add` per write, then :meth:`table`."""

    def __init__(self, schema: TableSchema) -> None:
        self.layout = lay = layout(schema)
        self.statics = frozenset(c.name for c in schema.static_columns)
        self.typed = {c.name: (f, to_storage(c.type)) for c, f in lay.values}
        self.collections = {
            c.name: (f, _key_to(c.type), _value_to(c.type), isinstance(c.type, UserType))
            for c, f in lay.collections
        }
        self._keys = [(f, to_storage(c.type)) for c, f in lay.keys]
        # the fixed and key columns, a value for every row
        self.columns: dict[str, list[Any]] = {
            name: [] for name in (*(f.name for f in FIXED_FIELDS), *(f for _, f in lay.keys))
        }
        # value and collection columns hold only the cells written, as (row, cell): a
        # row's cost follows its cells, not the table's columns (a wide table's row
        # writes a few of thousands)
        self.cells: dict[str, list[tuple[int, Any]]] = {}
        # key and value columns are built in their Arrow types, then cast to storage
        self._built: dict[str, pa.DataType] = {
            **{f: build_type(c.type) for c, f in lay.keys},
            **{f: cell_type(build_type(c.type)) for c, f in lay.values},
            **{f: collection_type(*_element_types(c.type)[0::2]) for c, f in lay.collections},
        }

    def __len__(self) -> int:
        return len(self.columns[SEQ])

    def _cells(self, row: Row, static: bool) -> tuple[dict[str, Any], dict[str, Any]]:
        """A row's cells as typed column values, and the rest (for the residual row)."""
        cells: dict[str, Any] = {}
        rest: dict[str, Any] = {}
        for name, data in row.cells.items():
            if (name in self.statics) != static:  # a dropped column's, re-added as the other kind
                rest[name] = data
                continue
            if isinstance(data, Cell):
                where = self.typed.get(name)
                if where is not None and data.value is not EMPTY:  # EMPTY: residual
                    cells[where[0]] = {
                        "value": None if data.value is None else where[1](data.value),
                        "ts": data.timestamp,
                        "ttl": data.ttl_s,
                        "expiry": data.expiry_s,
                    }
                    continue
            elif isinstance(data, CollectionCells):
                coll = self.collections.get(name)
                if coll is not None:
                    field, key_to, value_to, udt = coll
                    cells[field] = {
                        "tombstone": data.tombstone,
                        "cells": [
                            {
                                "key": key_to(k),
                                "value": None
                                if c.value is None
                                else value_to((k, c.value) if udt else c.value),
                                "ts": c.timestamp,
                                "ttl": c.ttl_s,
                                "expiry": c.expiry_s,
                            }
                            for k, c in data.elements.items()
                        ],
                    }
                    continue
            rest[name] = data
        return cells, rest

    def add(self, bucket: int, pk: bytes, token: int, seq: int, part: Partition) -> None:
        """The rows of write ``part`` (a mutation) to the partition serialized as ``pk``."""
        residual = Partition(part.pk, None, Row(), {}, part.range_tombstones)
        static = part.static
        cells, rest = self._cells(static, True)
        if rest or static.marker is not None or static.deletion is not None:
            residual.static = Row(static.marker, static.deletion, rest)
        if cells or part.deletion is not None:
            self._row(bucket, pk, token, seq, None, None, None, cells, part.deletion)
        for ck, row in part.rows.items():
            if EMPTY in ck:  # a key column's empty value has no typed form either
                residual.rows[ck] = row
                continue
            cells, rest = self._cells(row, False)
            if rest:
                residual.rows[ck] = Row(None, None, rest)
            if cells or row.marker is not None or row.deletion is not None:
                self._row(bucket, pk, token, seq, ck, row.marker, row.deletion, cells, None)
        if not residual.is_empty():
            self._fixed(bucket, pk, token, seq, encode_fragment(residual))
            for name in self.columns:
                if name not in _FIXED_NAMES:
                    self.columns[name].append(None)
            self.columns[STATIC][-1] = False

    def _row(
        self,
        bucket: int,
        pk: bytes,
        token: int,
        seq: int,
        ck: tuple[Any, ...] | None,
        marker: RowMarker | None,
        deletion: int | None,
        cells: dict[str, Any],
        partition_deletion: int | None,
    ) -> None:
        cols = self.columns
        row = len(cols[SEQ])
        self._fixed(bucket, pk, token, seq, None)
        cols[MARKER].append(
            None
            if marker is None
            else {"ts": marker.timestamp, "ttl": marker.ttl_s, "expiry": marker.expiry_s}
        )
        cols[DELETION].append(deletion)
        cols[STATIC].append(ck is None)
        cols[PARTITION_DELETION].append(partition_deletion)
        if ck is None:
            for name, _ in self._keys:
                cols[name].append(None)
        else:
            for (name, convert), value in zip(self._keys, ck, strict=True):
                cols[name].append(convert(value))
        for name, cell in cells.items():
            self.cells.setdefault(name, []).append((row, cell))

    def _fixed(self, bucket: int, pk: bytes, token: int, seq: int, fragment: bytes | None) -> None:
        cols = self.columns
        cols[BUCKET].append(bucket)
        cols[PK].append(pk)
        cols[TOKEN].append(token)
        cols[SEQ].append(seq)
        cols[FRAGMENT].append(fragment)

    def table(self) -> pa.Table:
        arrays = []
        n = len(self)
        # a column no row has a cell of is all null, shared per type: the columns a batch
        # does not write cost nothing per row (``pa.nulls`` would make nullable struct
        # children, which the cell types' non-null ``ts``/``ttl`` refuse in a cast)
        nulls = NullColumns(n, none_array)
        for f in self.layout.arrow:
            data = self.columns.get(f.name)
            if data is None:  # a value or collection column: only the rows with a cell
                written = self.cells.get(f.name)
                if not written:
                    arrays.append(nulls(f.type))
                    continue
                data = [None] * n
                for row, cell in written:
                    data[row] = cell
            built = self._built.get(f.name)
            arrays.append(
                pa.array(data, f.type) if built is None else pa.array(data, built).cast(f.type)
            )
        return pa.Table.from_arrays(arrays, schema=self.layout.arrow)


_FIXED_NAMES = frozenset({BUCKET, PK, TOKEN, SEQ, FRAGMENT})


def write_rows(schema: TableSchema, pk: bytes, part: Partition, seq: int = 0) -> pa.Table:
    """The base rows of one write (bucket and token 0): what tests and size checks use."""
    builder = BaseRowsBuilder(schema)
    builder.add(0, pk, 0, seq, part)
    return builder.table()


def _struct_lists(column: pa.ChunkedArray | pa.Array, fields: Sequence[str]) -> list[list[Any]]:
    """Each of ``fields`` of a struct column as a Python list (null where the struct is)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    valid = column.is_valid()
    return [to_pylist(pc.if_else(valid, column.field(f), None)) for f in fields]


def _column(rows: pa.Table, name: str, n: int) -> list[Any]:
    return rows.column(name).to_pylist() if name in rows.column_names else [None] * n


def row_partitions(schema: TableSchema, rows: pa.Table) -> Iterable[tuple[bytes, Partition]]:
    """Every base row as the partition fragment it holds, with its serialized partition key,
    in the rows' order. Value columns of ``rows`` that ``schema`` does not read (a dropped
    column, an older incarnation of a column added again with another type) are left out."""
    n = rows.num_rows
    if n == 0:
        return []
    names = set(rows.column_names)
    pks = rows.column(PK).to_pylist()
    fragments = _column(rows, FRAGMENT, n)
    statics = _column(rows, STATIC, n)
    partition_deletions = _column(rows, PARTITION_DELETION, n)
    deletions = _column(rows, DELETION, n)
    lay = layout(schema)
    keys = [
        (from_storage(c.type), to_pylist(rows.column(f)) if f in names else [None] * n)
        for c, f in lay.keys
    ]
    if MARKER in names:
        m_ts, m_ttl, m_exp = _struct_lists(rows.column(MARKER), ("ts", "ttl", "expiry"))
    else:
        m_ts = m_ttl = m_exp = [None] * n
    values: list[tuple[str, Callable[[Any], Any], list[Any], list[Any], list[Any], list[Any]]] = []
    for c, f in lay.values:
        if f in names and rows.column(f).null_count < n:
            value, ts, ttl, expiry = _struct_lists(rows.column(f), ("value", "ts", "ttl", "expiry"))
            values.append((c.name, from_storage(c.type), value, ts, ttl, expiry))
    collections: list[tuple[str, Callable[[Any], Any], Callable[[Any, Any], Any], list[Any]]] = []
    for c, f in lay.collections:
        if f in names and rows.column(f).null_count < n:
            data = to_pylist(rows.column(f))
            collections.append((c.name, _key_from(c.type), _value_from(c.type), data))
    out: list[tuple[bytes, Partition]] = []
    pk_values: dict[bytes, tuple[Any, ...]] = {}
    for i in range(n):
        pk_bytes = pks[i]
        pk = pk_values.get(pk_bytes)
        if pk is None:
            pk = pk_values[pk_bytes] = deserialize_partition_key(schema, pk_bytes)
        fragment = fragments[i]
        if fragment is not None:
            part = decode_fragment(fragment)
            part.pk = pk
            out.append((pk_bytes, part))
            continue
        row = Row()
        if m_ts[i] is not None:
            row.marker = RowMarker(m_ts[i], m_ttl[i], m_exp[i])
        row.deletion = deletions[i]
        cells = row.cells
        for name, convert, value, ts, ttl, expiry in values:
            t = ts[i]
            if t is not None:
                v = value[i]
                cells[name] = Cell(t, None if v is None else convert(v), ttl[i], expiry[i])
        for name, key_from, value_from, data in collections:
            state = data[i]
            if state is not None:
                elements: dict[Any, Cell] = {}
                for e in state["cells"]:
                    k = key_from(e["key"])
                    v = e["value"]
                    elements[k] = Cell(
                        e["ts"], None if v is None else value_from(k, v), e["ttl"], e["expiry"]
                    )
                cells[name] = CollectionCells(state["tombstone"], elements)
        if statics[i]:
            out.append((pk_bytes, Partition(pk, partition_deletions[i], row)))
        else:
            ck = tuple(convert(values_[i]) for convert, values_ in keys)
            out.append((pk_bytes, Partition(pk, None, Row(), {ck: row})))
    return out


def partitions(
    schema: TableSchema, rows: pa.Table, hide_dropped: bool = True
) -> dict[bytes, Partition]:
    """The state of every partition in base ``rows``: the merge of its rows in seq order,
    by serialized partition key; as ``schema`` sees it (without what its dropped columns
    wrote, see ``Partition.hide_dropped``) unless ``hide_dropped`` is False."""
    if rows.num_rows == 0:
        return {}
    seqs = rows.column(SEQ).to_numpy()
    if len(seqs) > 1 and not (seqs[1:] >= seqs[:-1]).all():
        rows = rows.take(pa.array(np.argsort(seqs, kind="stable")))
    out: dict[bytes, Partition] = {}
    for pk_bytes, fragment in row_partitions(schema, rows):
        state = out.get(pk_bytes)
        if state is None:
            out[pk_bytes] = fragment
        else:
            state.apply(fragment)
    if hide_dropped and schema.dropped:
        dropped = {d.name for d in schema.dropped}
        statics = {c.name for c in schema.static_columns}
        regulars = {c.name for c in schema.regular_columns}
        readded = schema.readded_at()
        for part in out.values():
            part.hide_dropped(dropped, statics, regulars, readded)
    return out
