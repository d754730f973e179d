"""Rows of a result straight from Arrow columns to protocol cells, without Python values.

A CDC consumer reads thousands of log rows a poll; one Python object per cell, made from
the column and serialized again, cost more than the read itself. Here each column becomes
its cells (``[int length][bytes]``, length -1 for null) in a few numpy steps, and the
columns are joined row by row in one Arrow kernel: a page is then a slice of one buffer.
Types without a columnar encoding here go through their ``serialize``, one column at a time.

>>> import pyarrow as pa
>>> from cqlcdc.types import native_type
>>> rows = encode_rows(pa.table({"a": pa.array([1, None], pa.int32())}), [native_type("int")])
>>> bytes(rows[0].as_py()).hex(), bytes(rows[1].as_py()).hex()
('0000000400000001', 'ffffffff')
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from cqlcdc.schema.physical import python_values
from cqlcdc.types.base import CqlType

# CQL type name -> (stored Arrow type, big-endian numpy dtype of its protocol bytes)
_FIXED: dict[str, tuple[pa.DataType, str]] = {
    "tinyint": (pa.int8(), ">i1"),
    "smallint": (pa.int16(), ">i2"),
    "int": (pa.int32(), ">i4"),
    "bigint": (pa.int64(), ">i8"),
    "counter": (pa.int64(), ">i8"),
    "float": (pa.float32(), ">f4"),
    "double": (pa.float64(), ">f8"),
}
_BYTES = frozenset({"text", "varchar", "ascii", "blob"})
_UUIDS = frozenset({"uuid", "timeuuid"})
# the hex digits of a uuid's 36 characters (8-4-4-4-12)
_HEX_AT = np.array([i for i in range(36) if i not in (8, 13, 18, 23)])
_NIBBLE = np.full(256, 255, np.uint8)
for _i, _c in enumerate(b"0123456789abcdef"):
    _NIBBLE[_c] = _i
for _i, _c in enumerate(b"ABCDEF"):
    _NIBBLE[_c] = 10 + _i


def encode_rows(table: pa.Table, types: Sequence[CqlType]) -> pa.LargeBinaryArray:
    """Each row of ``table`` (its columns in result order, stored as ``python_values``
    reads them) as its cells one after another: a RESULT Rows body is these, concatenated.

    Args:
        table: the rows, one column per result column.
        types: each column's CQL type.

    Returns:
        One binary value per row.
    """
    if table.num_columns != len(types):
        raise ValueError(f"{table.num_columns} columns for {len(types)} types")
    n = table.num_rows
    if n == 0 or not types:
        return pa.array([b""] * n, pa.large_binary())
    cells = [column_cells(table.column(i), t) for i, t in enumerate(types)]
    if len(cells) == 1:
        return cells[0]
    joined: pa.LargeBinaryArray = pc.binary_join_element_wise(
        *cells, pa.scalar(b"", pa.large_binary())
    )
    return joined


def rows_body(rows: pa.LargeBinaryArray) -> bytes:
    """The cells of ``rows`` as one buffer (a Rows result after its row count)."""
    if not len(rows):
        return b""
    offsets = np.frombuffer(rows.buffers()[1], np.int64, len(rows) + 1, rows.offset * 8)
    data = rows.buffers()[2]
    if data is None:
        return b""
    body: bytes = data.slice(int(offsets[0]), int(offsets[-1] - offsets[0])).to_pybytes()
    return body


def row_sizes(rows: pa.LargeBinaryArray) -> npt.NDArray[np.int64]:
    """Each row's size in bytes, its cells' length prefixes included."""
    sizes: npt.NDArray[np.int64] = pc.binary_length(rows).to_numpy(zero_copy_only=False)
    return sizes


def column_cells(column: pa.ChunkedArray | pa.Array, ctype: CqlType) -> pa.LargeBinaryArray:
    """One column's cells: each value's protocol bytes after its length (-1: null)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    n = len(array)
    if n and array.null_count == n:  # a log's unset columns: nulls only
        return _matrix(np.tile(np.frombuffer(b"\xff\xff\xff\xff", np.uint8), (n, 1)))
    payload = _payload(array, ctype)
    if payload is None:  # no columnar encoding: the type serializes each value
        values = python_values(ctype, array)
        payload = pa.array(
            [None if v is None else ctype.serialize(v) for v in values], pa.large_binary()
        )
    return _framed(payload)


def _payload(array: pa.Array, ctype: CqlType) -> pa.LargeBinaryArray | None:
    """The protocol bytes of each value (null stays null), or None when this module has no
    columnar encoding for the type as stored."""
    name = getattr(ctype, "cql_name", "")
    stored = array.type
    if name in _FIXED and stored == _FIXED[name][0]:
        values = array.to_numpy(zero_copy_only=False) if not array.null_count else None
        if values is None:
            values = array.fill_null(0).to_numpy(zero_copy_only=False)
        return _fixed(values.astype(_FIXED[name][1]).view(np.uint8), array)
    if name == "boolean" and pa.types.is_boolean(stored):
        values = array.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
        return _fixed(values, array)
    if name in _BYTES and stored in (pa.string(), pa.binary(), pa.large_string()):
        return array.cast(pa.large_binary())
    if name in _BYTES and stored == pa.large_binary():
        return array
    if name in _UUIDS and stored == pa.string():
        return _uuid_bytes(array)
    return None


def _matrix(cells: npt.NDArray[np.uint8]) -> pa.LargeBinaryArray:
    """Cells of one width, a row of ``cells`` each."""
    n, width = cells.shape
    offsets = np.arange(n + 1, dtype=np.int64) * width
    return pa.Array.from_buffers(
        pa.large_binary(),
        n,
        [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(cells))],
    )


def _fixed(data: npt.NDArray[np.uint8], array: pa.Array) -> pa.LargeBinaryArray:
    """Fixed-width values (``data``: their bytes, row after row) with ``array``'s nulls."""
    n = len(array)
    width = len(data) // n if n else 0
    offsets = np.arange(n + 1, dtype=np.int64) * width
    validity = array.buffers()[0] if array.null_count else None
    if validity is not None and array.offset:
        validity = pc.is_valid(array).buffers()[1]
    return pa.Array.from_buffers(
        pa.large_binary(),
        n,
        [validity, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))],
        null_count=array.null_count,
    )


def _uuid_bytes(array: pa.Array) -> pa.LargeBinaryArray | None:
    """A uuid stored as its 36-character text, as its 16 bytes (None: some text is not
    in that form, and the type's own parsing decides)."""
    n = len(array)
    text = array.fill_null("00000000-0000-0000-0000-000000000000") if array.null_count else array
    offsets = np.frombuffer(text.buffers()[1], np.int32, n + 1, text.offset * 4)
    if n and (np.diff(offsets) != 36).any():
        return None
    data = text.buffers()[2]
    chars = np.frombuffer(data, np.uint8, n * 36, int(offsets[0])).reshape(n, 36)
    digits = _NIBBLE[chars[:, _HEX_AT]]
    if (digits == 255).any():
        return None
    packed = ((digits[:, 0::2] << 4) | digits[:, 1::2]).astype(np.uint8)
    return _fixed(packed.reshape(-1), array)


def _framed(payload: pa.Array) -> pa.LargeBinaryArray:
    """Each value after its big-endian int32 length; a null as length -1 alone."""
    n = len(payload)
    offsets = np.frombuffer(payload.buffers()[1], np.int64, n + 1, payload.offset * 8)
    lengths = np.diff(offsets)
    if n and not payload.null_count and (lengths == lengths[0]).all():
        # one width (numbers, uuids, stream ids): the cells are a matrix
        width = int(lengths[0])
        cells = np.empty((n, 4 + width), np.uint8)
        cells[:, :4] = np.frombuffer(width.to_bytes(4, "big"), np.uint8)
        if width:
            data = np.frombuffer(payload.buffers()[2], np.uint8, n * width, int(offsets[0]))
            cells[:, 4:] = data.reshape(n, width)
        return _matrix(cells)
    valid = (
        pc.is_valid(payload).to_numpy(zero_copy_only=False)
        if payload.null_count
        else np.ones(n, bool)
    )
    lengths = np.where(valid, lengths, 0)
    framed = lengths + 4
    out_offsets = np.zeros(n + 1, np.int64)
    np.cumsum(framed, out=out_offsets[1:])
    out = np.empty(int(out_offsets[-1]), np.uint8)
    prefixes = np.where(valid, lengths, -1).astype(">i4").view(np.uint8).reshape(n, 4)
    out[out_offsets[:-1, None] + np.arange(4)] = prefixes
    total = int(lengths.sum())
    if total:
        data = np.frombuffer(payload.buffers()[2], np.uint8)
        rows = np.repeat(np.arange(n), lengths)
        within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        out[out_offsets[rows] + 4 + within] = data[offsets[rows] + within]
    return pa.Array.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(out_offsets), pa.py_buffer(out)]
    )


__all__ = ["column_cells", "encode_rows", "row_sizes", "rows_body"]
