"""Cells from Arrow columns (``server.column_cells``) are byte for byte the cells the
per-value path makes (``serialize_rows``): every type with a columnar encoding, nulls,
sliced arrays (a later page), and types that fall back to their ``serialize``."""

from __future__ import annotations

import io
import uuid
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from cqlcdc.schema.physical import python_values, value_type
from cqlcdc.server.column_cells import column_cells, encode_rows, row_sizes, rows_body
from cqlcdc.server.results import (
    ColumnSpec,
    EncodedRowsResult,
    RowsMetadata,
    RowsResult,
    serialize_rows,
)
from cqlcdc.types import SetType, native_type
from cqlcdc.types.base import CqlType


def _int(bits: int) -> st.SearchStrategy[int]:
    return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _timeuuid(n: int) -> uuid.UUID:
    return uuid.UUID(fields=(n & 0xFFFFFFFF, n >> 32 & 0xFFFF, 0x1000 | (n & 0xFFF), 0x80, 1, n))


# a type, the values it takes; those with a columnar encoding and some without
TYPES: list[tuple[CqlType, st.SearchStrategy[Any]]] = [
    (native_type("tinyint"), _int(8)),
    (native_type("smallint"), _int(16)),
    (native_type("int"), _int(32)),
    (native_type("bigint"), _int(64)),
    (native_type("counter"), _int(64)),
    (native_type("double"), st.floats(allow_nan=False)),
    (native_type("float"), st.floats(width=32, allow_nan=False)),
    (native_type("boolean"), st.booleans()),
    (native_type("text"), st.text()),
    (native_type("ascii"), st.text(st.characters(max_codepoint=127))),
    (native_type("blob"), st.binary()),
    (native_type("uuid"), st.uuids()),
    (native_type("timeuuid"), st.integers(0, (1 << 48) - 1).map(_timeuuid)),
    (native_type("timestamp"), _int(64)),
    (native_type("varint"), st.integers(-(1 << 100), 1 << 100)),
    (SetType(native_type("int")), st.frozensets(_int(32), max_size=3)),
]


def _column(ctype: CqlType, values: list[Any]) -> pa.Array:
    """The column as a log output stores it."""
    stored = value_type(ctype)
    return pa.array([ctype.to_arrow(ctype.validate(v, "c")) for v in values], stored)


def _expected(ctype: CqlType, values: list[Any]) -> bytes:
    out = io.BytesIO()
    for v in values:
        cell = None if v is None else ctype.serialize(ctype.validate(v, "c"))
        out.write(b"\xff\xff\xff\xff" if cell is None else len(cell).to_bytes(4, "big") + cell)
    return out.getvalue()


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_each_type_encodes_as_its_serialize(data: st.DataObject) -> None:
    for ctype, values in TYPES:
        got = data.draw(st.lists(st.none() | values, max_size=12))
        cells = column_cells(_column(ctype, got), ctype)
        assert b"".join(bytes(c) for c in cells.to_pylist()) == _expected(ctype, got), ctype


@settings(max_examples=25, deadline=None)
@given(st.data())
def test_a_slice_encodes_its_own_rows(data: st.DataObject) -> None:
    """A later page is a slice of the result: offsets into the buffers are honoured."""
    for ctype, values in TYPES:
        got = data.draw(st.lists(st.none() | values, min_size=1, max_size=12))
        start = data.draw(st.integers(0, len(got) - 1))
        column = _column(ctype, got).slice(start)
        cells = column_cells(column, ctype)
        assert b"".join(bytes(c) for c in cells.to_pylist()) == _expected(ctype, got[start:])


def test_rows_body_is_the_per_value_rows_result() -> None:
    """The Rows body from columns equals the one from Python values, sizes included."""
    types: list[CqlType] = [native_type("blob"), native_type("timeuuid"), native_type("int")]
    table = pa.table(
        {
            "a": _column(types[0], [b"\x01" * 16, None, b""]),
            "b": _column(types[1], [_timeuuid(1), _timeuuid(2), None]),
            "c": _column(types[2], [None, 7, -1]),
        }
    )
    columns = tuple(ColumnSpec("ks", "t", n, t) for n, t in zip("abc", types, strict=True))
    values = list(
        zip(*(python_values(t, table.column(i)) for i, t in enumerate(types)), strict=True)
    )
    meta = RowsMetadata(columns)
    old = io.BytesIO()
    RowsResult(meta, serialize_rows(columns, values)).write(old, 5)
    for start in range(3):
        rows = encode_rows(table.slice(start), types)
        new = io.BytesIO()
        EncodedRowsResult(meta, len(rows), rows_body(rows)).write(new, 5)
        expected = io.BytesIO()
        RowsResult(meta, serialize_rows(columns, values[start:])).write(expected, 5)
        assert new.getvalue() == expected.getvalue()
    sizes = row_sizes(encode_rows(table, types))
    assert sizes.tolist() == [4 + 16 + 4 + 16 + 4, 4 + 4 + 16 + 4 + 4, 4 + 4 + 4 + 4]


def test_columns_of_one_kind_of_cell() -> None:
    """Nulls only, empty values only, one width: the shortcuts give the general cells."""
    blob, int_ = native_type("blob"), native_type("int")
    for ctype, values in [(blob, [b"", b""]), (blob, [None, None]), (int_, [None] * 3)]:
        cells = column_cells(_column(ctype, values), ctype)
        assert b"".join(bytes(c) for c in cells.to_pylist()) == _expected(ctype, values)


def test_uuid_text_not_in_canonical_form_goes_through_the_type() -> None:
    """A uuid stored in another text form (a legacy file) is parsed by the type."""
    ctype = native_type("uuid")
    value = uuid.UUID(int=(1 << 128) - 2)
    stored = pa.array([str(value).upper(), "{" + str(value) + "}", None])
    cells = column_cells(stored, ctype)
    assert [None if c is None else bytes(c) for c in cells.to_pylist()] == [
        b"\x00\x00\x00\x10" + value.bytes,
        b"\x00\x00\x00\x10" + value.bytes,
        b"\xff\xff\xff\xff",
    ]
