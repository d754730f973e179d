"""Reading Arrow arrays back into Python values without losing precision.

``pyarrow``'s ``to_pylist()`` turns ``time64('ns')`` into ``datetime.time`` (microseconds only)
and fails on dates and timestamps outside years 1-9999. ``to_pylist`` here first casts every
temporal child type to its integer storage, which ``CqlType.from_arrow`` accepts exactly.

>>> import pyarrow as pa
>>> to_pylist(pa.array([123456789012], type=pa.time64("ns")))
[123456789012]
"""

from __future__ import annotations

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


__all__ = ["exact_type", "to_pylist"]
