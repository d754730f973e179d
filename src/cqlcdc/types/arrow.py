"""Reading Arrow arrays back into Python values without losing precision.

``pyarrow``'s ``to_pylist()`` turns ``time64('ns')`` into ``datetime.time`` (microseconds only)
and fails on dates and timestamps outside years 1-9999. ``to_pylist`` here first casts every
temporal child type to its integer storage, which ``CqlType.from_arrow`` accepts exactly.

>>> import pyarrow as pa
>>> to_pylist(pa.array([123456789012], type=pa.time64("ns")))
[123456789012]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa


def exact_type(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with date32 -> int32, time64/timestamp -> int64, recursively."""
    if pa.types.is_date32(data_type):
        return pa.int32()
    if pa.types.is_time64(data_type) or pa.types.is_timestamp(data_type):
        return pa.int64()
    if pa.types.is_map(data_type):
        return pa.map_(exact_type(data_type.key_type), exact_type(data_type.item_type))
    if pa.types.is_list(data_type):
        return pa.list_(exact_type(data_type.value_type))
    if pa.types.is_struct(data_type):
        return pa.struct([pa.field(f.name, exact_type(f.type), f.nullable) for f in data_type])
    return data_type


def to_pylist(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """``array.to_pylist()`` with temporal values as integers (days, ns, ms)."""
    return list(array.cast(exact_type(array.type)).to_pylist())


class NullColumns:
    """All-null columns of ``length`` rows: one array per type, shared by every column of
    that type (Arrow arrays are immutable). A wide table's rows written with a few of its
    thousands of columns then cost what their cells cost, not a buffer per column per row.

    Args:
        length: the rows of each column.
        make: how the one array of a type is made (``pa.nulls``; ``pa.array`` of Nones
            where the type's non-null struct children must hold values, not nulls).

    >>> nulls = NullColumns(3)
    >>> nulls(pa.int32()) is nulls(pa.int32()), nulls(pa.string()).null_count
    (True, 3)
    """

    def __init__(
        self, length: int, make: Callable[[int, pa.DataType], pa.Array] = pa.nulls
    ) -> None:
        self.length = length
        self._make = make
        self._made: dict[pa.DataType, pa.Array] = {}

    def __call__(self, data_type: pa.DataType) -> pa.Array:
        made = self._made.get(data_type)
        if made is None:
            made = self._made[data_type] = self._make(self.length, data_type)
        return made


def none_array(length: int, data_type: pa.DataType) -> pa.Array:
    """``length`` nulls of ``data_type`` as ``pa.array`` makes them (non-null struct
    children hold zero values, which a cast to the same type accepts)."""
    return pa.array([None] * length, data_type)


__all__ = ["NullColumns", "exact_type", "none_array", "to_pylist"]
